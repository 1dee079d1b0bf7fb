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
std::vector<FusedView> fuse_order(const TensorViews& views);

// The shapes of the views, for a manifest.
TensorShapes shapes_of(const std::vector<FusedView>& fused);

}  // namespace zring::client
