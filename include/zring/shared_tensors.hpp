// zring/shared_tensors.hpp - tensors stored where zringd can reach them.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>
#include <zring/tensor.hpp>

namespace zring {

// A view of n contiguous values (the public headers keep to C++17, which
// has no std::span).
template <class T>
class Span {
 public:
  Span() = default;
  Span(T* data, std::size_t size) noexcept : data_(data), size_(size) {}
  // Span<float> -> Span<const float>.
  template <class U, class = std::enable_if_t<std::is_convertible_v<U (*)[], T (*)[]>>>
  Span(const Span<U>& other) noexcept : data_(other.data()), size_(other.size()) {}
  [[nodiscard]] T* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] T* begin() const noexcept { return data_; }
  [[nodiscard]] T* end() const noexcept { return data_ + size_; }
  T& operator[](std::size_t i) const noexcept { return data_[i]; }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

// Names and shapes of a set of tensors (row-major; an empty shape is a
// scalar), ordered by name: the order in which zring fuses them.
using TensorShapes = std::map<std::string, std::vector<std::size_t>>;

// Named float32 tensors laid out one after another, in name order, in one
// block of memory. Made by CompressedAllReduce::make_shared_tensors: for a
// connected object the block is a buffer that its zringd maps too, so
// all_reduce_in_place(SharedTensors&) hands the values over and gets the
// averages back with no copy on either side of the IPC hop. Compute
// gradients into the spans (or copy them in), then reduce.
//
// Copies share the same memory (like a shared_ptr); the memory lives as
// long as any copy does, also after the CompressedAllReduce is gone.
class SharedTensors {
 public:
  SharedTensors() = default;  // no tensors

  // The values of one tensor; throws zring::Error(missing_tensor).
  [[nodiscard]] Span<float> operator[](const std::string& name);
  [[nodiscard]] Span<const float> operator[](const std::string& name) const;
  // Its shape; throws zring::Error(missing_tensor).
  [[nodiscard]] const std::vector<std::size_t>& shape(const std::string& name) const;
  // Every value, the tensors one after another in name order.
  [[nodiscard]] Span<float> values() noexcept;
  [[nodiscard]] Span<const float> values() const noexcept;
  [[nodiscard]] std::size_t numel() const noexcept;
  [[nodiscard]] const TensorShapes& shapes() const noexcept;

  // The same tensors as an ordinary TensorMap (a copy).
  [[nodiscard]] TensorMap to_tensors() const;
  // Copies the values of `tensors` in: the same names, each with the same
  // number of values (zring::Error missing_tensor / size_mismatch if not,
  // and then nothing is copied).
  void assign(const TensorMap& tensors);

  // Whether the values sit in a buffer zringd maps right now, so that the
  // next all_reduce_in_place copies nothing. False for a standalone object,
  // and after the buffer was given up (see make_shared_tensors).
  [[nodiscard]] bool zero_copy() const noexcept;

  struct Storage;  // internal

 private:
  friend class CompressedAllReduce;
  explicit SharedTensors(std::shared_ptr<Storage> storage) : storage_(std::move(storage)) {}
  std::shared_ptr<Storage> storage_;
};

}  // namespace zring
