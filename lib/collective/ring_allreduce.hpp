// ring_allreduce.hpp - pipelined ring reduce-scatter + all-gather (internal).
#pragma once

#include <cstddef>
#include <memory>

#include "collective/float_sum.hpp"
#include "collective/lanes.hpp"
#include "collective/link.hpp"

namespace zring::collective {

struct RingOptions {
  std::size_t chunk_bytes = 1 << 20;          // wire bytes per chunk (about)
  Clock::duration timeout = std::chrono::seconds(10);  // longest silence of the predecessor
};

// Called once per chunk of the result as soon as that chunk is final, with
// the element range [begin, end): the chunk is still in cache, so a pass
// such as dividing by the world size costs no extra trip through memory.
// Must only touch result[begin, end).
class ChunkDone {
 public:
  virtual ~ChunkDone() = default;
  virtual void operator()(std::size_t begin, std::size_t end) = 0;
};

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
//
// With average_over > 1, result receives the sum divided by average_over
// (the same bits as dividing afterwards), computed chunk by chunk.
//
// result must hold `elements` values. With local_owner, which must keep
// `local` alive, float32 values are sent from `local` without a copy.
// Throws zring::Error on timeout or abort.
template <class Lane>
void ring_allreduce(RingLink& link, const Lane& lane, const typename Lane::Acc* local,
                    typename Lane::Acc* result, std::size_t elements,
                    const RingOptions& options, RingStats& stats, ChunkDone* done = nullptr,
                    std::size_t average_over = 1, std::shared_ptr<const void> local_owner = {});

}  // namespace zring::collective
