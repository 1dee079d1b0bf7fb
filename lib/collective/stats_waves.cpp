#include "collective/stats_waves.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <zring/error.hpp>

namespace zring::collective {

StatsWaves::StatsWaves(PlanInputs& in, const codec::AffineCodec& codec,
                       const std::vector<Block>& blocks, const StagingOrder& order, bool streamed)
    : in_(in),
      codec_(codec),
      blocks_(blocks),
      spb_(codec.stats_per_block()),
      streamed_(streamed),
      wave_of_(blocks.size(), 0),
      wave_blocks_(order.waves()),
      got_(order.waves(), std::vector<std::vector<float>>(in.link.nodes())),
      have_(order.waves(), std::vector<bool>(in.link.nodes(), false)),
      nodes_in_(order.waves(), 0),
      complete_(order.waves(), false),
      grids_(blocks.size()),
      own_(order.waves()) {
  // A block belongs to the wave of the piece it starts in (the pieces are
  // cut on block starts, so it lies wholly inside it).
  for (std::size_t k = 0; k < order.pieces(); ++k) {
    const StagingOrder::Piece piece = order.piece(k);
    const auto starts_at_or_after = [&](std::size_t at) {
      return std::lower_bound(blocks.begin(), blocks.end(), at,
                              [](const Block& b, std::size_t v) { return b.begin < v; });
    };
    for (auto it = starts_at_or_after(piece.begin); it != starts_at_or_after(piece.end); ++it)
      wave_of_[static_cast<std::size_t>(it - blocks.begin())] = piece.wave;
  }
  for (std::size_t b = 0; b < blocks.size(); ++b) wave_blocks_[wave_of_[b]].push_back(b);
}

StatsWaves::~StatsWaves() {
  if (helper_started_) in_.work.helper.wait_quietly();
}

void StatsWaves::own_stats(std::size_t w, std::vector<float>& out) const {
  out.assign(expected(w), 0.0f);
  if (streamed_) {
    // The client's, taken as it copied the wave in; else the values'.
    LocalStaging& staging = *in_.input.staging;
    if (const float* given = staging.client_stats(w, blocks_.size() * spb_)) {
      for (std::size_t i = 0; i < wave_blocks_[w].size(); ++i)
        std::copy_n(given + wave_blocks_[w][i] * spb_, spb_, out.data() + i * spb_);
      return;
    }
    staging.wait_wave(w);
  }
  std::vector<float> one(spb_);
  for (std::size_t i = 0; i < wave_blocks_[w].size(); ++i) {
    const Block& block = blocks_[wave_blocks_[w][i]];
    combine_ranks(codec_, in_.x.size(), out.data() + i * spb_, one.data(),
                  [&](std::size_t l, float* target) {
                    codec_.block_stats(in_.x[l] + block.begin, block.size, target);
                  });
  }
}

void StatsWaves::first_grids(const std::vector<NodeSummary>& summaries) {
  for (std::size_t node = 0; node < summaries.size(); ++node) {
    const std::vector<float>& stats = summaries[node].stats;
    if (stats.size() != expected(0)) {
      throw Error(ErrorCode::malformed_message, in_.link.describe(node) + " sent " +
                                                    std::to_string(stats.size()) +
                                                    " block statistics of wave 0 where " +
                                                    std::to_string(expected(0)) + " were expected");
    }
    arrived(0, node, stats);
  }
  // This node's later waves, in order, each as soon as its values are
  // there; the ring thread is woken to send each (poll).
  if (!pending()) return;
  helper_started_ = true;
  in_.work.helper.start(
      [this] {
        for (std::size_t w = 1; w < own_.size(); ++w) {
          own_stats(w, own_[w]);
          made_.store(w + 1, std::memory_order_release);
          in_.link.wake();
        }
      },
      [this] { in_.link.wake(); });
}

bool StatsWaves::ready(std::size_t begin, std::size_t end) const {
  if (complete_count_ == complete_.size()) return true;
  const std::vector<Block>& blocks = blocks_;
  auto it = std::upper_bound(blocks.begin(), blocks.end(), begin,
                             [](std::size_t at, const Block& b) { return at < b.begin + b.size; });
  for (; it != blocks.end() && it->begin < end; ++it)
    if (!complete_[wave_of_[static_cast<std::size_t>(it - blocks.begin())]]) return false;
  return true;
}

bool StatsWaves::take(const Message& msg) {
  if (msg.tag.phase != Phase::stats) return false;
  const std::size_t node = msg.tag.segment, w = msg.tag.chunk, nodes = in_.link.nodes();
  if (node >= nodes || node == in_.link.node() || msg.tag.hop != 0 || w == 0 ||
      w >= wave_blocks_.size() || have_[w][node]) {
    in_.stats.drop("unexpected or duplicate statistics (origin " + std::to_string(node) +
                   ", wave " + std::to_string(w) + ", hop " + std::to_string(msg.tag.hop) + ")");
    return true;
  }
  if (msg.payload.size() != expected(w) * sizeof(float)) {
    throw Error(ErrorCode::malformed_message,
                in_.link.describe(node) + " sent " + std::to_string(msg.payload.size()) +
                    " bytes of block statistics for wave " + std::to_string(w) + " where " +
                    std::to_string(expected(w) * sizeof(float)) + " were expected");
  }
  std::vector<float> stats(expected(w));
  std::memcpy(stats.data(), msg.payload.data(), msg.payload.size());
  arrived(w, node, std::move(stats));
  return true;
}

bool StatsWaves::poll(bool wait) {
  if (!pending()) return false;
  std::size_t made = made_.load(std::memory_order_acquire);
  if (made <= next_own_) {
    if (!wait && !in_.work.helper.done()) return false;
    in_.work.helper.wait();  // rethrows what it threw (a client that stopped staging)
    made = made_.load(std::memory_order_acquire);
    if (made <= next_own_)
      throw Error(ErrorCode::internal, "statistics waves: the helper stopped short");
  }
  RingLink& link = in_.link;
  for (; next_own_ < made; ++next_own_) {
    const std::size_t w = next_own_;
    const Bytes bytes = Bytes::copy_of(own_[w].data(), own_[w].size() * sizeof(float));
    for (std::size_t node = 0; node < link.nodes(); ++node) {
      if (node == link.node()) continue;
      link.send_to(
          node,
          {Phase::stats, static_cast<std::uint32_t>(link.node()), static_cast<std::uint32_t>(w), 0},
          bytes);
      in_.stats.bytes_sent += bytes.size();
      ++in_.stats.messages_sent;
    }
    arrived(w, link.node(), std::move(own_[w]));
  }
  return true;
}

// Node `node`'s statistics of wave w; once every node's are here, they are
// combined in node order (the same bits on every node) into the grids.
void StatsWaves::arrived(std::size_t w, std::size_t node, std::vector<float> stats) {
  got_[w][node] = std::move(stats);
  have_[w][node] = true;
  if (++nodes_in_[w] < got_[w].size()) return;
  std::vector<float> combined(spb_);
  for (std::size_t i = 0; i < wave_blocks_[w].size(); ++i) {
    const std::size_t b = wave_blocks_[w][i];
    std::copy_n(got_[w][0].data() + i * spb_, spb_, combined.data());
    for (std::size_t n = 1; n < got_[w].size(); ++n)
      codec_.combine_stats(combined.data(), got_[w][n].data() + i * spb_);
    grids_[b] = codec_.grid(combined.data(), blocks_[b].size, in_.op.world_size);
  }
  complete_[w] = true;
  ++complete_count_;
  got_[w].assign(got_[w].size(), {});  // no longer needed
}

}  // namespace zring::collective
