// local_aggregator.cpp - compress one rank's gradients, average with peers.
#include "client/local_aggregator.hpp"

#include <limits>
#include <string>
#include <zring/error.hpp>

namespace zring::client {
namespace {

std::string quoted(const std::string& name) { return "'" + name + "'"; }

std::string peer_label(std::size_t j) { return "peers[" + std::to_string(j) + "]"; }

void check_count(std::size_t peers, std::size_t world_size) {
  if (peers + 1 != world_size)
    throw Error(ErrorCode::count_mismatch,
                "all_reduce_with_peers: " + std::to_string(peers) +
                    " peer contributions + this rank = " + std::to_string(peers + 1) +
                    ", but world_size is " + std::to_string(world_size) +
                    "; pass one CompressedMap per other rank");
}

// The view must be one of the two forms CompressedGradient documents, so
// summing it can never read or write out of bounds: dense (no indices,
// original_size values) or sparse (one value per index, each in range).
// No indices and no values is the sparse form of an all-zero tensor.
void check_view(const CompressedGradient& g, const std::string& name, std::size_t j) {
  const bool dense = g.indices.empty() && g.values.size() == g.original_size;
  bool sparse = g.indices.size() == g.values.size();
  for (std::size_t k = 0; sparse && k < g.indices.size(); ++k)
    sparse = g.indices[k] < g.original_size;
  if (!dense && !sparse)
    throw Error(ErrorCode::malformed_message,
                "tensor " + quoted(name) + " from " + peer_label(j) + ": " +
                    std::to_string(g.indices.size()) + " indices and " +
                    std::to_string(g.values.size()) + " values do not describe a tensor of " +
                    std::to_string(g.original_size) + " elements (dense needs no indices and " +
                    "original_size values; sparse one value per index, each below " +
                    "original_size)");
}

void check_peer(const TensorMap& gradients, const CompressedMap& peer, std::size_t j) {
  for (const auto& [name, tensor] : gradients) {
    const auto it = peer.find(name);
    if (it == peer.end())
      throw Error(ErrorCode::missing_tensor, "all_reduce_with_peers: tensor " + quoted(name) +
                                                 " is missing from " + peer_label(j) +
                                                 "; every rank must submit the same tensor names");
    if (it->second.original_size != tensor.numel())
      throw Error(ErrorCode::size_mismatch, "all_reduce_with_peers: tensor " + quoted(name) +
                                                " has " + std::to_string(it->second.original_size) +
                                                " elements in " + peer_label(j) + " but " +
                                                std::to_string(tensor.numel()) + " on this rank");
    check_view(it->second, name, j);
  }
  for (const auto& [name, g] : peer)
    if (gradients.count(name) == 0)
      throw Error(ErrorCode::missing_tensor,
                  "all_reduce_with_peers: " + peer_label(j) + " has tensor " + quoted(name) +
                      " that this rank did not submit; every rank must submit the same "
                      "tensor names");
}

}  // namespace

// A tensor whose values disagree with its shape (data() is mutable) or that
// indices cannot address is refused before it reaches a codec.
void check_inputs(const TensorMap& gradients) {
  for (const auto& [name, tensor] : gradients) {
    if (shape_numel(tensor.shape()) != tensor.numel())
      throw Error(ErrorCode::invalid_argument, "tensor " + quoted(name) + ": its shape holds " +
                                                   std::to_string(shape_numel(tensor.shape())) +
                                                   " elements but it has " +
                                                   std::to_string(tensor.numel()) + " values");
    if (tensor.numel() > std::numeric_limits<std::uint32_t>::max())
      throw Error(ErrorCode::invalid_argument,
                  "tensor " + quoted(name) + ": " + std::to_string(tensor.numel()) +
                      " elements; zring addresses at most 2^32 - 1 per tensor, split it");
  }
}

LocalAggregator::LocalAggregator(CompressionMethod method, std::size_t world_size)
    : method_(std::move(method)), world_size_(world_size) {
  if (world_size_ == 0)
    throw Error(ErrorCode::invalid_argument,
                "CompressedAllReduce: world_size must be at least 1 (got 0)");
  codec_ = codec::make_codec(method_.base());
}

CompressedGradient LocalAggregator::compress_one(const std::string& name, const Tensor& tensor,
                                                 std::uint64_t step) {
  const codec::CodecContext ctx{codec::tensor_seed(step, name)};
  const float* x = tensor.data().data();
  CompressedGradient g = method_.has_error_feedback()
                             ? feedback_.compress(*codec_, name, x, tensor.numel(), ctx)
                             : codec_->compress(x, tensor.numel(), ctx);
  g.shape = tensor.shape();
  return g;
}

CompressedMap LocalAggregator::compress(const TensorMap& gradients) {
  check_inputs(gradients);
  CompressedMap out;
  for (const auto& [name, tensor] : gradients) {
    CompressedGradient g = compress_one(name, tensor, step_);
    traffic_.wire_bytes += g.payload_bytes();
    traffic_.dense_bytes += g.dense_bytes();
    out.emplace_hint(out.end(), name, std::move(g));
  }
  ++step_;
  ++traffic_.ops;
  return out;
}

TensorMap LocalAggregator::average(const TensorMap& gradients,
                                   const std::vector<CompressedMap>& peers) {
  check_inputs(gradients);
  check_count(peers.size(), world_size_);
  for (std::size_t j = 0; j < peers.size(); ++j) check_peer(gradients, peers[j], j);

  const CompressedMap own = compress(gradients);
  const float contributions = static_cast<float>(peers.size() + 1);
  TensorMap out;
  for (const auto& [name, tensor] : gradients) {
    std::vector<float> sum = own.at(name).to_dense();
    for (const CompressedMap& peer : peers) codec::accumulate(peer.at(name), sum.data());
    for (float& v : sum) v /= contributions;
    out.emplace_hint(out.end(), name, Tensor(std::move(sum), tensor.shape()));
  }
  return out;
}

}  // namespace zring::client
