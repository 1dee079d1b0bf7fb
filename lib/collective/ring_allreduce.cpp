#include "collective/ring_allreduce.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <zring/error.hpp>

#include "collective/float_sum.hpp"
#include "collective/geometry.hpp"

namespace zring::collective {
namespace {

std::string tag_text(const ChunkTag& tag) {
  return "phase " + std::to_string(static_cast<int>(tag.phase)) + " segment " +
         std::to_string(tag.segment) + " chunk " + std::to_string(tag.chunk) + " hop " +
         std::to_string(tag.hop);
}

template <class Lane>
class RingAllreduce {
 public:
  using Acc = typename Lane::Acc;
  // Elements handled at a time inside a chunk (a multiple of 8, so packed
  // lanes stay byte aligned): small enough to stay in the L1/L2 cache.
  static constexpr std::size_t kBlock = 4096;

  RingAllreduce(RingLink& link, const Lane& lane, const Acc* local, Acc* result,
                std::size_t elements, const RingOptions& options, RingStats& stats, ChunkDone* done,
                std::size_t average_over, std::shared_ptr<const void> local_owner)
      : link_(link), lane_(lane), local_(local), result_(result), options_(options),
        stats_(stats), done_(done), average_over_(average_over),
        local_owner_(std::move(local_owner)), average_(average_over > 1), nodes_(link.nodes()), self_(link.node()),
        geometry_(elements, nodes_, chunk_elems(lane, options.chunk_bytes)),
        reduced_(geometry_.total_chunks(), false), final_(geometry_.total_chunks(), false),
        stream_(elements >= kStreamElems) {}

  void run() {
    if (nodes_ == 1) {
      finish_locally();
      return;
    }
    start_own_segment();
    std::size_t missing = geometry_.total_chunks();
    while (missing > 0) {
      Message msg = link_.recv(Clock::now() + options_.timeout);
      if (handle(msg)) --missing;
    }
  }

 private:
  static std::size_t chunk_elems(const Lane& lane, std::size_t chunk_bytes) {
    // Whole bytes per chunk for packed lanes: a multiple of 8 elements.
    const std::size_t per8 = std::max<std::size_t>(lane.wire_bytes(8), 1);
    return std::max<std::size_t>(chunk_bytes / per8, 1) * 8;
  }

  void finish_locally() {
    // One node: the sum is the local contribution, in its wire form.
    const std::size_t n = geometry_.elements();
    OwnedBuffer wire = allocate(lane_.wire_bytes(n));
    lane_.encode(local_, n, wire.data.get());
    lane_.decode(wire.data.get(), n, result_);
    finish(0, n);
  }

  // A chunk of the result is final: the average, then the caller's hook.
  void finish(std::size_t begin, std::size_t end) {
    if constexpr (std::is_same_v<Acc, float>) {
      if (average_) divide(result_ + begin, end - begin, average_over_);
    }
    if (done_) (*done_)(begin, end);
  }

  // float32 on the wire is the accumulator itself: a received payload (ours
  // alone, see RingLink::recv) is summed into in place and passed on.
  static constexpr bool kFloatWire = std::is_same_v<Lane, FloatLane>;
  static float* writable_floats(const Bytes& payload) {
    auto* p = const_cast<std::uint8_t*>(payload.data());
    return reinterpret_cast<std::uintptr_t>(p) % alignof(float) == 0 ? reinterpret_cast<float*>(p)
                                                                      : nullptr;
  }

  void start_own_segment() {
    for (std::size_t c = 0; c < geometry_.chunks(self_); ++c) {
      auto [begin, end] = geometry_.range(self_, c);
      if constexpr (kFloatWire) {
        // The values are their own wire form: sent from where they are. By
        // the time this op ends they have been received (the sum of this
        // segment comes back only after they went round); if it fails, the
        // owner keeps the memory alive for whatever ZeroMQ still holds.
        if (local_owner_) {
          send({Phase::reduce, static_cast<std::uint32_t>(self_), static_cast<std::uint32_t>(c), 1},
               Bytes(reinterpret_cast<const std::uint8_t*>(local_ + begin), (end - begin) * 4, local_owner_));
          continue;
        }
      }
      OwnedBuffer wire = allocate(lane_.wire_bytes(end - begin));
      lane_.encode(local_ + begin, end - begin, wire.data.get());
      send({Phase::reduce, static_cast<std::uint32_t>(self_), static_cast<std::uint32_t>(c), 1},
           wire.bytes());
    }
  }

  // Returns true when the message completed a chunk of the result.
  bool handle(const Message& msg) {
    const ChunkTag& tag = msg.tag;
    if ((tag.phase != Phase::reduce && tag.phase != Phase::gather) || tag.segment >= nodes_ ||
        tag.chunk >= geometry_.chunks(tag.segment)) {
      stats_.drop("unexpected message " + tag_text(tag) + " during the reduce");
      return false;
    }
    auto [begin, end] = geometry_.range(tag.segment, tag.chunk);
    if (msg.payload.size() != lane_.wire_bytes(end - begin)) {
      stats_.drop("wrong payload size " + std::to_string(msg.payload.size()) + " for " +
                  tag_text(tag));
      return false;
    }
    const std::size_t id = geometry_.chunk_id(tag.segment, tag.chunk);
    return tag.phase == Phase::reduce ? on_partial(tag, id, begin, end, msg.payload)
                                      : on_final(tag, id, begin, end, msg.payload);
  }

