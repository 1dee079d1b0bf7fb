// manifest.hpp - what an op reduces, and what each node tells the others first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <optional>

#include "status.hpp"

namespace zring::collective {

struct TensorSpec {
  std::string name;
  std::vector<std::uint64_t> shape;
  std::uint64_t numel = 0;
  friend bool operator==(const TensorSpec& a, const TensorSpec& b) {
    return a.name == b.name && a.shape == b.shape && a.numel == b.numel;
  }
};

// The tensors of an op (sorted by name: the order they are fused in) and the
// method, as text. Every rank of an op must submit the same manifest.
struct Manifest {
  std::string method;
  std::vector<TensorSpec> tensors;
  [[nodiscard]] std::uint64_t elements() const noexcept;
  friend bool operator==(const Manifest& a, const Manifest& b) {
    return a.method == b.method && a.tensors == b.tensors;
  }
};

// The first difference between two manifests as a sentence, or "" when they
// are equal. a_who / b_who name the submitters ("ranks 0-1 (node a)").
std::string manifest_difference(const Manifest& a, const std::string& a_who, const Manifest& b,
                                const std::string& b_who);

// A non-finite value of a randomk contribution outside the sampled indices:
// it travels on its own so that inf/nan always reach the result.
struct NonFinite {
  std::uint32_t tensor = 0;  // index in the manifest
  std::uint32_t index = 0;   // element within the tensor
  float value = 0.0f;
};

// What one node tells every other node before the data moves: its manifest,
// whether it can take part at all, and what the method needs agreed first.
struct NodeSummary {
  Manifest manifest;
  std::optional<Status> failure;   // this node fails the op, and says why
  std::vector<float> stats;        // affine methods: per-block statistics of its ranks
  std::vector<NonFinite> nonfinite;  // randomk: see NonFinite
  std::uint64_t blob_bytes = 0;    // sparse methods: size of its payload blob
};

}  // namespace zring::collective
