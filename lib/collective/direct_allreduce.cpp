// The direct schedule of a chunked all-reduce (ring_allreduce.hpp): every
// node's values of a chunk go straight to the chunk's owner, which sums
// them in the ring's order and sends the complete sum straight back out.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "collective/chunk_sums.hpp"

namespace zring::collective::detail {
namespace {

template <class Lane>
std::size_t place_of(const ChunkSums<Lane>& c, std::size_t segment, std::size_t node) noexcept {
  return (node + c.nodes - segment) % c.nodes + 1;
}

// This node's values of every chunk it does not own, as message number,
// segment and chunk, in the order it reads them (StagingOrder: segment
// self, self - 1, ...; the segment it owns, self + 1, it reads last, to
// complete its sums), for as long as `each` returns true.
template <class Lane, class Each>
void each_own_value(const ChunkSums<Lane>& c, Each each) {
  std::size_t message = 0;
  for (std::size_t k = 0; k + 1 < c.nodes; ++k) {
    const std::size_t s = (c.self + c.nodes - k) % c.nodes;
    for (std::size_t chunk = 0; chunk < c.geometry.chunks(s); ++chunk)
      if (!each(message++, s, chunk)) return;
  }
}

template <class Lane>
void send_value(ChunkSums<Lane>& c, std::size_t s, std::size_t chunk) {
  auto [begin, end] = c.geometry.range(s, chunk);
  c.send_to(c.owner(s),
            {Phase::to_owner, static_cast<std::uint32_t>(s), static_cast<std::uint32_t>(chunk),
             static_cast<std::uint32_t>(place_of(c, s, c.self))},
            c.own_payload(begin, end));
}

template <class Lane>
class DirectAllreduce {
 public:
  using Acc = typename Lane::Acc;
  static constexpr std::size_t kBlock = ChunkSums<Lane>::kBlock;

  explicit DirectAllreduce(ChunkSums<Lane>& c)
      : c_(c),
        mine_((c.self + 1) % c.nodes),
        held_(c.geometry.chunks(mine_), std::vector<Bytes>(c.nodes - 1)),
        held_count_(c.geometry.chunks(mine_), 0) {}

  void run() {
    send_own_values();
    std::size_t missing = c_.geometry.total_chunks();
    while (missing > 0) {
      const Deadline deadline = Clock::now() + c_.options.timeout;
      std::optional<Message> msg;
      while (!(msg = c_.link.recv_until(deadline)))
        if (Clock::now() >= deadline) c_.link.timed_out(awaited());
      if (handle(*msg)) --missing;
    }
  }

 private:
  // Node `node`'s place in the summation order of segment s: the ring's,
  // node s first (1), the owner s - 1 last (N).
  [[nodiscard]] std::size_t place(std::size_t segment, std::size_t node) const noexcept {
    return place_of(c_, segment, node);
  }

  // What went ahead of the summaries is not sent again.
  void send_own_values() {
    each_own_value(c_, [&](std::size_t message, std::size_t s, std::size_t chunk) {
      if (message < c_.sent_ahead) return true;
      c_.await_local(s, c_.geometry.range(s, chunk).second);
      send_value(c_, s, chunk);
      return true;
    });
  }

  // The node the op waits for: the first whose values of a chunk this
  // node owns are missing, else the owner of the first chunk not done.
  [[nodiscard]] std::size_t awaited() const {
    for (std::size_t chunk = 0; chunk < held_.size(); ++chunk) {
      if (c_.done[c_.geometry.chunk_id(mine_, chunk)]) continue;
      for (std::size_t p = 1; p < c_.nodes; ++p)
        if (held_[chunk][p - 1].empty()) return (mine_ + p - 1) % c_.nodes;
    }
    for (std::size_t s = 0; s < c_.nodes; ++s)
      for (std::size_t chunk = 0; chunk < c_.geometry.chunks(s); ++chunk)
        if (!c_.done[c_.geometry.chunk_id(s, chunk)]) return c_.owner(s);
    return c_.self;
  }

