// mlp.hpp - a small multi-layer perceptron and a learnable synthetic task.
//
// The task: 10 classes in 64 dimensions, each class a mixture of two
// Gaussian clusters (so a linear model cannot separate it well and the
// hidden layer earns its keep). Every worker draws its own training
// samples; the test set is the same for all.
#pragma once

#include <cstdint>
#include <random>
#include <vector>
#include <zring/zring.hpp>

namespace ring_demo {

inline constexpr std::size_t kInputs = 64;
inline constexpr std::size_t kHidden = 512;
inline constexpr std::size_t kClasses = 10;

struct Batch {
  std::vector<float> x;  // rows of kInputs
  std::vector<int> y;
  [[nodiscard]] std::size_t size() const { return y.size(); }
};

class Task {
 public:
  explicit Task(std::uint64_t seed);
  Batch sample(std::mt19937_64& rng, std::size_t n) const;

 private:
  std::vector<float> centers_;  // 2 per class
};

struct Metrics {
  double loss = 0;
  double accuracy = 0;
};

class Mlp {
 public:
  explicit Mlp(std::uint64_t seed);
  // Gradients of the mean cross-entropy over the batch, by parameter name.
  zring::TensorMap gradients(const Batch& batch, double* loss = nullptr) const;
  void step(const zring::TensorMap& gradients, float learning_rate);
  Metrics evaluate(const Batch& batch) const;
  [[nodiscard]] std::uint64_t checksum() const;  // equal on every worker iff weights are
  [[nodiscard]] std::size_t parameters() const;

 private:
  void forward(const float* x, std::vector<float>& hidden, std::vector<float>& probs) const;
  std::vector<float> w1_, b1_, w2_, b2_;
};

}  // namespace ring_demo
