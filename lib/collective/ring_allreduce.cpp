#include "collective/ring_allreduce.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>
#include <zring/error.hpp>

#include "collective/chunk_sums.hpp"

namespace zring::collective {
namespace {

using detail::ChunkSums;
using detail::tag_text;

template <class Lane>
class RingAllreduce {
 public:
  using Acc = typename Lane::Acc;
  static constexpr std::size_t kBlock = ChunkSums<Lane>::kBlock;
  static constexpr bool kFloatWire = ChunkSums<Lane>::kFloatWire;
  // How far this node's own segment may run ahead of its predecessor's.
  static constexpr std::size_t kWindowBytes = std::size_t{16} << 20;
  // How long the ring waits for a message while its io has work left.
  static constexpr auto kIoSlice = std::chrono::microseconds(500);

  explicit RingAllreduce(ChunkSums<Lane>& c)
      : c_(c), reduced_(c.geometry.total_chunks(), false), own_sent_(c.sent_ahead) {}

  // The chunks of this node's own segment that may go before any came
  // back, as far as they are staged (ring_allreduce_send_ahead).
  static std::size_t send_ahead(ChunkSums<Lane>& c) {
    const std::size_t allowed = std::min(c.geometry.chunks(c.self), window(c));
    const std::size_t seg_begin = c.geometry.range(c.self, 0).first;
    std::size_t sent = 0;
    for (; sent < allowed; ++sent) {
      auto [begin, end] = c.geometry.range(c.self, sent);
      if (c.staging && !c.staging->staged(c.self, end - seg_begin)) break;
      send_reduce(c, sent, c.own_payload(begin, end));
    }
    return sent;
  }

  void run() {
    std::size_t missing = c_.geometry.total_chunks();
    BlockIo<Acc>* io = c_.io;
    Deadline heard = Clock::now();
    for (;;) {
      const bool worked = io && io->poll(false);
      missing -= retry_waiting();
      send_own_chunks();
      if (missing == 0) return;
      if (!io || !io->pending()) {
        Message msg = c_.link.recv(Clock::now() + c_.options.timeout);
        if (!(io && io->take(msg)) && handle(msg)) --missing;
        continue;
      }
      // The io still has work: messages are waited for in slices (none
      // at all after a piece of it). After a timeout's silence the io
      // finishes its work, waiting as long as it must (its own wait names
      // what it waits for: a client that stopped staging), and the ring
      // then waits as ever.
      const Deadline now = Clock::now();
      if (now - heard >= c_.options.timeout) {
        while (io->pending()) io->poll(true);
        continue;
      }
      std::optional<Message> msg = c_.link.recv_until(worked ? now : now + kIoSlice);
      if (!msg) continue;
      heard = Clock::now();
      if (!io->take(*msg) && handle(*msg)) --missing;
    }
  }

 private:
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
  static std::size_t window(const ChunkSums<Lane>& c) {
    return std::max({kWindowBytes / std::max<std::size_t>(c.options.chunk_bytes, 1), 2 * c.nodes,
                     std::size_t{4}});
  }
  void send_own_chunks() {
    const std::size_t allowed = std::min(c_.geometry.chunks(c_.self), own_returned_ + window(c_));
    for (; own_sent_ < allowed; ++own_sent_) {
      auto [begin, end] = c_.geometry.range(c_.self, own_sent_);
      if (c_.io && !c_.io->ready(begin, end)) return;
      c_.await_local(c_.self, end);
      send_reduce(c_, own_sent_, c_.own_payload(begin, end));
    }
  }
  // Hop 1 of chunk `chunk` of this node's segment: its own values.
  static void send_reduce(ChunkSums<Lane>& c, std::size_t chunk, Bytes payload) {
    c.count(payload);
    c.link.send(
        {Phase::reduce, static_cast<std::uint32_t>(c.self), static_cast<std::uint32_t>(chunk), 1},
        std::move(payload));
  }

  // Returns true when the message completed a chunk of the result.
  bool handle(const Message& msg) {
    const ChunkTag& tag = msg.tag;
    const std::size_t nodes = c_.nodes;
    if ((tag.phase != Phase::reduce && tag.phase != Phase::gather) || tag.segment >= nodes ||
        tag.chunk >= c_.geometry.chunks(tag.segment) ||
        (tag.phase == Phase::reduce && (tag.hop == 0 || tag.hop >= nodes))) {
      c_.stats.drop("unexpected message " + tag_text(tag) + " during the reduce");
      return false;
    }
    auto [begin, end] = c_.geometry.range(tag.segment, tag.chunk);
    // A partial sum at hop h carries h nodes' values; a complete one all.
    const Lane& lane = c_.lanes[tag.phase == Phase::reduce ? tag.hop : nodes];
    if (msg.payload.size() != lane.wire_bytes(end - begin)) {
      c_.stats.drop("wrong payload size " + std::to_string(msg.payload.size()) + " for " +
                    tag_text(tag));
      return false;
    }
    if (c_.io && !c_.io->ready(begin, end)) {
      wait_for_io(msg);
      return false;
    }
    const std::size_t id = c_.geometry.chunk_id(tag.segment, tag.chunk);
    return tag.phase == Phase::reduce ? on_partial(tag, id, begin, end, msg.payload)
                                      : on_final(tag, id, begin, end, msg.payload);
  }