  // Returns true when the message completed a chunk of the result.
  bool handle(const Message& msg) {
    const ChunkTag& tag = msg.tag;
    const bool known = tag.segment < c_.nodes && tag.chunk < c_.geometry.chunks(tag.segment);
    if (known && tag.phase == Phase::to_owner && tag.segment == mine_ && tag.hop >= 1 &&
        tag.hop < c_.nodes)
      return on_values(tag, msg.payload);
    if (known && tag.phase == Phase::from_owner && tag.segment != mine_ && tag.hop == 0)
      return on_sums(tag, msg.payload);
    c_.stats.drop("unexpected message " + tag_text(tag) + " during the direct reduce");
    return false;
  }

  bool size_fits(const ChunkTag& tag, const Bytes& payload, const Lane& lane) {
    auto [begin, end] = c_.geometry.range(tag.segment, tag.chunk);
    if (payload.size() == lane.wire_bytes(end - begin)) return true;
    c_.stats.drop("wrong payload size " + std::to_string(payload.size()) + " for " + tag_text(tag));
    return false;
  }

  // One node's values of a chunk this node owns.
  bool on_values(const ChunkTag& tag, const Bytes& payload) {
    if (!size_fits(tag, payload, c_.lanes[1])) return false;
    Bytes& slot = held_[tag.chunk][tag.hop - 1];
    if (!slot.empty() || c_.done[c_.geometry.chunk_id(mine_, tag.chunk)]) {
      c_.stats.drop("stale or duplicate " + tag_text(tag));
      return false;
    }
    slot = payload;
    if (++held_count_[tag.chunk] < c_.nodes - 1) return false;
    complete(tag.chunk);
    return true;
  }

  // Every other node's values of a chunk are here: the sum, in the ring's
  // order (this node's own values last), kept and sent to every node.
  void complete(std::size_t chunk) {
    auto [begin, end] = c_.geometry.range(mine_, chunk);
    const std::size_t n = end - begin;
    std::vector<Bytes>& in = held_[chunk];
    c_.await_local(mine_, end);
    Bytes out;
    if constexpr (ChunkSums<Lane>::kFloatWire) out = sum_floats_in_place(in, begin, n);
    if (out.empty() && n > 0) out = sum_blocks(in, begin, n);
    c_.done[c_.geometry.chunk_id(mine_, chunk)] = true;
    const ChunkTag tag{Phase::from_owner, static_cast<std::uint32_t>(mine_),
                       static_cast<std::uint32_t>(chunk), 0};
    for (std::size_t to = 0; to < c_.nodes; ++to) {
      if (to != c_.self) c_.send_to(to, tag, out);
    }
    in.assign(in.size(), Bytes());
    c_.finalized(mine_);
  }

  // float32 values whose payloads are aligned: summed into the first
  // node's payload (ours alone, RingLink::recv), which then travels on as
  // the sum; nothing is copied. Empty when a payload is not aligned.
  Bytes sum_floats_in_place(const std::vector<Bytes>& in, std::size_t begin, std::size_t n) {
    float* sum = ChunkSums<Lane>::writable_floats(in[0]);
    if (!sum || n == 0) return Bytes();
    for (std::size_t p = 1; p < in.size(); ++p)
      if (!ChunkSums<Lane>::writable_floats(in[p])) return Bytes();
    for (std::size_t p = 1; p < in.size(); ++p)
      add_into(sum, reinterpret_cast<const float*>(in[p].data()), n);
    const float* mine = c_.local + begin;
    if (c_.stream)
      add_and_average_streamed(sum, mine, c_.result + begin, n, c_.average_over);
    else
      add_and_average(sum, mine, c_.result + begin, n, c_.average_over);
    return in[0];
  }

