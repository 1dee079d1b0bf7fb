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
  // How far this node's own segment may run ahead of its predecessor's.
  static constexpr std::size_t kWindowBytes = std::size_t{16} << 20;

  RingAllreduce(RingLink& link, const Lane& lane, const Acc* local, Acc* result, BlockIo<Acc>* io,
                std::size_t elements, const RingOptions& options, RingStats& stats,
                std::size_t average_over, std::shared_ptr<const void> local_owner,
                LocalStaging* staging)
      : link_(link),
        local_(local),
        result_(result),
        io_(io),
        staging_(staging),
        options_(options),
        stats_(stats),
        average_over_(average_over),
        local_owner_(std::move(local_owner)),
        average_(average_over > 1),
        nodes_(link.nodes()),
        self_(link.node()),
        lanes_(carrying_lanes(lane, nodes_)),
        geometry_(elements, nodes_, chunk_elems(lanes_[nodes_], options.chunk_bytes)),
        reduced_(geometry_.total_chunks(), false),
        final_(geometry_.total_chunks(), false),
        final_prefix_(staging ? nodes_ : 0, 0),
        stream_(elements >= kStreamElems) {}

  void run() {
    if (nodes_ == 1) {
      finish_locally();
      return;
    }
    send_own_chunks();
    std::size_t missing = geometry_.total_chunks();
    while (missing > 0) {
      Message msg = link_.recv(Clock::now() + options_.timeout);
      if (handle(msg)) --missing;
      send_own_chunks();
    }
  }

 private:
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

  // With staging: this node's values of chunk `chunk` of `segment` are in
  // place before they are read.
  void await_local(std::size_t segment, std::size_t end) {
    if (staging_) staging_->wait_staged(segment, end - geometry_.range(segment, 0).first);
  }

  // A chunk of the result is final (written): with staging, the segment's
  // final prefix is published when it grows.
  void finalized(std::size_t segment) {
    if (!staging_) return;
    std::size_t& next = final_prefix_[segment];
    const std::size_t chunks = geometry_.chunks(segment);
    const std::size_t before = next;
    while (next < chunks && final_[geometry_.chunk_id(segment, next)]) ++next;
    if (next == before) return;
    const std::size_t seg_begin = geometry_.range(segment, 0).first;
    staging_->publish(segment, geometry_.range(segment, next - 1).second - seg_begin);
  }

  // This node's values of [begin, begin + n): where they are, or made by
  // io into a scratch block (n <= kBlock).
  const Acc* local_block(std::size_t begin, std::size_t n) {
    if (!io_) return local_ + begin;
    local_scratch_.resize(kBlock);
    io_->local(begin, n, local_scratch_.data());
    return local_scratch_.data();
  }

  // Where the sums of [begin, begin + n) go: the result, or a scratch
  // block handed to io (n <= kBlock).
  Acc* sums_block(std::size_t begin) {
    if (!io_) return result_ + begin;
    scratch_.resize(kBlock);
    return scratch_.data();
  }

  void finish_locally() {
    // One node: the sum is the local contribution, in its wire form.
    if (staging_) staging_->wait_all();
    const std::size_t n = geometry_.elements();
    const Lane& lane = lanes_[1];
    OwnedBuffer wire = allocate(lane.wire_bytes(std::min(n, kBlock)));
    for (std::size_t at = 0; at < n; at += kBlock) {
      const std::size_t len = std::min(kBlock, n - at);
      lane.encode(local_block(at, len), len, wire.data.get());
      Acc* sums = sums_block(at);
      lane.decode(wire.data.get(), len, sums);
      if (io_) io_->result(at, len, sums);
    }
    if (!io_) finish(0, n);
  }

  // A chunk of the result is final: the average.
  void finish(std::size_t begin, std::size_t end) {
    if constexpr (std::is_same_v<Acc, float>) {
      if (average_) divide(result_ + begin, end - begin, average_over_);
    }
  }

  // float32 on the wire is the accumulator itself: a received payload (ours
  // alone, see RingLink::recv) is summed into in place and passed on.
  static constexpr bool kFloatWire = std::is_same_v<Lane, FloatLane>;
  static float* writable_floats(const Bytes& payload) {
    auto* p = const_cast<std::uint8_t*>(payload.data());
    return reinterpret_cast<std::uintptr_t>(p) % alignof(float) == 0 ? reinterpret_cast<float*>(p)
                                                                     : nullptr;
  }

  // Flow control without a backward channel: each chunk of this node's
  // own segment is one message going round, as partial sums, then as the
  // complete sum that comes back here (gather hop 1) after 2(N-1) hops;
  // every hop takes one message and passes one on. This node starts the
  // next chunk of its segment only when one of the last `window` came
  // back, so at most N x window messages are in flight in the whole ring,
  // whatever the op's size: no node's receive queue, and so no zringd's
  // memory, grows with the tensor (sent all at once, a slower node would
  // have a segment, a quarter of a 4-node op, waiting in its queue).
  // The window (16 MiB, and at least 2(N-1) + 2 chunks) keeps every link busy.
  void send_own_chunks() {
    const std::size_t own = geometry_.chunks(self_);
    const std::size_t window =
        std::max({kWindowBytes / std::max<std::size_t>(options_.chunk_bytes, 1), 2 * nodes_,
                  std::size_t{4}});
    const std::size_t allowed = std::min(own, own_returned_ + window);
    for (; own_sent_ < allowed; ++own_sent_) send_own_chunk(own_sent_);
  }

  void send_own_chunk(std::size_t c) {
    auto [begin, end] = geometry_.range(self_, c);
    await_local(self_, end);
    if constexpr (kFloatWire) {
      // The values are their own wire form: sent from where they are. By
      // the time this op ends they have been received (the sum of this
      // segment comes back only after they went round); if it fails, the
      // owner keeps the memory alive for whatever ZeroMQ still holds.
      if (local_owner_) {
        send({Phase::reduce, static_cast<std::uint32_t>(self_), static_cast<std::uint32_t>(c), 1},
             Bytes(reinterpret_cast<const std::uint8_t*>(local_ + begin), (end - begin) * 4,
                   local_owner_));
        return;
      }
    }
    const Lane& lane = lanes_[1];
    const std::size_t n = end - begin;
    OwnedBuffer wire = allocate(lane.wire_bytes(n));
    for (std::size_t at = 0; at < n; at += kBlock) {  // at is a multiple of 8
      const std::size_t len = std::min(kBlock, n - at);
      lane.encode(local_block(begin + at, len), len, wire.data.get() + lane.wire_bytes(at));
    }
    send({Phase::reduce, static_cast<std::uint32_t>(self_), static_cast<std::uint32_t>(c), 1},
         wire.bytes());
  }

  // Returns true when the message completed a chunk of the result.
  bool handle(const Message& msg) {
    const ChunkTag& tag = msg.tag;
    if ((tag.phase != Phase::reduce && tag.phase != Phase::gather) || tag.segment >= nodes_ ||
        tag.chunk >= geometry_.chunks(tag.segment) ||
        (tag.phase == Phase::reduce && (tag.hop == 0 || tag.hop >= nodes_))) {
      stats_.drop("unexpected message " + tag_text(tag) + " during the reduce");
      return false;
    }
    auto [begin, end] = geometry_.range(tag.segment, tag.chunk);
    // A partial sum at hop h carries h nodes' values; a complete one all.
    const Lane& lane = lanes_[tag.phase == Phase::reduce ? tag.hop : nodes_];
    if (msg.payload.size() != lane.wire_bytes(end - begin)) {
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
    await_local(tag.segment, end);
    if constexpr (kFloatWire) {
      if (float* sum = writable_floats(payload))
        return partial_in_place(tag, id, begin, n, sum, payload);
    }
    const Lane& in_lane = lanes_[tag.hop];
    if (tag.hop + 1 < nodes_) {
      // Block by block through scratch that stays in cache: received
      // partial sum + own values -> the next partial sum on the wire.
      const Lane& out_lane = lanes_[tag.hop + 1];
      OwnedBuffer wire = allocate(out_lane.wire_bytes(n));
      scratch_.resize(kBlock);
      for (std::size_t at = 0; at < n; at += kBlock) {  // at is a multiple of 8
        const std::size_t len = std::min(kBlock, n - at);
        in_lane.decode_add(payload.data() + in_lane.wire_bytes(at), len,
                           local_block(begin + at, len), scratch_.data());
        out_lane.encode(scratch_.data(), len, wire.data.get() + out_lane.wire_bytes(at));
      }
      send({Phase::reduce, tag.segment, tag.chunk, tag.hop + 1}, wire.bytes());
      return false;
    }
    // This node owns the segment: the sum is complete.
    const Lane& out_lane = lanes_[nodes_];
    OwnedBuffer wire = allocate(out_lane.wire_bytes(n));
    for (std::size_t at = 0; at < n; at += kBlock) {
      const std::size_t len = std::min(kBlock, n - at);
      std::uint8_t* out = wire.data.get() + out_lane.wire_bytes(at);
      Acc* sums = sums_block(begin + at);
      in_lane.decode_add(payload.data() + in_lane.wire_bytes(at), len, local_block(begin + at, len),
                         sums);
      out_lane.encode(sums, len, out);
      if constexpr (Lane::kRounds) out_lane.decode(out, len, sums);
      if (io_) io_->result(begin + at, len, sums);
    }
    final_[id] = true;
    send({Phase::gather, tag.segment, tag.chunk, 1}, wire.bytes());
    if (!io_) finish(begin, end);
    finalized(tag.segment);
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
    if (stream_)
      add_and_average_streamed(sum, mine, result_ + begin, n, average_over_);
    else
      add_and_average(sum, mine, result_ + begin, n, average_over_);
    final_[id] = true;
    send({Phase::gather, tag.segment, tag.chunk, 1}, payload);
    finalized(tag.segment);
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
    if (tag.segment == self_) ++own_returned_;  // a chunk of this node's segment went round
    if (tag.hop + 1 < nodes_) send({Phase::gather, tag.segment, tag.chunk, tag.hop + 1}, payload);
    if constexpr (kFloatWire) {
      if (average_) {
        // One pass: the sum's bits (any alignment) divided into the result.
        if (stream_)
          average_from_wire_streamed(payload.data(), result_ + begin, end - begin, average_over_);
        else
          average_from_wire(payload.data(), result_ + begin, end - begin, average_over_);
        finalized(tag.segment);
        return true;
      }
    }
    const Lane& lane = lanes_[nodes_];
    if (io_) {
      const std::size_t n = end - begin;
      for (std::size_t at = 0; at < n; at += kBlock) {
        const std::size_t len = std::min(kBlock, n - at);
        Acc* sums = sums_block(begin + at);
        lane.decode(payload.data() + lane.wire_bytes(at), len, sums);
        io_->result(begin + at, len, sums);
      }
      finalized(tag.segment);
      return true;
    }
    lane.decode(payload.data(), end - begin, result_ + begin);
    finish(begin, end);
    finalized(tag.segment);
    return true;
  }

  void send(const ChunkTag& tag, Bytes payload) {
    stats_.bytes_sent += payload.size();
    ++stats_.messages_sent;
    link_.send(tag, std::move(payload));
  }

  RingLink& link_;
  const Acc* local_;
  Acc* result_;
  BlockIo<Acc>* io_;       // when set, makes local values and takes the sums
  LocalStaging* staging_;  // when set, local fills and result is published as the ring goes
  const RingOptions& options_;
  RingStats& stats_;
  std::size_t average_over_;
  std::shared_ptr<const void> local_owner_;  // when set, keeps local alive
  bool average_;
  std::size_t nodes_;
  std::size_t self_;
  std::vector<Lane> lanes_;  // by how many nodes' values a message carries
  ChunkGeometry geometry_;
  std::vector<bool> reduced_;              // partial sum of this chunk seen
  std::vector<bool> final_;                // complete sum of this chunk stored
  std::size_t own_sent_ = 0;               // chunks of the own segment sent
  std::size_t own_returned_ = 0;           // of them, those whose complete sum came back
  std::vector<std::size_t> final_prefix_;  // with staging: per segment, chunks final from the first
  std::vector<Acc> scratch_;
  std::vector<Acc> local_scratch_;
  bool stream_;  // a large result: written with streaming stores
};

}  // namespace