  // A message whose elements the io cannot take yet (ready) waits until
  // it can; at most two per chunk of the op (a partial sum and the
  // complete one), so that a peer that repeats itself cannot grow it.
  void wait_for_io(const Message& msg) {
    if (waiting_.size() >= 2 * c_.geometry.total_chunks()) {
      c_.stats.drop("too many messages waiting for their statistics: " + tag_text(msg.tag));
      return;
    }
    waiting_.push_back(msg);
  }

  // The waiting messages that the io can take now, in the order they came;
  // returns how many completed a chunk of the result.
  std::size_t retry_waiting() {
    std::size_t completed = 0;
    for (std::size_t i = 0; i < waiting_.size();) {
      auto [begin, end] = c_.geometry.range(waiting_[i].tag.segment, waiting_[i].tag.chunk);
      if (!c_.io->ready(begin, end)) {
        ++i;
        continue;
      }
      const Message msg = std::move(waiting_[i]);
      waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(i));
      if (handle(msg)) ++completed;
    }
    return completed;
  }

  // A partial sum of tag.hop contributions.
  bool on_partial(const ChunkTag& tag, std::size_t id, std::size_t begin, std::size_t end,
                  const Bytes& payload) {
    const std::size_t nodes = c_.nodes;
    const std::size_t expected_hop = (c_.self + nodes - tag.segment) % nodes;
    if (tag.hop != expected_hop || reduced_[id]) {
      c_.stats.drop("stale or duplicate " + tag_text(tag));
      return false;
    }
    reduced_[id] = true;
    const std::size_t n = end - begin;
    c_.await_local(tag.segment, end);
    if constexpr (kFloatWire) {
      if (float* sum = ChunkSums<Lane>::writable_floats(payload))
        return partial_in_place(tag, id, begin, n, sum, payload);
    }
    const Lane& in_lane = c_.lanes[tag.hop];
    if (tag.hop + 1 < nodes) {
      // Block by block through scratch that stays in cache: received
      // partial sum + own values -> the next partial sum on the wire.
      const Lane& out_lane = c_.lanes[tag.hop + 1];
      OwnedBuffer wire = allocate(out_lane.wire_bytes(n));
      c_.scratch.resize(kBlock);
      for (std::size_t at = 0; at < n; at += kBlock) {  // at is a multiple of 8
        const std::size_t len = std::min(kBlock, n - at);
        in_lane.decode_add(payload.data() + in_lane.wire_bytes(at), len,
                           c_.local_block(begin + at, len), c_.scratch.data());
        out_lane.encode(c_.scratch.data(), len, wire.data.get() + out_lane.wire_bytes(at));
      }
      send({Phase::reduce, tag.segment, tag.chunk, tag.hop + 1}, wire.bytes());
      return false;
    }
    // This node owns the segment: the sum is complete.
    const Lane& out_lane = c_.lanes[nodes];
    OwnedBuffer wire = allocate(out_lane.wire_bytes(n));
    for (std::size_t at = 0; at < n; at += kBlock) {
      const std::size_t len = std::min(kBlock, n - at);
      std::uint8_t* out = wire.data.get() + out_lane.wire_bytes(at);
      Acc* sums = c_.sums_block(begin + at);
      in_lane.decode_add(payload.data() + in_lane.wire_bytes(at), len,
                         c_.local_block(begin + at, len), sums);
      out_lane.encode(sums, len, out);
      if constexpr (Lane::kRounds) out_lane.decode(out, len, sums);
      if (c_.io) c_.io->result(begin + at, len, sums);
    }
    c_.done[id] = true;
    send({Phase::gather, tag.segment, tag.chunk, 1}, wire.bytes());
    if (!c_.io) c_.finish(begin, end);
    c_.finalized(tag.segment);
    return true;
  }

  bool partial_in_place(const ChunkTag& tag, std::size_t id, std::size_t begin, std::size_t n,
                        float* sum, const Bytes& payload) {
    const float* mine = c_.local + begin;
    if (tag.hop + 1 < c_.nodes) {
      add_into(sum, mine, n);
      send({Phase::reduce, tag.segment, tag.chunk, tag.hop + 1}, payload);
      return false;
    }
    // Complete: the sum travels on, this node keeps the average.
    if (c_.stream)
      add_and_average_streamed(sum, mine, c_.result + begin, n, c_.average_over);
    else
      add_and_average(sum, mine, c_.result + begin, n, c_.average_over);
    c_.done[id] = true;
    send({Phase::gather, tag.segment, tag.chunk, 1}, payload);
    c_.finalized(tag.segment);
    return true;
  }