  // Block by block through scratch that stays in cache: the sums in the
  // wire form of all nodes' (lanes[nodes]), and into the result.
  Bytes sum_blocks(const std::vector<Bytes>& in, std::size_t begin, std::size_t n) {
    const Lane& in_lane = c_.lanes[1];
    const Lane& out_lane = c_.lanes[c_.nodes];
    OwnedBuffer wire = allocate(out_lane.wire_bytes(n));
    std::vector<Acc> a(kBlock), b(kBlock);
    for (std::size_t at = 0; at < n; at += kBlock) {  // at is a multiple of 8
      const std::size_t len = std::min(kBlock, n - at);
      const std::size_t offset = in_lane.wire_bytes(at);
      Acc* acc = a.data();
      Acc* next = b.data();
      in_lane.decode(in[0].data() + offset, len, acc);
      for (std::size_t p = 1; p < in.size(); ++p) {
        // decode_add's out may alias nothing: the two blocks take turns.
        in_lane.decode_add(in[p].data() + offset, len, acc, next);
        std::swap(acc, next);
      }
      const Acc* mine = c_.local_block(begin + at, len);
      Acc* sums = c_.sums_block(begin + at);
      std::uint8_t* out = wire.data.get() + out_lane.wire_bytes(at);
      if constexpr (Lane::kRounds) {
        // As the ring's owner: the partial sum as it would arrive (in its
        // wire form), this node's values added as the lane adds them, and
        // kept as they are sent.
        in_lane.encode(acc, len, out);
        in_lane.decode_add(out, len, mine, sums);
        out_lane.encode(sums, len, out);
        out_lane.decode(out, len, sums);
      } else {
        for (std::size_t i = 0; i < len; ++i) sums[i] = acc[i] + mine[i];
        out_lane.encode(sums, len, out);
      }
      if (c_.io) c_.io->result(begin + at, len, sums);
    }
    if (!c_.io) c_.finish(begin, begin + n);
    return wire.bytes();
  }

  // The complete sums of a chunk another node owns.
  bool on_sums(const ChunkTag& tag, const Bytes& payload) {
    if (!size_fits(tag, payload, c_.lanes[c_.nodes])) return false;
    const std::size_t id = c_.geometry.chunk_id(tag.segment, tag.chunk);
    if (c_.done[id]) {
      c_.stats.drop("stale or duplicate " + tag_text(tag));
      return false;
    }
    c_.done[id] = true;
    auto [begin, end] = c_.geometry.range(tag.segment, tag.chunk);
    c_.store_sums(begin, end, payload);
    c_.finalized(tag.segment);
    return true;
  }

  ChunkSums<Lane>& c_;
  std::size_t mine_;                      // the segment this node owns
  std::vector<std::vector<Bytes>> held_;  // per chunk of it: each node's values, by place - 1
  std::vector<std::size_t> held_count_;
};

}  // namespace

template <class Lane>
void direct_allreduce(ChunkSums<Lane>& sums) {
  DirectAllreduce<Lane>(sums).run();
}

template <class Lane>
std::size_t direct_send_ahead(ChunkSums<Lane>& c) {
  std::size_t sent = 0;
  each_own_value(c, [&](std::size_t, std::size_t s, std::size_t chunk) {
    const std::size_t end = c.geometry.range(s, chunk).second;
    if (c.staging && !c.staging->staged(s, end - c.geometry.range(s, 0).first)) return false;
    send_value(c, s, chunk);
    ++sent;
    return true;
  });
  return sent;
}

template void direct_allreduce<FloatLane>(ChunkSums<FloatLane>&);
template void direct_allreduce<HalfLane>(ChunkSums<HalfLane>&);
template void direct_allreduce<CodeLane>(ChunkSums<CodeLane>&);
template std::size_t direct_send_ahead<FloatLane>(ChunkSums<FloatLane>&);
template std::size_t direct_send_ahead<HalfLane>(ChunkSums<HalfLane>&);

}  // namespace zring::collective::detail
