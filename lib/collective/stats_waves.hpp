// stats_waves.hpp - an affine op's block statistics a wave at a time
// (internal to plan_affine.cpp).
//
// Every node must know every node's statistics of a block before any node
// encodes it (all share one grid per block). Taken whole, that is a pass
// over all the values before the first code leaves. In waves, a large op
// (staging_order) cuts its blocks as its staging order does: the summary
// carries each node's statistics of wave 0, and each node sends those of
// wave w (Phase::stats, straight to every other node) as soon as it has
// them: for values being staged, once the client copied wave w in (and
// with it, as a client of one local rank does, the wave's statistics). The
// ring meanwhile encodes and sums the blocks whose grids are known
// (BlockIo::ready), waves in the order it needs them. This node's later
// waves are made on the workspace's helper thread (a pass over the values,
// or a wait for the client's, which on the ring thread would hold up its
// messages); the ring thread sends them as they are done (the helper wakes
// it).
#pragma once

#include <atomic>
#include <cstddef>
#include <vector>

#include "codec/codec.hpp"
#include "collective/plan.hpp"

namespace zring::collective {

// One block's statistics over every local rank's values, combined in rank
// order into acc: stats_of(l, target) writes rank l's into target (acc
// for rank 0, scratch for the others). The summary's whole pass and the
// waves both take them so, so that their bits agree.
template <class StatsOf>
void combine_ranks(const codec::AffineCodec& codec, std::size_t ranks, float* acc, float* scratch,
                   StatsOf&& stats_of) {
  for (std::size_t l = 0; l < ranks; ++l) {
    stats_of(l, l == 0 ? acc : scratch);
    if (l != 0) codec.combine_stats(acc, scratch);
  }
}

class StatsWaves {
 public:
  struct Block {
    std::size_t begin;
    std::size_t size;
  };

  // In order's waves; `streamed`: rank 0's values are still being staged
  // (in.input.staging), so a wave's statistics wait for its values.
  StatsWaves(PlanInputs& in, const codec::AffineCodec& codec, const std::vector<Block>& blocks,
             const StagingOrder& order, bool streamed);
  // Waits for the helper's task, which uses this.
  ~StatsWaves();
  StatsWaves(const StatsWaves&) = delete;
  StatsWaves& operator=(const StatsWaves&) = delete;

  // This node's statistics of wave w (wave 0: before the summary goes):
  // for staged values, the client's (LocalStaging::client_stats) or, when
  // it leaves none, taken once the wave is in; else taken from the values.
  void own_stats(std::size_t w, std::vector<float>& out) const;

  // Once every summary is here: every node's wave 0 (checked) combined
  // into its blocks' grids; grids() then holds every block's grid once its
  // wave is complete. Starts the helper on this node's later waves.
  void first_grids(const std::vector<NodeSummary>& summaries);
  [[nodiscard]] const std::vector<codec::AffineGrid>& grids() const noexcept { return grids_; }

  // The ring's side (BlockIo): whether every block of [begin, end) has its
  // grid; a Phase::stats message taken; this node's later waves, one at a
  // time as their values are there (poll), sent to every other node.
  [[nodiscard]] bool ready(std::size_t begin, std::size_t end) const;
  bool take(const Message& msg);
  [[nodiscard]] bool pending() const noexcept { return next_own_ < wave_blocks_.size(); }
  bool poll(bool wait);

 private:
  void arrived(std::size_t w, std::size_t node, std::vector<float> stats);
  [[nodiscard]] std::size_t expected(std::size_t w) const noexcept {
    return wave_blocks_[w].size() * spb_;
  }

  PlanInputs& in_;
  const codec::AffineCodec& codec_;
  const std::vector<Block>& blocks_;
  std::size_t spb_;
  bool streamed_;
  std::vector<std::size_t> wave_of_;                   // per block
  std::vector<std::vector<std::size_t>> wave_blocks_;  // per wave, its blocks in order
  std::vector<std::vector<std::vector<float>>> got_;   // [wave][node]: its statistics
  std::vector<std::vector<bool>> have_;                // [wave][node]: they came
  std::vector<std::size_t> nodes_in_;                  // per wave: nodes whose are here
  std::vector<bool> complete_;                         // per wave: grids made
  std::size_t complete_count_ = 0;
  std::size_t next_own_ = 1;  // this node's next wave to send (0 went in the summary)
  std::vector<codec::AffineGrid> grids_;
  // The helper's: this node's statistics of each later wave, and how many
  // waves it has made (release: own_ up to there is written).
  std::vector<std::vector<float>> own_;
  std::atomic<std::size_t> made_{1};
  bool helper_started_ = false;
};

}  // namespace zring::collective