  // A complete sum on its way round.
  bool on_final(const ChunkTag& tag, std::size_t id, std::size_t begin, std::size_t end,
                const Bytes& payload) {
    const std::size_t nodes = c_.nodes;
    const std::size_t expected_hop = (c_.self + nodes - c_.owner(tag.segment)) % nodes;
    if (tag.hop != expected_hop || c_.done[id]) {
      c_.stats.drop("stale or duplicate " + tag_text(tag));
      return false;
    }
    c_.done[id] = true;
    if (tag.segment == c_.self) ++own_returned_;  // a chunk of this node's segment went round
    if (tag.hop + 1 < nodes) send({Phase::gather, tag.segment, tag.chunk, tag.hop + 1}, payload);
    c_.store_sums(begin, end, payload);
    c_.finalized(tag.segment);
    return true;
  }

  void send(const ChunkTag& tag, Bytes payload) {
    c_.count(payload);
    c_.link.send(tag, std::move(payload));
  }

  ChunkSums<Lane>& c_;
  std::vector<Message> waiting_;  // messages the io cannot take yet
  std::vector<bool> reduced_;     // partial sum of this chunk seen
  std::size_t own_sent_ = 0;      // chunks of the own segment sent
  std::size_t own_returned_ = 0;  // of them, those whose complete sum came back
};

// The direct schedule moves the same bytes in two hops instead of
// 2 (N - 1), but a node takes messages from every other at once and holds
// what arrives for a chunk until the chunk's last node's values are there.
// On links that bandwidth limits its flows into one node share the link
// less well than the ring's one: measured on 1 Gbit/s, `none` of 1 MiB took
// 5-9% longer, `quant:8` of 256 KiB to 1 MiB 8-19% less (docs/benchmarks.md).
// So only for ops whose sums take at most direct_bytes on the wire, and
// for lanes that round at every hop only where the owner can make the
// ring's roundings (the ring's order of roundings is the method's
// definition: takes_direct_schedule).
template <class Lane>
void run(ChunkSums<Lane>& c) {
  if (c.nodes == 1) {
    c.finish_locally();
    return;
  }
  if (c.direct()) {
    detail::direct_allreduce(c);
    return;
  }
  RingAllreduce<Lane>(c).run();
}

}  // namespace

template <class Lane>
void ring_allreduce(RingLink& link, const Lane& lane, const typename Lane::Acc* local,
                    typename Lane::Acc* result, std::size_t elements, const RingOptions& options,
                    RingStats& stats, std::size_t average_over,
                    std::shared_ptr<const void> local_owner, LocalStaging* staging,
                    std::size_t sent_ahead) {
  ChunkSums<Lane> sums(link, lane, local, result, nullptr, elements, options, stats, average_over,
                       std::move(local_owner), staging);
  sums.sent_ahead = sent_ahead;
  run(sums);
}

template <class Lane>
std::size_t ring_allreduce_send_ahead(RingLink& link, const Lane& lane,
                                      const typename Lane::Acc* local, std::size_t elements,
                                      const RingOptions& options, RingStats& stats,
                                      std::shared_ptr<const void> local_owner,
                                      LocalStaging* staging) {
  ChunkSums<Lane> sums(link, lane, local, nullptr, nullptr, elements, options, stats, 1,
                       std::move(local_owner), staging);
  if (sums.nodes == 1) return 0;
  if (sums.direct()) return detail::direct_send_ahead(sums);
  return RingAllreduce<Lane>::send_ahead(sums);
}

template <class Lane>
void ring_allreduce(RingLink& link, const Lane& lane, BlockIo<typename Lane::Acc>& io,
                    std::size_t elements, const RingOptions& options, RingStats& stats,
                    LocalStaging* staging) {
  ChunkSums<Lane> sums(link, lane, nullptr, nullptr, &io, elements, options, stats, 1, {}, staging);
  run(sums);
}

template void ring_allreduce<FloatLane>(RingLink&, const FloatLane&, const float*, float*,
                                        std::size_t, const RingOptions&, RingStats&, std::size_t,
                                        std::shared_ptr<const void>, LocalStaging*, std::size_t);
template void ring_allreduce<HalfLane>(RingLink&, const HalfLane&, const float*, float*,
                                       std::size_t, const RingOptions&, RingStats&, std::size_t,
                                       std::shared_ptr<const void>, LocalStaging*, std::size_t);
template std::size_t ring_allreduce_send_ahead<FloatLane>(RingLink&, const FloatLane&, const float*,
                                                          std::size_t, const RingOptions&,
                                                          RingStats&, std::shared_ptr<const void>,
                                                          LocalStaging*);
template std::size_t ring_allreduce_send_ahead<HalfLane>(RingLink&, const HalfLane&, const float*,
                                                         std::size_t, const RingOptions&,
                                                         RingStats&, std::shared_ptr<const void>,
                                                         LocalStaging*);
template void ring_allreduce<CodeLane>(RingLink&, const CodeLane&, BlockIo<std::uint32_t>&,
                                       std::size_t, const RingOptions&, RingStats&, LocalStaging*);

}  // namespace zring::collective
