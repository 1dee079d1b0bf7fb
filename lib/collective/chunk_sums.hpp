// chunk_sums.hpp - what the two schedules of a chunked all-reduce share
// (internal to ring_allreduce.cpp and direct_allreduce.cpp).
//
// A buffer of `elements` values is cut into one segment per node and each
// segment into chunks (geometry.hpp); node s - 1 owns segment s: it
// completes the sum of each of its chunks, in the order node s, s + 1, ...,
// s - 1 (its own values last), and every node stores the complete sums.
// The ring schedule passes partial sums along the ring to the owner and
// the sums on round it; the direct schedule sends each node's values
// straight to the owner and the sums straight from it. Both sum in the
// same order, and so give the same bits.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "collective/float_sum.hpp"
#include "collective/geometry.hpp"
#include "collective/lanes.hpp"
#include "collective/link.hpp"
#include "collective/ring_allreduce.hpp"
#include "collective/staging.hpp"

namespace zring::collective::detail {

inline std::string tag_text(const ChunkTag& tag) {
  return "phase " + std::to_string(static_cast<int>(tag.phase)) + " segment " +
         std::to_string(tag.segment) + " chunk " + std::to_string(tag.chunk) + " hop " +
         std::to_string(tag.hop);
}

template <class Lane>
struct ChunkSums {
  using Acc = typename Lane::Acc;
  // Elements handled at a time inside a chunk (a multiple of 8, so packed
  // lanes stay byte aligned): small enough to stay in the L1/L2 cache.
  static constexpr std::size_t kBlock = 4096;
  // float32 on the wire is the accumulator itself: a received payload (ours
  // alone, see RingLink::recv) is summed into in place and passed on.
  static constexpr bool kFloatWire = std::is_same_v<Lane, FloatLane>;

  ChunkSums(RingLink& link_, const Lane& lane, const Acc* local_, Acc* result_, BlockIo<Acc>* io_,
            std::size_t elements, const RingOptions& options_, RingStats& stats_,
            std::size_t average_over_, std::shared_ptr<const void> local_owner_,
            LocalStaging* staging_)
      : link(link_),
        local(local_),
        result(result_),
        io(io_),
        staging(staging_),
        options(options_),
        stats(stats_),
        average_over(average_over_),
        local_owner(std::move(local_owner_)),
        average(average_over_ > 1),
        nodes(link_.nodes()),
        self(link_.node()),
        lanes(carrying_lanes(lane, nodes)),
        geometry(elements, nodes, chunk_elems(lanes[nodes], options_.chunk_bytes)),
        done(geometry.total_chunks(), false),
        final_prefix(staging_ ? nodes : 0, 0),
        stream(elements >= kStreamElems) {}

  // lanes[c]: the lane of a message carrying the sum of c nodes' values.
  static std::vector<Lane> carrying_lanes(const Lane& lane, std::size_t nodes) {
    std::vector<Lane> lanes;
    for (std::size_t c = 0; c <= nodes; ++c)
      lanes.push_back(lane.carrying(std::max<std::size_t>(c, 1)));
    return lanes;
  }

  static std::size_t chunk_elems(const Lane& widest, std::size_t chunk_bytes) {
    // Whole bytes per chunk for packed lanes: a multiple of 8 elements.
    const std::size_t per8 = std::max<std::size_t>(widest.wire_bytes(8), 1);
    return std::max<std::size_t>(chunk_bytes / per8, 1) * 8;
  }

  [[nodiscard]] std::size_t owner(std::size_t segment) const noexcept {
    return (segment + nodes - 1) % nodes;
  }

  // Whether the op takes the direct schedule (ring_allreduce.cpp says why
  // only these do).
  [[nodiscard]] bool direct() const {
    return takes_direct_schedule(lanes[nodes], geometry.elements(), nodes, options);
  }

  // With staging: this node's values of `segment` up to element `end` are
  // in place before they are read.
  void await_local(std::size_t segment, std::size_t end) {
    if (staging) staging->wait_staged(segment, end - geometry.range(segment, 0).first);
  }

  // A chunk of the result is final (written): with staging, the segment's
  // final prefix is published when it grows.
  void finalized(std::size_t segment) {
    if (!staging) return;
    std::size_t& next = final_prefix[segment];
    const std::size_t chunks = geometry.chunks(segment);
    const std::size_t before = next;
    while (next < chunks && done[geometry.chunk_id(segment, next)]) ++next;
    if (next == before) return;
    const std::size_t seg_begin = geometry.range(segment, 0).first;
    staging->publish(segment, geometry.range(segment, next - 1).second - seg_begin);
  }

  // This node's values of [begin, begin + n): where they are, or made by
  // io into a scratch block (n <= kBlock).
  const Acc* local_block(std::size_t begin, std::size_t n) {
    if (!io) return local + begin;
    local_scratch.resize(kBlock);
    io->local(begin, n, local_scratch.data());
    return local_scratch.data();
  }

  // Where the sums of [begin, begin + n) go: the result, or a scratch
  // block handed to io (n <= kBlock).
  Acc* sums_block(std::size_t begin) {
    if (!io) return result + begin;
    scratch.resize(kBlock);
    return scratch.data();
  }

