// allreduce_op.hpp - one compressed all-reduce, from a node's point of view.
//
// The node holds the contributions of its local ranks (ranks
// first_rank .. first_rank + L - 1 of the world). The op:
//   1. prepares the local contributions (error feedback, statistics, the
//      randomk sample, sparse payloads);
//   2. exchanges a NodeSummary with every node (ring all-gather) and checks
//      that all manifests agree: otherwise every node throws the same
//      manifest_mismatch naming the first difference and the ranks;
//   3. moves the data with the schedule that keeps the aggregation contract
//      for the method (DESIGN.md): ring reduce-scatter + all-gather of
//      float32 sums, 16-bit sums, or exact sums of affine codes on a shared
//      grid; for topk/threshold an all-gather of every rank's payload;
//   4. returns (1/W) * sum over ranks of D(C_r(g_r)): the same bits on every node.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>
#include <zring/compression.hpp>
#include <zring/error.hpp>

#include "codec/error_feedback.hpp"
#include "collective/link.hpp"
#include "collective/manifest.hpp"
#include "collective/ring_allreduce.hpp"
#include "collective/staging.hpp"
#include "collective/workspace.hpp"

namespace zring::collective {

// A failure every node of the ring reaches by itself, from the same
// summaries (manifest mismatch, a node that cannot take part): the ring
// stays in step, no abort is needed.
class AgreedFailure : public Error {
 public:
  using Error::Error;
};

struct OpInput {
  Manifest manifest;         // method text and tensors, as every rank must submit
  CompressionMethod method;  // parsed manifest.method
  // Per local rank: the fused values of all tensors in manifest order
  // (manifest.elements() floats), or nullptr when the node fails the op.
  std::vector<const float*> ranks;
  // When set, keeps ranks[0] alive for as long as it is held: the ring may
  // then send those values without a copy (ZeroMQ sends from them later).
  std::shared_ptr<const void> rank0_owner;
  // Where the averages go (manifest.elements() floats), or nullptr for a
  // buffer of the workspace. It may be the memory of ranks[0]: every plan
  // reads its inputs before it writes the result there.
  float* output = nullptr;
  std::shared_ptr<void> output_owner;  // keeps output alive in OpOutput::values
  // When set, the ranks' values are still arriving (a staged submission):
  // the op waits for them, range by range where the method can, and
  // publishes the final ranges of output as they are written.
  LocalStaging* staging = nullptr;
  // The statistics of ranks[0]'s blocks, from its client (a staged op of
  // one local rank with an affine method: client_block_stats of them), so
  // that the summary need not wait for staging; empty: taken here.
  std::vector<float> given_stats;
  std::optional<Status> failure;  // this node cannot take part (says why)
};

struct OpContext {
  std::size_t world_size = 1;  // nodes x local ranks
  std::size_t local_ranks = 1;
  std::uint64_t op_seed = 0;    // the same on every node for this op (randomk)
  std::uint64_t op_number = 0;  // for messages
  RingOptions ring;
};

struct OpOutput {
  std::shared_ptr<float[]>
      values;  // manifest.elements() averaged values (at input.output if given)
  std::size_t elements = 0;
  RingStats stats;  // bytes this node put on the ring
  // Where the time went (the daemon's log and timeline): when the op began
  // here, when this node's contribution was prepared (compressed, and
  // whatever else the method does before the data moves; on the helper
  // thread for large ops, while the summaries already travel), when every
  // node's summary was known (which waits for the slowest node), and when
  // the average was complete.
  struct Phases {
    Clock::time_point began, prepared, summarized, finished;
  } phases;
};

// Runs the op: the all-reduce above, or, when input.manifest.kind is
// broadcast, the broadcast of plan_broadcast.cpp (the summary exchange and
// its checks as above, then the root rank's values along the ring, every
// node's result the same bits as the root's input; a root beyond the
// ring's ranks is an AgreedFailure, invalid_argument). residuals holds one
// ErrorFeedback per local rank and is updated when an all-reduce's method
// has error feedback; workspace keeps buffers from
// op to op (the result is workspace.result()). Throws zring::Error.
OpOutput run_allreduce(RingLink& link, const OpContext& context, const OpInput& input,
                       std::vector<codec::ErrorFeedback>& residuals, Workspace& workspace);

// "ranks 2-3 (node b)" for the ranks of node `node`.
std::string ranks_of(const RingLink& link, std::size_t node, std::size_t local_ranks);

// How many block statistics an all-reduce of this manifest has: for an
// affine method (quantization, sign) without error feedback,
// stats_per_block for each block of codec::kBlockElems of every tensor; 0
// for any other op.
std::size_t block_stats_count(const Manifest& manifest, const CompressionMethod& method);

// How many block statistics a client hands over with a staged all-reduce of
// this manifest (wire::Submit::block_stats) on a ring file of `nodes`
// nodes: block_stats_count of them, unless its values are staged in waves
// (then it leaves them in the shared buffer as it copies each block in, a
// wave at a time: transport::stats_area).
std::size_t client_block_stats(const Manifest& manifest, const CompressionMethod& method,
                               std::size_t nodes);

// The order in which node `node` of a ring of `nodes` has a staged op's
// values copied in (StagingOrder), the client and zringd alike: in waves,
// cut on statistics blocks, for an all-reduce of an affine method without
// error feedback of at least kWaveElems values on two nodes or more (its
// statistics then travel a wave at a time, plan_affine.cpp); otherwise
// segment after segment.
inline constexpr std::size_t kWaveElems = std::size_t{1} << 21;  // 8 MiB of values
inline constexpr std::size_t kStagingWaves = 8;
StagingOrder staging_order(const Manifest& manifest, const CompressionMethod& method,
                           std::size_t nodes, std::size_t node);

}  // namespace zring::collective
