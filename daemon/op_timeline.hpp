// op_timeline.hpp - where the time of zringd's last ops went, for `zringctl
// trace` (daemon-internal).
//
// The IPC server adds one record per op it answers (failed ones too) and
// keeps the last kCapacity of them, overwriting the oldest; all on the io
// thread, so there are no locks. Times are kept on steady_clock, which the
// ring thread's times are also taken on; export turns them into wall-clock
// nanoseconds with one offset taken then, so they stay in order.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include <zring/error.hpp>

#include "wire/wire.hpp"

namespace zring::daemon {

struct OpRecord {
  using Time = std::chrono::steady_clock::time_point;  // Time{}: unknown

  std::uint64_t op = 0;  // the ring's op number (once ring_began is known)
  std::string method;
  std::size_t tensors = 0;
  std::uint64_t elements = 0;
  std::size_t local_ranks = 0;  // whose submissions made the op
  std::size_t nodes = 0;
  std::uint64_t wire_bytes = 0;    // what this node put on the ring
  std::optional<ErrorCode> error;  // why it failed
  Time first_submitted;            // the first local rank's submission arrived
  Time last_submitted;             // the last one's: the op went to the ring thread
  Time ring_began, prepared, summarized, data_done;  // on the ring thread
  Time answered;                                     // every local rank was answered
};

class OpTimeline {
 public:
  static constexpr std::size_t kCapacity = 4096;

  void add(OpRecord record);
  [[nodiscard]] std::size_t size() const noexcept { return records_.size(); }
  // The records, oldest first, in wire form with wall-clock times.
  [[nodiscard]] wire::Trace export_trace(const std::string& node) const;

 private:
  std::vector<OpRecord> records_;  // a ring buffer once full
  std::size_t oldest_ = 0;         // where the oldest record is, once full
};

}  // namespace zring::daemon
