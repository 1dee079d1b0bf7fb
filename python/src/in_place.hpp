// in_place.hpp - reducing arrays where they are (CompressedAllReduce::all_reduce_in_place
// with TensorViews over the caller's memory).
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <vector>
#include <zring/compressed_all_reduce.hpp>

#include "arrays.hpp"

namespace zring::python {

// A dict[str, array] whose averages are written over its own values.
// C-contiguous arrays are reduced where they are; any other (transposed,
// sliced with steps, reversed) is gathered into a temporary, reduced with
// the rest in the same op, and scattered back.
class InPlaceDict {
 public:
  // Takes the dict apart (needs the GIL). Throws zring::Error(invalid_argument)
  // naming the tensor, besides array_refs' errors, for a read-only array, an
  // array whose elements share memory (a stride of 0, as broadcast_to or
  // expand make), and two arrays whose memory overlaps.
  static InPlaceDict from_dict(const pybind11::dict& tensors, const char* op);

  // The op (no GIL). When it throws, the values are as all_reduce_in_place
  // of TensorViews leaves them.
  void reduce(CompressedAllReduce& ar) const;
  // The broadcast from `root` instead (no GIL): root's values written over
  // every array, bit for bit.
  void broadcast(CompressedAllReduce& ar, std::size_t root) const;

 private:
  // Runs op on views of the arrays: their own memory, or temporaries
  // gathered from them and scattered back once op returned.
  template <class Op>
  void over_views(Op&& op) const;

  std::vector<ArrayRef> arrays_;
};

// Tensors laid out one after another, from the first value on, in one
// C-contiguous float32 buffer (a DDP bucket): layout is a sequence of
// (name, shape) pairs whose sizes add up to the buffer's.
class PackedBuffer {
 public:
  // Needs the GIL; invalid_argument for a buffer that is not a writeable
  // C-contiguous float32 array (or CPU tensor), or a layout that does not
  // fit it.
  static PackedBuffer from(const pybind11::handle& buffer, const pybind11::handle& layout,
                           const char* op);

  void reduce(CompressedAllReduce& ar) const { ar.all_reduce_in_place(views_); }

 private:
  ArrayRef buffer_;
  TensorViews views_;
};

}  // namespace zring::python
