#include "transport/staging_board.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ctime>
#include <thread>
#include <zring/error.hpp>

#include "transport/shared_region.hpp"

namespace zring::transport {
namespace {

using Clock = std::chrono::steady_clock;

long futex(const std::atomic<std::uint32_t>& word, int op, std::uint32_t value,
           const timespec* timeout) noexcept {
  // A shared mapping: not FUTEX_PRIVATE_FLAG, the other process sleeps on it too.
  return ::syscall(SYS_futex, reinterpret_cast<const std::uint32_t*>(&word), op, value, timeout,
                   nullptr, 0);
}

}  // namespace

void StagingBoard::reset(std::uint64_t stats) noexcept {
  staged.store(0, std::memory_order_relaxed);
  finished.store(0, std::memory_order_relaxed);
  stats_waves.store(0, std::memory_order_relaxed);
  stats_floats.store(stats, std::memory_order_relaxed);
  for (auto& p : published) p.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
}

void StagingBoard::stage(std::uint64_t upto) noexcept {
  staged.store(upto, std::memory_order_release);
  staged_seq.fetch_add(1, std::memory_order_release);
  wake(staged_seq);
}

void StagingBoard::answer(const wire::Result& result) noexcept {
  result_op.store(result.op, std::memory_order_relaxed);
  result_wire_bytes.store(result.wire_bytes, std::memory_order_relaxed);
  result_dense_bytes.store(result.dense_bytes, std::memory_order_relaxed);
  result_world_size.store(result.world_size, std::memory_order_relaxed);
  result_rank.store(result.rank, std::memory_order_relaxed);
  answered.store(result.request, std::memory_order_release);
  published_seq.fetch_add(1, std::memory_order_release);
  wake(published_seq);
}

std::optional<wire::Result> StagingBoard::answer_to(std::uint64_t request) const noexcept {
  if (request == 0 || answered.load(std::memory_order_acquire) != request) return std::nullopt;
  wire::Result result;
  result.request = request;
  result.op = result_op.load(std::memory_order_relaxed);
  result.wire_bytes = result_wire_bytes.load(std::memory_order_relaxed);
  result.dense_bytes = result_dense_bytes.load(std::memory_order_relaxed);
  result.world_size = result_world_size.load(std::memory_order_relaxed);
  result.rank = result_rank.load(std::memory_order_relaxed);
  result.in_shared_buffer = true;
  return result;
}

void StagingBoard::wake(std::atomic<std::uint32_t>& word) noexcept {
  futex(word, FUTEX_WAKE, INT32_MAX, nullptr);
}

void StagingBoard::sleep_while(const std::atomic<std::uint32_t>& word, std::uint32_t seen,
                               std::chrono::microseconds for_at_most) noexcept {
  const auto us = for_at_most.count() < 0 ? 0 : for_at_most.count();
  const timespec timeout{static_cast<std::time_t>(us / 1000000),
                         static_cast<long>(us % 1000000) * 1000};
  futex(word, FUTEX_WAIT, seen, &timeout);  // EAGAIN when word != seen: fine
}

StagingBoard& board_of(const SharedRegion& region) noexcept {
  return *reinterpret_cast<StagingBoard*>(region.data() - kBoardBytes);
}

RegionStaging::RegionStaging(std::vector<std::shared_ptr<SharedRegion>> regions,
                             std::vector<std::string> who, collective::StagingOrder order,
                             std::chrono::milliseconds timeout, std::size_t ring_nodes,
                             std::size_t ring_node)
    : regions_(std::move(regions)),
      who_(std::move(who)),
      order_(order),
      timeout_(timeout),
      streams_(ring_nodes == order.segments() && ring_node == order.node()),
      published_(order.segments(), 0) {}

RegionStaging::~RegionStaging() {
  if (open_) return;
  for (const auto& region : regions_) {
    if (!region) continue;
    StagingBoard& board = board_of(*region);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    board.finished.store(1, std::memory_order_release);
    board.published_seq.fetch_add(1, std::memory_order_release);
    StagingBoard::wake(board.published_seq);
  }
}

void RegionStaging::wait_for(std::size_t l, std::uint64_t position) {
  if (!regions_[l]) return;  // this rank's values came whole
  wait_until(l, board_of(*regions_[l]).staged, position);
}

template <class Counter>
void RegionStaging::wait_until(std::size_t l, const Counter& counter, std::uint64_t target) {
  StagingBoard& board = board_of(*regions_[l]);
  if (counter.load(std::memory_order_acquire) >= target) return;
  // The client copies a piece in well under a millisecond: spin briefly
  // before sleeping.
  for (int i = 0; i < 64; ++i) {
    std::this_thread::yield();
    if (counter.load(std::memory_order_acquire) >= target) return;
  }
  Clock::time_point deadline = Clock::now() + timeout_;
  std::uint64_t last = board.staged.load(std::memory_order_acquire);
  for (;;) {
    const std::uint32_t seen = board.staged_seq.load(std::memory_order_acquire);
    if (counter.load(std::memory_order_acquire) >= target) return;
    const std::uint64_t now_at = board.staged.load(std::memory_order_acquire);
    if (now_at != last) {  // progress: the deadline is one of silence
      last = now_at;
      deadline = Clock::now() + timeout_;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now());
    if (left.count() <= 0)
      throw Error(ErrorCode::timeout, who_[l] + " stopped handing over its values for " +
                                          std::to_string(timeout_.count()) + " ms (" +
                                          std::to_string(now_at) + " of " +
                                          std::to_string(order_.elements()) +
                                          " in place); the process may have died or been stopped");
    StagingBoard::sleep_while(board.staged_seq, seen,
                              std::min(left, std::chrono::microseconds(100000)));
  }
}

// The client's statistics, when it leaves them (as many as asked for, and
// room for them in its buffer) and stages in this ring's order.
const float* RegionStaging::client_stats(std::size_t wave, std::size_t count) {
  if (!streams_ || regions_.empty() || !regions_[0] || count == 0) return nullptr;
  const SharedRegion& region = *regions_[0];
  StagingBoard& board = board_of(region);
  const std::size_t at = stats_area(order_.elements());
  if (board.stats_floats.load(std::memory_order_acquire) != count ||
      (at + count) * sizeof(float) > region.size())
    return nullptr;
  wait_until(0, board.stats_waves, wave + 1);
  return reinterpret_cast<const float*>(region.data()) + at;
}

bool RegionStaging::staged_to(std::uint64_t position) const {
  if (regions_.empty() || !regions_[0]) return true;  // rank 0's values came whole
  return board_of(*regions_[0]).staged.load(std::memory_order_acquire) >= position;
}

// Rank 0's position once segment s is in place up to `upto` (wave w is):
// every value when the ring's segments are not the order's.
std::uint64_t RegionStaging::segment_target(std::size_t segment, std::size_t upto) const {
  return streams_ ? order_.position(segment, upto) : order_.elements();
}

std::uint64_t RegionStaging::wave_target(std::size_t wave) const {
  return streams_ ? order_.wave_end(wave) : order_.elements();
}

void RegionStaging::wait_staged(std::size_t segment, std::size_t upto) {
  wait_for(0, segment_target(segment, upto));
}

bool RegionStaging::staged(std::size_t segment, std::size_t upto) {
  return staged_to(segment_target(segment, upto));
}

void RegionStaging::wait_wave(std::size_t wave) { wait_for(0, wave_target(wave)); }

bool RegionStaging::staged_wave(std::size_t wave) { return staged_to(wave_target(wave)); }

void RegionStaging::wait_all() {
  for (std::size_t l = 0; l < regions_.size(); ++l) wait_for(l, order_.elements());
}

void RegionStaging::publish(std::size_t segment, std::size_t upto) {
  if (streams_) tell(segment, upto);
}

// Segment `segment` of the order is final up to `upto`.
void RegionStaging::tell(std::size_t segment, std::size_t upto) {
  if (regions_.empty() || !regions_[0] || segment >= StagingBoard::kSegments) return;
  StagingBoard& board = board_of(*regions_[0]);
  // Streaming stores wrote the values: order them before the counter.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  board.published[segment].store(upto, std::memory_order_release);
  board.published_seq.fetch_add(1, std::memory_order_release);
  StagingBoard::wake(board.published_seq);
}

}  // namespace zring::transport

namespace zring::transport {

void RegionStaging::publish_prefix(std::size_t end) {
  for (std::size_t s = 0; s < order_.segments(); ++s) {
    const std::size_t begin = order_.begin(s), length = order_.end(s) - begin;
    const std::size_t upto = end <= begin ? 0 : std::min(end - begin, length);
    if (upto <= published_[s]) continue;
    published_[s] = upto;
    tell(s, upto);
  }
}

}  // namespace zring::transport
