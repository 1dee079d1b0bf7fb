// staging_board.hpp - progress of a staged op, in the shared buffer (internal).
//
// The first kBoardBytes of every shared buffer hold a StagingBoard: how far
// the client has copied its values in (in StagingOrder positions), per ring
// segment how far zringd has written final averages, and the answer to an
// op whose averages are in the buffer (wire::Result, in place of a message:
// the client need not wait for ZeroMQ's two I/O threads). Each side bumps a
// futex word after it moves its counter, so the other can sleep instead of
// spinning. Nothing here is trusted beyond "a number": a client that lies
// only gets its own values averaged wrongly, as if it had written garbage.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collective/staging.hpp"
#include "wire/wire.hpp"

namespace zring::transport {

class SharedRegion;

inline constexpr std::size_t kBoardBytes = 4096;

struct StagingBoard {
  std::atomic<std::uint64_t> staged;         // client: elements in place, in staging order
  std::atomic<std::uint32_t> staged_seq;     // futex word, bumped after staged moves
  std::atomic<std::uint32_t> published_seq;  // futex word, bumped after a published[] moves
  std::atomic<std::uint32_t> finished;       // zringd: done with the op (its answer follows)
  // client: waves of block statistics in place (stats_area), of stats_floats.
  std::atomic<std::uint32_t> stats_waves;
  // zringd: the Result of request `answered` (0: none yet), fields first.
  std::atomic<std::uint64_t> answered;
  std::atomic<std::uint64_t> result_op, result_wire_bytes, result_dense_bytes;
  std::atomic<std::uint32_t> result_world_size, result_rank;
  // client: how many block statistics it leaves after the values (0: none).
  std::atomic<std::uint64_t> stats_floats;
  // zringd: per segment, how many of its first elements are final.
  static constexpr std::size_t kSegments = (kBoardBytes - 72) / 8;
  std::atomic<std::uint64_t> published[kSegments];

  // The client, before it submits a staged op: nothing staged or published;
  // `stats` block statistics to come with the values (stats_floats).
  void reset(std::uint64_t stats = 0) noexcept;
  // The client: the first `upto` positions are in place.
  void stage(std::uint64_t upto) noexcept;
  // zringd: the answer to the op of request result.request, whose averages
  // are in the buffer; wakes the client (published_seq).
  void answer(const wire::Result& result) noexcept;
  // The client: that answer, if zringd gave it for `request`.
  [[nodiscard]] std::optional<wire::Result> answer_to(std::uint64_t request) const noexcept;
  // Wakes whoever sleeps on the word.
  static void wake(std::atomic<std::uint32_t>& word) noexcept;
  // Sleeps while word == seen, at most `for_at_most`; returns at once
  // otherwise. Spurious returns are fine: callers re-check their counters.
  static void sleep_while(const std::atomic<std::uint32_t>& word, std::uint32_t seen,
                          std::chrono::microseconds for_at_most) noexcept;
};
static_assert(sizeof(StagingBoard) <= kBoardBytes);
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

// The board of the region, which must have been made with room for it.
StagingBoard& board_of(const SharedRegion& region) noexcept;

// Where a staged op of `elements` values leaves its block statistics in its
// buffer (StagingBoard::stats_floats of them), in floats from the buffer's
// start: after the values, 64-byte aligned.
[[nodiscard]] constexpr std::size_t stats_area(std::size_t elements) noexcept {
  return (elements + 15) / 16 * 16;
}

// zringd's side of a staged op: the boards of its local ranks' buffers.
// wait_staged reads rank 0's progress (the one rank whose values the ring
// streams); wait_all waits for every rank; publish tells rank 0 (the other
// ranks get their copy when the op ends). The clients stage in the order of
// the ring as the ring file lists it; when the ring that runs the op has
// other members (a node is gone), its segments are not the order's, and a
// staged op neither streams in nor out: it waits for every value, and the
// clients copy the averages out when the op ends.
class RegionStaging final : public collective::LocalStaging {
 public:
  // who[l]: how errors name local rank l ("rank 3 (local rank 1 of node 'b')").
  RegionStaging(std::vector<std::shared_ptr<SharedRegion>> regions, std::vector<std::string> who,
                collective::StagingOrder order, std::chrono::milliseconds timeout,
                std::size_t ring_nodes, std::size_t ring_node);
  // Tells every client the op is over (it then only waits for the answer).
  ~RegionStaging() override;
  RegionStaging(const RegionStaging&) = delete;
  RegionStaging& operator=(const RegionStaging&) = delete;
  void wait_staged(std::size_t segment, std::size_t upto) override;
  void wait_all() override;
  void wait_wave(std::size_t wave) override;
  bool staged_wave(std::size_t wave) override;
  const float* client_stats(std::size_t wave, std::size_t count) override;
  bool staged(std::size_t segment, std::size_t upto) override;
  void publish(std::size_t segment, std::size_t upto) override;
  void publish_prefix(std::size_t end) override;
  // The op runs again: the clients are not told it is over when this goes.
  void keep_open() noexcept { open_ = true; }

 private:
  void wait_for(std::size_t l, std::uint64_t position);
  // Whether rank 0 staged up to `position` of the order.
  [[nodiscard]] bool staged_to(std::uint64_t position) const;
  [[nodiscard]] std::uint64_t segment_target(std::size_t segment, std::size_t upto) const;
  [[nodiscard]] std::uint64_t wave_target(std::size_t wave) const;
  // Until counter (on rank l's board) reaches target, moving on as the
  // client stages; throws timeout naming the rank after a timeout's silence.
  template <class Counter>
  void wait_until(std::size_t l, const Counter& counter, std::uint64_t target);
  void tell(std::size_t segment, std::size_t upto);
  std::vector<std::shared_ptr<SharedRegion>> regions_;
  std::vector<std::string> who_;
  collective::StagingOrder order_;
  std::chrono::milliseconds timeout_;
  bool streams_;                        // the ring's segments are the order's
  bool open_ = false;                   // keep_open()
  std::vector<std::size_t> published_;  // per segment, what publish_prefix told last
};

}  // namespace zring::transport
