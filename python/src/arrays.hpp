// arrays.hpp - numpy arrays and torch tensors as zring reads and writes them.
//
// A dict is taken apart while the GIL is held: names, data pointers, shapes,
// strides, and a reference that keeps each array or tensor alive (no copy).
// The values are then read or written with the GIL released: a memcpy for a
// C-contiguous array, a strided walk otherwise.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>
#include <zring/tensor.hpp>

namespace zring::python {

// One float32 array: where its values are and how they are laid out.
struct ArrayRef {
  std::string name;
  pybind11::object keep_alive;  // the numpy array or the torch tensor
  char* data = nullptr;         // first element
  std::vector<std::size_t> shape;
  std::vector<std::ptrdiff_t> strides;  // in bytes; may be negative or 0
  bool is_torch = false;
  bool writeable = true;

  [[nodiscard]] std::size_t numel() const { return shape_numel(shape); }
  // Row-major contiguous and float-aligned: usable as a TensorView as it is.
  [[nodiscard]] bool contiguous() const;
};

// Checks and takes apart one value: a numpy array or a CPU torch tensor of
// float32. Throws zring::Error(invalid_argument) naming the tensor and `op`
// for anything else (another dtype, a CUDA or sparse tensor, a list, ...).
// Needs the GIL.
ArrayRef array_ref(const std::string& name, const pybind11::handle& value, const char* op);

// A numpy array over a's memory (a itself when it is one; a view that
// keeps a torch tensor alive otherwise, without torch's numpy(), which
// refuses a tensor that requires grad). Needs the GIL.
pybind11::array numpy_view(const ArrayRef& a);

// array_ref of every item of dict[str, array], in the dict's order; a key
// that is not a str is invalid_argument too. Needs the GIL.
std::vector<ArrayRef> array_refs(const pybind11::dict& tensors, const char* op);

// A shape given as a sequence of non-negative ints (a tuple, a list, a
// torch.Size) or one int; invalid_argument naming the tensor otherwise.
std::vector<std::size_t> shape_from(const pybind11::handle& shape, const std::string& name,
                                    const char* op);

// a's values as one C-contiguous run of floats: its own memory when they
// are one (or there are none), else gathered into `room`, made here. No GIL.
float* contiguous_values(const ArrayRef& a, std::unique_ptr<float[]>& room);

// The values of `a` in row-major order into out (a.numel() floats). No GIL.
void copy_out(const ArrayRef& a, float* out);
// Row-major values from in over the values of `a`. No GIL.
void copy_in(const float* in, const ArrayRef& a);

// Copies of the values as zring::Tensors (for the calls that take a
// TensorMap: all_reduce_with_peers, compress_for_transmission). No GIL.
TensorMap to_tensors(const std::vector<ArrayRef>& arrays);

// A new, uninitialised C-contiguous float32 numpy array (numpy.empty).
pybind11::array new_array(const std::vector<std::size_t>& shape);

// A dict with the arrays' names in their order, each value arrays[i] as a
// numpy array, or as torch.from_numpy of it when refs[i] is a torch tensor.
pybind11::dict result_dict(const std::vector<ArrayRef>& refs,
                           const std::vector<pybind11::array>& arrays);

// A numpy array that takes over values' buffer (no copy).
pybind11::array owning_array(std::vector<float>&& values, const std::vector<std::size_t>& shape);

// A read-only numpy view of a vector that lives inside `owner`.
template <typename T>
pybind11::object readonly_view(const std::vector<T>& values, pybind11::handle owner);

}  // namespace zring::python