  void finish_locally() {
    // One node: the sum is the local contribution, in its wire form.
    if (staging) staging->wait_all();
    const std::size_t n = geometry.elements();
    const Lane& lane = lanes[1];
    OwnedBuffer wire = allocate(lane.wire_bytes(std::min(n, kBlock)));
    for (std::size_t at = 0; at < n; at += kBlock) {
      const std::size_t len = std::min(kBlock, n - at);
      lane.encode(local_block(at, len), len, wire.data.get());
      Acc* sums = sums_block(at);
      lane.decode(wire.data.get(), len, sums);
      if (io) io->result(at, len, sums);
    }
    if (!io) finish(0, n);
  }

  // A chunk of the result is final: the average.
  void finish(std::size_t begin, std::size_t end) {
    if constexpr (std::is_same_v<Acc, float>) {
      if (average) divide(result + begin, end - begin, average_over);
    }
  }

  static float* writable_floats(const Bytes& payload) {
    auto* p = const_cast<std::uint8_t*>(payload.data());
    return reinterpret_cast<std::uintptr_t>(p) % alignof(float) == 0 ? reinterpret_cast<float*>(p)
                                                                     : nullptr;
  }

  // This node's values of [begin, end) as the payload of their first hop.
  // float32 values are their own wire form: with local_owner they are sent
  // from where they are. By the time the op ends they have been received
  // (the complete sums come back only after they were summed); if it fails,
  // the owner keeps the memory alive for whatever the network still holds.
  Bytes own_payload(std::size_t begin, std::size_t end) {
    if constexpr (kFloatWire) {
      if (local_owner)
        return Bytes(reinterpret_cast<const std::uint8_t*>(local + begin), (end - begin) * 4,
                     local_owner);
    }
    const Lane& lane = lanes[1];
    const std::size_t n = end - begin;
    OwnedBuffer wire = allocate(lane.wire_bytes(n));
    for (std::size_t at = 0; at < n; at += kBlock) {  // at is a multiple of 8
      const std::size_t len = std::min(kBlock, n - at);
      lane.encode(local_block(begin + at, len), len, wire.data.get() + lane.wire_bytes(at));
    }
    return wire.bytes();
  }

  // The complete sums of [begin, end) in their wire form (lanes[nodes],
  // size checked): into the result. The caller marks the chunk done.
  void store_sums(std::size_t begin, std::size_t end, const Bytes& payload) {
    if constexpr (kFloatWire) {
      if (average) {
        // One pass: the sum's bits (any alignment) divided into the result.
        if (stream)
          average_from_wire_streamed(payload.data(), result + begin, end - begin, average_over);
        else
          average_from_wire(payload.data(), result + begin, end - begin, average_over);
        return;
      }
    }
    const Lane& lane = lanes[nodes];
    if (io) {
      const std::size_t n = end - begin;
      for (std::size_t at = 0; at < n; at += kBlock) {
        const std::size_t len = std::min(kBlock, n - at);
        Acc* sums = sums_block(begin + at);
        lane.decode(payload.data() + lane.wire_bytes(at), len, sums);
        io->result(begin + at, len, sums);
      }
      return;
    }
    lane.decode(payload.data(), end - begin, result + begin);
    finish(begin, end);
  }

  // Sends straight to ring position `to`, counted in stats.
  void send_to(std::size_t to, const ChunkTag& tag, Bytes payload) {
    count(payload);
    link.send_to(to, tag, std::move(payload));
  }

  void count(const Bytes& payload) {
    stats.bytes_sent += payload.size();
    ++stats.messages_sent;
  }

  RingLink& link;
  const Acc* local;
  Acc* result;
  BlockIo<Acc>* io;       // when set, makes local values and takes the sums
  LocalStaging* staging;  // when set, local fills and result is published as the op goes
  const RingOptions& options;
  RingStats& stats;
  std::size_t average_over;
  std::shared_ptr<const void> local_owner;  // when set, keeps local alive
  bool average;
  std::size_t nodes;
  std::size_t self;
  std::vector<Lane> lanes;  // by how many nodes' values a message carries
  ChunkGeometry geometry;
  std::vector<bool> done;                 // complete sum of this chunk stored
  std::vector<std::size_t> final_prefix;  // with staging: per segment, chunks done from the first
  std::vector<Acc> scratch;
  std::vector<Acc> local_scratch;
  bool stream;  // a large result: written with streaming stores
  // The first messages of this node's schedule that went before the
  // summaries were known (ring_allreduce_send_ahead): not sent again.
  std::size_t sent_ahead = 0;
};

// The direct schedule (direct_allreduce.cpp), for FloatLane, HalfLane and
// CodeLane.
template <class Lane>
void direct_allreduce(ChunkSums<Lane>& sums);
// Its first messages, as far as this node's values are staged; returns
// how many went. For FloatLane and HalfLane.
template <class Lane>
std::size_t direct_send_ahead(ChunkSums<Lane>& sums);

}  // namespace zring::collective::detail
