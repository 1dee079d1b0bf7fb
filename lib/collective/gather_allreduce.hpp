// gather_allreduce.hpp - small ops in one round: every node's contribution
// rides behind its summary, and every node sums them itself (internal).
//
// A ring reduce-scatter + all-gather costs 2 (N - 1) hops of latency after
// the summary round's N - 1; for a small op the hops are all of its time.
// Below RingOptions::gather_bytes every node sends its whole contribution behind its
// summary instead (ring_allgather_with_data), N - 1 hops in all, and each
// node then computes, from every node's contribution, exactly what the
// ring would have: segment by segment, in the ring's order, through the
// lane's wire forms hop after hop. So the result has the same bits whichever
// way an op travels, and the choice is a transport detail, as the
// aggregation contract wants it. Each node sends (N - 1) x its contribution
// instead of 2 (N - 1) / N x: worth it only while latency rules.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "collective/lanes.hpp"
#include "collective/link.hpp"
#include "collective/manifest.hpp"
#include "collective/ring_allreduce.hpp"

namespace zring::collective {

// Whether an op whose contribution takes `bytes` per node is gathered: what
// a node then sends, (N - 1) x bytes, is at most options.gather_bytes. Every
// node decides from what all of them agree on (the manifest, the ring's
// size and options, local ranks), never from how its clients handed the
// values over.
[[nodiscard]] inline bool gathers(std::size_t bytes, std::size_t nodes,
                                  const RingOptions& options) noexcept {
  return nodes > 1 && bytes * (nodes - 1) <= options.gather_bytes;
}

// A plan's side of a gathered op: what this node sends behind its summary
// (MethodPlan::data) and what every node sent (MethodPlan::data_arrived).
class GatheredValues {
 public:
  GatheredValues(bool on, std::size_t nodes) : on_(on), arrived_(on ? nodes : 0) {}
  [[nodiscard]] bool on() const noexcept { return on_; }
  // This node's contribution, announced in its summary.
  void send(NodeSummary& summary, Bytes mine) {
    mine_ = std::move(mine);
    summary.blob_bytes = mine_.size();
  }
  [[nodiscard]] const Bytes& mine() const noexcept { return mine_; }
  void arrived(std::size_t node, const Bytes& data) {
    if (on_) arrived_.at(node) = data;
  }
  // Every node's contribution, each checked to be exactly `count` float32
  // values (a node whose contribution is not fails the op, named, the same
  // on every node), copied out of the messages (which may be unaligned):
  // `values[node * count + i]`.
  void floats(const RingLink& link, std::size_t count, std::vector<float>& values) const;

 private:
  bool on_;
  Bytes mine_;
  std::vector<Bytes> arrived_;
};

// What the ring sums for `elements` values, from every node's float32
// contribution (contributions[node * elements + i]): the same bits the ring
// schedule of ring_allreduce gives for the same lane and contributions,
// divided by average_over when it is more than 1, into result.
template <class Lane>
void gather_allreduce(const Lane& lane, std::size_t nodes, const float* contributions,
                      float* result, std::size_t elements, std::size_t average_over = 1);

}  // namespace zring::collective