template <class Lane>
void ring_allreduce(RingLink& link, const Lane& lane, const typename Lane::Acc* local,
                    typename Lane::Acc* result, std::size_t elements, const RingOptions& options,
                    RingStats& stats, std::size_t average_over,
                    std::shared_ptr<const void> local_owner, LocalStaging* staging) {
  RingAllreduce<Lane>(link, lane, local, result, nullptr, elements, options, stats, average_over,
                      std::move(local_owner), staging)
      .run();
}

template <class Lane>
void ring_allreduce(RingLink& link, const Lane& lane, BlockIo<typename Lane::Acc>& io,
                    std::size_t elements, const RingOptions& options, RingStats& stats,
                    LocalStaging* staging) {
  RingAllreduce<Lane>(link, lane, nullptr, nullptr, &io, elements, options, stats, 1, {}, staging)
      .run();
}

template void ring_allreduce<FloatLane>(RingLink&, const FloatLane&, const float*, float*,
                                        std::size_t, const RingOptions&, RingStats&, std::size_t,
                                        std::shared_ptr<const void>, LocalStaging*);
template void ring_allreduce<HalfLane>(RingLink&, const HalfLane&, const float*, float*,
                                       std::size_t, const RingOptions&, RingStats&, std::size_t,
                                       std::shared_ptr<const void>, LocalStaging*);
template void ring_allreduce<CodeLane>(RingLink&, const CodeLane&, BlockIo<std::uint32_t>&,
                                       std::size_t, const RingOptions&, RingStats&, LocalStaging*);

}  // namespace zring::collective
