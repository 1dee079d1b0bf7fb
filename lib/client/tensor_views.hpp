// tensor_views.hpp - TensorViews checked and put in fusion order (internal).
#pragma once

#include <cstddef>
#include <vector>
#include <zring/shared_tensors.hpp>
#include <zring/tensor.hpp>

namespace zring::client {

// One view in fusion (name) order, with its number of values and where its
// values start in the fused buffer.
struct FusedView {
  const TensorView* view;
  std::size_t numel;
  std::size_t offset;
};

// The views sorted by name, with their sizes and offsets. Throws
// invalid_argument naming the tensor: a duplicate name, a null data pointer
// for a tensor with values, a shape whose size overflows or that indices
// cannot address (2^32 - 1 values per tensor, as for a TensorMap).
std::vector<FusedView> fuse_order(const TensorViews& views, const char* op = "all_reduce_in_place");

// Where each input's averages go, in fused order, for an out-of-place op
// (`op`, for messages): outputs[i] is the output view of fused[i]'s name.
// Throws invalid_argument naming the tensor: an input without an output or
// an output without an input of its name, a shape that differs, a null
// data pointer, an output named twice, or an output that shares memory
// with another output or with an input.
std::vector<const TensorView*> outputs_for(const std::vector<FusedView>& fused,
                                           const TensorViews& outputs, const char* op);

// A TensorMap copy of the views' values (the standalone object's way).
TensorMap map_of(const std::vector<FusedView>& fused);

// The shapes of the views, for a manifest.
TensorShapes shapes_of(const std::vector<FusedView>& fused);

}  // namespace zring::client
