// client_test_util.hpp - gradients and independent reference computations for
// the CompressedAllReduce tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>
#include <zring/zring.hpp>

#include "support/error_code.hpp"

namespace zring::api_test {

// Methods exercised everywhere (the ef: one checks the wrapper too).
inline const std::vector<std::string>& methods() {
  static const std::vector<std::string> all = {
      "none",          "fp16",    "bf16",    "topk:5", "topk:10%",    "randomk:7", "randomk:25%",
      "threshold:0.5", "quant:2", "quant:8", "sign",   "ef:topk:10%", "ef:quant:4"};
  return all;
}

// Deterministic, different per (rank, name) values.
inline std::vector<float> values(std::size_t n, int rank, int salt) {
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i)
    x[i] = std::sin(0.61f * static_cast<float>(i) + 1.7f * static_cast<float>(rank) +
                    0.3f * static_cast<float>(salt)) *
           static_cast<float>(1 + (i + static_cast<std::size_t>(rank)) % 4);
  return x;
}

// A rank's gradients: a matrix, a vector, a scalar.
inline TensorMap gradients(int rank) {
  TensorMap g;
  g.emplace("conv.weight", Tensor(values(24, rank, 1), {2, 3, 4}));
  g.emplace("fc.bias", Tensor(values(50, rank, 2)));
  g.emplace("scale", Tensor(values(1, rank, 3), {}));
  return g;
}

// The dense form of a compressed gradient's view, scattered here rather
// than with the library's to_dense, as an independent reference.
inline std::vector<float> scatter(const CompressedGradient& g) {
  if (g.indices.empty() && g.values.size() == g.original_size) return g.values;
  std::vector<float> dense(g.original_size, 0.0f);
  for (std::size_t j = 0; j < g.indices.size(); ++j) dense[g.indices[j]] = g.values[j];
  return dense;
}

// The code of the zring::Error a call throws: tests/support.
using zring::testing::code_of;

inline bool mentions(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace zring::api_test
