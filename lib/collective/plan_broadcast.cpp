// The broadcast: every rank gets the values of the root rank, bit for bit.
//
// Not an all-reduce: nothing is compressed, summed or divided, whatever the
// manifest's method. After the summary exchange (which checks that every
// rank submitted the same manifest, root included, and freezes the ring the
// op runs on), the root's node cuts the root rank's fused values into
// chunks of chunk_bytes and sends them to its successor (hop 1). A node
// d hops after the root keeps each chunk in the result and passes the same
// bytes on (hop d + 1); the root's predecessor, the last of the chain,
// answers each chunk instead with an empty acknowledgement that reaches
// the root at hop N (it went all the way round). The root keeps at most a
// window of chunks unacknowledged, so no queue on the ring grows with the
// op, and it is done only when every node has every chunk. Each node sends
// the op's bytes once (the last one sends only the acknowledgements): the
// chain is pipelined, its time about (N - 1) chunks of latency plus the
// values' size over the slowest link.
//
// Messages: phase broadcast, segment the root's node, chunk c, hop as
// above. Anything else (another phase, another segment, a hop this node
// does not take, a chunk of the wrong size, a second copy) is dropped and
// counted, never written.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>
#include <zring/error.hpp>

#include "collective/plan.hpp"

namespace zring::collective {
namespace {

// How many bytes the root keeps unacknowledged on the ring (at least 4 chunks).
constexpr std::size_t kWindowBytes = std::size_t{16} << 20;

class BroadcastPlan final : public MethodPlan {
 public:
  explicit BroadcastPlan(PlanInputs& in)
      : in_(in),
        nodes_(in.link.nodes()),
        self_(in.link.node()),
        chunk_elems_(std::max<std::size_t>(in.op.ring.chunk_bytes / sizeof(float), 1)),
        chunks_((in.elements() + chunk_elems_ - 1) / chunk_elems_) {}

  // Nothing to agree on but the manifest, which every summary carries.
  void prepare(NodeSummary&) override {}

  void execute(const std::vector<NodeSummary>&, float* result) override {
    const std::size_t root = in_.input.manifest.root;
    const std::size_t world = in_.op.world_size;
    const std::size_t local_ranks = in_.op.local_ranks;
    if (root >= world)
      throw AgreedFailure(ErrorCode::invalid_argument,
                          "op " + std::to_string(in_.op.op_number) + ": broadcast from rank " +
                              std::to_string(root) + ", but the ring of this op has " +
                              std::to_string(world) + " ranks (" + std::to_string(nodes_) +
                              " nodes x " + std::to_string(local_ranks) +
                              " local ranks): root must be below " + std::to_string(world));
    root_node_ = root / local_ranks;
    if (self_ == root_node_)
      send_from_root(in_.input.ranks.at(root % local_ranks), result);
    else
      receive_and_pass_on(result);
    if (in_.input.staging) in_.input.staging->publish_prefix(in_.elements());
  }

 private:
  std::pair<std::size_t, std::size_t> range(std::size_t c) const {
    const std::size_t begin = c * chunk_elems_;
    return {begin, std::min(in_.elements(), begin + chunk_elems_)};
  }

  ChunkTag tag(std::size_t c, std::size_t hop) const {
    return {Phase::broadcast, static_cast<std::uint32_t>(root_node_), static_cast<std::uint32_t>(c),
            static_cast<std::uint32_t>(hop)};
  }

  std::string tag_text(const ChunkTag& t) const {
    return "broadcast message (phase " + std::to_string(static_cast<int>(t.phase)) + ", segment " +
           std::to_string(t.segment) + ", chunk " + std::to_string(t.chunk) + ", hop " +
           std::to_string(t.hop) + ")";
  }

  void send(const ChunkTag& t, Bytes payload) {
    in_.stats.bytes_sent += payload.size();
    ++in_.stats.messages_sent;
    in_.link.send(t, std::move(payload));
  }

  Message next_message() { return in_.link.recv(Clock::now() + in_.op.ring.timeout); }

  void send_from_root(const float* values, float* result) {
    const std::size_t n = in_.elements();
    if (n != 0 && values != result) std::memcpy(result, values, n * sizeof(float));
    if (nodes_ == 1) return;
    const std::size_t window =
        std::max<std::size_t>(kWindowBytes / (chunk_elems_ * sizeof(float)), 4);
    std::vector<bool> acknowledged(chunks_, false);
    std::size_t sent = 0;
    std::size_t acks = 0;
    while (acks < chunks_) {
      for (; sent < chunks_ && sent < acks + window; ++sent) {
        const auto [begin, end] = range(sent);
        send(tag(sent, 1), Bytes::copy_of(result + begin, (end - begin) * sizeof(float)));
      }
      const Message msg = next_message();
      const ChunkTag& t = msg.tag;
      if (t.phase != Phase::broadcast || t.segment != root_node_ || t.hop != nodes_ ||
          t.chunk >= sent || !msg.payload.empty() || acknowledged[t.chunk]) {
        in_.stats.drop("unexpected " + tag_text(t) + " at the root of the broadcast");
        continue;
      }
      acknowledged[t.chunk] = true;
      ++acks;
    }
  }

  void receive_and_pass_on(float* result) {
    const std::size_t hop = (self_ + nodes_ - root_node_) % nodes_;
    const bool last = hop + 1 == nodes_;  // the successor is the root
    std::vector<bool> received(chunks_, false);
    std::size_t prefix = 0;  // chunks written from the first
    for (std::size_t got = 0; got < chunks_;) {
      Message msg = next_message();
      const ChunkTag& t = msg.tag;
      if (t.phase != Phase::broadcast || t.segment != root_node_ || t.hop != hop ||
          t.chunk >= chunks_ || received[t.chunk]) {
        in_.stats.drop("unexpected or duplicate " + tag_text(t) + " during a broadcast");
        continue;
      }
      const auto [begin, end] = range(t.chunk);
      if (msg.payload.size() != (end - begin) * sizeof(float)) {
        in_.stats.drop("wrong payload size " + std::to_string(msg.payload.size()) + " for " +
                       tag_text(t));
        continue;
      }
      std::memcpy(result + begin, msg.payload.data(), msg.payload.size());
      received[t.chunk] = true;
      ++got;
      if (last)
        send(tag(t.chunk, nodes_), Bytes{});
      else
        send(tag(t.chunk, hop + 1), std::move(msg.payload));
      if (!in_.input.staging) continue;
      const std::size_t before = prefix;
      while (prefix < chunks_ && received[prefix]) ++prefix;
      if (prefix != before) in_.input.staging->publish_prefix(range(prefix - 1).second);
    }
  }

  PlanInputs& in_;
  std::size_t nodes_;
  std::size_t self_;
  std::size_t chunk_elems_;
  std::size_t chunks_;
  std::size_t root_node_ = 0;
};

}  // namespace

std::unique_ptr<MethodPlan> make_broadcast_plan(PlanInputs& in) {
  return std::make_unique<BroadcastPlan>(in);
}

}  // namespace zring::collective
