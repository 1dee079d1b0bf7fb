// ring_allreduce.hpp - pipelined ring reduce-scatter + all-gather (internal).
#pragma once

#include <cstddef>
#include <memory>

#include "collective/float_sum.hpp"
#include "collective/lanes.hpp"
#include "collective/link.hpp"
#include "collective/staging.hpp"

namespace zring::collective {

struct RingOptions {
  std::size_t chunk_bytes = 1 << 20;                   // wire bytes per chunk (about)
  Clock::duration timeout = std::chrono::seconds(10);  // longest silence of the predecessor
  // Ops that make a node send at most this much as one all-gather go that
  // way (gather_allreduce.hpp); 0 sends every op round the ring. Like
  // chunk_bytes, the same on every node.
  std::size_t gather_bytes = std::size_t{192} << 10;
  // Ops whose complete sums take at most this many bytes on the wire, on 3
  // nodes or more, take the direct schedule (below) instead of the ring; 0:
  // never. The same on every node.
  std::size_t direct_bytes = std::size_t{512} << 10;
};

// For lanes whose accumulator is not what the caller holds (affine codes):
// this node's contribution is made block by block just before it is sent
// or summed, and the complete sums are handed over block by block while
// they are in cache, so neither ever exists as a whole buffer.
template <class Acc>
class BlockIo {
 public:
  virtual ~BlockIo() = default;
  // This node's contribution to elements [begin, begin + n), into out.
  // Called exactly once for every element.
  virtual void local(std::size_t begin, std::size_t n, Acc* out) = 0;
  // The complete sums of elements [begin, begin + n), the same bits on
  // every node. Called exactly once for every element.
  virtual void result(std::size_t begin, std::size_t n, const Acc* sums) = 0;

  // For an io that learns what it needs while the ring runs (an affine
  // op's statistics in waves, plan_affine.cpp). Whether local and result
  // may be called for elements [begin, end) yet: a message that needs
  // them earlier waits, and this node's own chunks go only once they may.
  virtual bool ready(std::size_t /*begin*/, std::size_t /*end*/) { return true; }
  // Takes a message that is the io's, not the ring's (true), which may
  // make more elements ready; throws zring::Error for one that is no good.
  virtual bool take(const Message& /*msg*/) { return false; }
  // Whether the io has work of its own left, and a piece of it done
  // between two messages (whether it did any; with `wait`, it waits until
  // it can do one): while it has, the ring waits for messages in short
  // slices.
  [[nodiscard]] virtual bool pending() const { return false; }
  virtual bool poll(bool /*wait*/) { return false; }
};

// Whether an op takes the direct schedule: on 3 nodes or more, when its
// complete sums (the lane carrying every node's values) take at most
// options.direct_bytes on the wire. A lane that rounds at every hop only
// when each node's values enter the ring's sums as their first hop's wire
// form (HalfLane::round_local: one local rank, rounded as it is added),
// so that the owner, given those, makes the ring's roundings in the
// ring's order; a node's sum over several ranks enters unrounded.
template <class Lane>
bool takes_direct_schedule(const Lane& complete, std::size_t elements, std::size_t nodes,
                           const RingOptions& options) {
  if constexpr (Lane::kRounds) {
    if (!complete.round_local) return false;
  }
  return nodes >= 3 && complete.wire_bytes(elements) <= options.direct_bytes;
}

// Sums `local` (this node's contribution, `elements` values) over every node
// of the ring into `result`, which receives the same bits on every node.
//
// The schedule, for P nodes: the buffer is cut into P segments, each into
// chunks. Node r starts segment r: it sends its own values of each chunk to
// its successor (hop 1). A node receiving a chunk of segment s at hop h adds
// its own values and passes the partial sum on at hop h + 1; the node that
// receives hop P - 1 (node s - 1) holds the complete sum, keeps it (rounded
// through the lane's wire form, so it keeps exactly what it sends), and
// starts the all-gather: the sum travels P - 1 hops and every node stores
// it. Every chunk moves independently, so encoding, sending and summing of
// different chunks overlap, and every node sends 2 (P - 1) / P of the buffer.
// A message carrying the sum of c nodes' values uses lane.carrying(c), so a
// lane may be narrower on the early hops.
//
// The direct schedule, for ops whose sums take at most options.direct_bytes
// on the wire, on 3 nodes or more (fp16/bf16 only of one local rank, see
// takes_direct_schedule):
// the same segments, chunks and owners (node s - 1 owns segment s), but
// each node sends its values of a chunk straight to the chunk's owner
// (Phase::to_owner), which sums them in the ring's order - the same bits -
// once all are there, and sends the complete sum straight to every other
// node (Phase::from_owner): two hops instead of 2 (N - 1), the same bytes.
// A node sends its values in the order it reads them (StagingOrder), the
// segment it owns last.
//
// With average_over > 1, result receives the sum divided by average_over
// (the same bits as dividing afterwards), computed chunk by chunk.
//
// result must hold `elements` values. With local_owner, which must keep
// `local` alive, float32 values are sent from `local` without a copy. With
// staging, `local` fills while the ring runs: each range is waited for
// before it is read, and each segment's final prefix of `result` published
// as it grows. The first `sent_ahead` messages of this node's schedule went
// already (ring_allreduce_send_ahead). Throws zring::Error on timeout or
// abort.
template <class Lane>
void ring_allreduce(RingLink& link, const Lane& lane, const typename Lane::Acc* local,
                    typename Lane::Acc* result, std::size_t elements, const RingOptions& options,
                    RingStats& stats, std::size_t average_over = 1,
                    std::shared_ptr<const void> local_owner = {}, LocalStaging* staging = nullptr,
                    std::size_t sent_ahead = 0);

// The first messages of this node's schedule that need nothing from the
// other nodes, sent at once, as far as staging has the values (it does
// not wait): on the direct schedule its values to each chunk's owner,
// round the ring the first chunks of its own segment (hop 1, up to the
// ring's window). An op sends them right behind its summary, so that
// they travel with it instead of one hop after it; they write nothing
// anywhere, so an op that fails meanwhile (summaries that disagree, a ring
// that changes) loses only their bytes. Returns how many went: pass it to
// ring_allreduce with the same arguments. For FloatLane and HalfLane.
template <class Lane>
std::size_t ring_allreduce_send_ahead(RingLink& link, const Lane& lane,
                                      const typename Lane::Acc* local, std::size_t elements,
                                      const RingOptions& options, RingStats& stats,
                                      std::shared_ptr<const void> local_owner = {},
                                      LocalStaging* staging = nullptr);

// The same schedule, with io making this node's contribution and taking
// the sums (see BlockIo). With staging, each segment's final prefix is
// published once io took its sums (io writes the op's result there).
template <class Lane>
void ring_allreduce(RingLink& link, const Lane& lane, BlockIo<typename Lane::Acc>& io,
                    std::size_t elements, const RingOptions& options, RingStats& stats,
                    LocalStaging* staging = nullptr);

}  // namespace zring::collective
