// local_aggregator.hpp - the seed's CompressedAllReduce semantics, in process.
//
// Compresses one rank's gradients (with error feedback when the method has
// it) and averages them with the other ranks' compressed gradients handed in
// by the caller. No transport: the standalone client is exactly this, and the
// connected client uses it for the operations that never leave the process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>
#include <zring/compressed_all_reduce.hpp>

#include "codec/codec.hpp"
#include "codec/error_feedback.hpp"

namespace zring::client {

// Refuses (invalid_argument, naming the tensor) a tensor whose values
// disagree with its shape (data() is mutable) or that indices cannot
// address: before it reaches a codec or a buffer sized from its shape.
void check_inputs(const TensorMap& gradients);

class LocalAggregator {
 public:
  // Throws invalid_argument when world_size is 0.
  LocalAggregator(CompressionMethod method, std::size_t world_size);

  // Compresses every tensor. Each call is one step: randomk draws its
  // indices from tensor_seed(step, name), so ranks calling in lockstep draw
  // the same indices. With error feedback, each tensor's residual (by name)
  // is updated. The result's shapes are the tensors' shapes.
  [[nodiscard]] CompressedMap compress(const TensorMap& gradients);

  // (D(C(own)) + sum over peers of their view) / (peers.size() + 1), summed
  // in float, own contribution first, then peers in order; shapes are the
  // local ones. Every check runs before anything is compressed, so a call
  // that throws leaves the step and the residuals as they were:
  //   count_mismatch    peers.size() + 1 != world_size
  //   missing_tensor    a name missing from a peer, or a peer's extra name
  //   size_mismatch     a peer's original_size differs from the local numel
  //   malformed_message a peer's view is inconsistent with its original_size
  [[nodiscard]] TensorMap average(const TensorMap& gradients,
                                  const std::vector<CompressedMap>& peers);

  [[nodiscard]] std::size_t world_size() const noexcept { return world_size_; }
  [[nodiscard]] const CompressionMethod& method() const noexcept { return method_; }
  // Every compressing call (compress or average) counts as one op; bytes are
  // the payloads this rank produced and their dense float32 cost.
  [[nodiscard]] CompressedAllReduce::Traffic traffic() const noexcept { return traffic_; }

 private:
  CompressedGradient compress_one(const std::string& name, const Tensor& tensor,
                                  std::uint64_t step);

  CompressionMethod method_;
  std::size_t world_size_;
  std::unique_ptr<codec::Codec> codec_;  // the method without error feedback
  codec::ErrorFeedback feedback_;        // residuals, used when method_ has it
  std::uint64_t step_ = 0;               // compressing calls so far
  CompressedAllReduce::Traffic traffic_;
};

}  // namespace zring::client