  // A partial sum of tag.hop contributions.
  bool on_partial(const ChunkTag& tag, std::size_t id, std::size_t begin, std::size_t end,
                  const Bytes& payload) {
    const std::size_t expected_hop = (self_ + nodes_ - tag.segment) % nodes_;
    if (tag.hop != expected_hop || reduced_[id]) {
      stats_.drop("stale or duplicate " + tag_text(tag));
      return false;
    }
    reduced_[id] = true;
    const std::size_t n = end - begin;
    if constexpr (kFloatWire) {
      if (float* sum = writable_floats(payload)) return partial_in_place(tag, id, begin, n, sum, payload);
    }
    OwnedBuffer wire = allocate(lane_.wire_bytes(n));
    if (tag.hop + 1 < nodes_) {
      // Through a small scratch block that stays in cache: received partial
      // sum + own values -> the next partial sum on the wire.
      scratch_.resize(kBlock);
      for (std::size_t at = 0; at < n; at += kBlock) {
        const std::size_t len = std::min(kBlock, n - at);
        const std::size_t offset = lane_.wire_bytes(at);  // at is a multiple of 8
        lane_.decode_add(payload.data() + offset, len, local_ + begin + at, scratch_.data());
        lane_.encode(scratch_.data(), len, wire.data.get() + offset);
      }
      send({Phase::reduce, tag.segment, tag.chunk, tag.hop + 1}, wire.bytes());
      return false;
    }
    // This node owns the segment: the sum is complete.
    lane_.decode_add(payload.data(), n, local_ + begin, result_ + begin);
    lane_.encode(result_ + begin, n, wire.data.get());
    if constexpr (Lane::kRounds) lane_.decode(wire.data.get(), n, result_ + begin);
    final_[id] = true;
    send({Phase::gather, tag.segment, tag.chunk, 1}, wire.bytes());
    finish(begin, end);
    return true;
  }

  bool partial_in_place(const ChunkTag& tag, std::size_t id, std::size_t begin, std::size_t n,
                        float* sum, const Bytes& payload) {
    const float* mine = local_ + begin;
    if (tag.hop + 1 < nodes_) {
      add_into(sum, mine, n);
      send({Phase::reduce, tag.segment, tag.chunk, tag.hop + 1}, payload);
      return false;
    }
    // Complete: the sum travels on, this node keeps the average.
    if (stream_) add_and_average_streamed(sum, mine, result_ + begin, n, average_over_);
    else add_and_average(sum, mine, result_ + begin, n, average_over_);
    final_[id] = true;
    send({Phase::gather, tag.segment, tag.chunk, 1}, payload);
    if (done_) (*done_)(begin, begin + n);
    return true;
  }

  // A complete sum on its way round.
  bool on_final(const ChunkTag& tag, std::size_t id, std::size_t begin, std::size_t end,
                const Bytes& payload) {
    const std::size_t owner = (tag.segment + nodes_ - 1) % nodes_;
    const std::size_t expected_hop = (self_ + nodes_ - owner) % nodes_;
    if (tag.hop != expected_hop || final_[id]) {
      stats_.drop("stale or duplicate " + tag_text(tag));
      return false;
    }
    final_[id] = true;
    if (tag.hop + 1 < nodes_) send({Phase::gather, tag.segment, tag.chunk, tag.hop + 1}, payload);
    if constexpr (kFloatWire) {
      if (average_) {
        // One pass: the sum's bits (any alignment) divided into the result.
        if (stream_) average_from_wire_streamed(payload.data(), result_ + begin, end - begin, average_over_);
        else average_from_wire(payload.data(), result_ + begin, end - begin, average_over_);
        if (done_) (*done_)(begin, end);
        return true;
      }
    }
    lane_.decode(payload.data(), end - begin, result_ + begin);
    finish(begin, end);
    return true;
  }

  void send(const ChunkTag& tag, Bytes payload) {
    stats_.bytes_sent += payload.size();
    ++stats_.messages_sent;
    link_.send(tag, std::move(payload));
  }

  RingLink& link_;
  const Lane& lane_;
  const Acc* local_;
  Acc* result_;
  const RingOptions& options_;
  RingStats& stats_;
  ChunkDone* done_;
  std::size_t average_over_;
  std::shared_ptr<const void> local_owner_;  // when set, keeps local alive
  bool average_;
  std::size_t nodes_;
  std::size_t self_;
  ChunkGeometry geometry_;
  std::vector<bool> reduced_;  // partial sum of this chunk seen
  std::vector<bool> final_;    // complete sum of this chunk stored
  std::vector<Acc> scratch_;
  bool stream_;  // a large result: written with streaming stores
};

}  // namespace

template <class Lane>
void ring_allreduce(RingLink& link, const Lane& lane, const typename Lane::Acc* local,
                    typename Lane::Acc* result, std::size_t elements,
                    const RingOptions& options, RingStats& stats, ChunkDone* done,
                    std::size_t average_over, std::shared_ptr<const void> local_owner) {
  RingAllreduce<Lane>(link, lane, local, result, elements, options, stats, done, average_over,
                      std::move(local_owner)).run();
}

template void ring_allreduce<FloatLane>(RingLink&, const FloatLane&, const float*, float*,
                                        std::size_t, const RingOptions&, RingStats&, ChunkDone*, std::size_t,
                                        std::shared_ptr<const void>);
template void ring_allreduce<HalfLane>(RingLink&, const HalfLane&, const float*, float*,
                                       std::size_t, const RingOptions&, RingStats&, ChunkDone*, std::size_t,
                                        std::shared_ptr<const void>);
template void ring_allreduce<CodeLane>(RingLink&, const CodeLane&, const std::uint32_t*,
                                       std::uint32_t*, std::size_t, const RingOptions&,
                                       RingStats&, ChunkDone*, std::size_t,
                                        std::shared_ptr<const void>);

}  // namespace zring::collective
