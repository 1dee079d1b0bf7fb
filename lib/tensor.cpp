#include <string>
#include <zring/error.hpp>
#include <zring/tensor.hpp>

namespace zring {

std::size_t shape_numel(const std::vector<std::size_t>& shape) {
  std::size_t n = 1;
  for (std::size_t extent : shape) n *= extent;
  return n;
}

Tensor::Tensor(std::vector<float> values) : values_(std::move(values)), shape_{values_.size()} {}

Tensor::Tensor(std::vector<float> values, std::vector<std::size_t> shape)
    : values_(std::move(values)), shape_(std::move(shape)) {
  if (shape_numel(shape_) != values_.size()) {
    std::string dims;
    for (std::size_t extent : shape_) dims += (dims.empty() ? "" : "x") + std::to_string(extent);
    throw Error(ErrorCode::size_mismatch,
                "Tensor: shape [" + dims + "] holds " + std::to_string(shape_numel(shape_)) +
                    " elements but " + std::to_string(values_.size()) + " values were given");
  }
}

}  // namespace zring
