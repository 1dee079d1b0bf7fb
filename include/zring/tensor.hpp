// zring/tensor.hpp - an owning float32 buffer with a shape.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace zring {

// A dense, contiguous float32 tensor. The shape is informational for zring
// (all-reduce works on the flat values) but is always carried through, so a
// result has the shape of its input.
class Tensor {
 public:
  Tensor() = default;
  // A 1-D tensor of values.size() elements.
  explicit Tensor(std::vector<float> values);
  // A tensor of the given shape; throws zring::Error (size_mismatch) when the
  // product of the shape differs from values.size(). An empty shape is a
  // scalar and needs exactly one value.
  Tensor(std::vector<float> values, std::vector<std::size_t> shape);

  // The flat values, row-major, contiguous: data()[i], data().data().
  [[nodiscard]] std::vector<float>& data() noexcept { return values_; }
  [[nodiscard]] const std::vector<float>& data() const noexcept { return values_; }
  [[nodiscard]] const std::vector<std::size_t>& shape() const noexcept { return shape_; }
  [[nodiscard]] std::size_t numel() const noexcept { return values_.size(); }

  float& operator[](std::size_t i) { return values_[i]; }
  const float& operator[](std::size_t i) const { return values_[i]; }

  friend bool operator==(const Tensor& a, const Tensor& b) {
    return a.shape_ == b.shape_ && a.values_ == b.values_;
  }

 private:
  std::vector<float> values_;
  std::vector<std::size_t> shape_{0};
};

// Named tensors, ordered by name: the order in which zring fuses them.
using TensorMap = std::map<std::string, Tensor>;

// A tensor in memory the caller owns (a framework's buffer, a numpy array,
// a torch tensor): its name, its shape and where its shape_numel(shape)
// float32 values are (row-major, contiguous). zring never keeps the pointer
// beyond the call it is given to.
struct TensorView {
  std::string name;
  std::vector<std::size_t> shape;
  float* data = nullptr;
};
// Views in any order: zring fuses them in name order, as a TensorMap.
using TensorViews = std::vector<TensorView>;

// Product of the extents of a shape (1 for a scalar's empty shape).
std::size_t shape_numel(const std::vector<std::size_t>& shape);

}  // namespace zring
