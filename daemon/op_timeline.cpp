#include "op_timeline.hpp"

namespace zring::daemon {
namespace {

// steady_clock -> Unix nanoseconds, by the offset between the two clocks
// at one moment: every time converted with it keeps its order and spacing.
class WallClock {
 public:
  WallClock()
      : offset_(std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::system_clock::now().time_since_epoch()) -
                std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::steady_clock::now().time_since_epoch())) {}

  // 0 for an unknown time (and for one that would fall before 1970).
  [[nodiscard]] std::uint64_t unix_ns(OpRecord::Time t) const {
    if (t == OpRecord::Time{}) return 0;
    const auto ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()) + offset_;
    return ns.count() > 0 ? static_cast<std::uint64_t>(ns.count()) : 0;
  }

 private:
  std::chrono::nanoseconds offset_;
};

wire::TraceRecord to_wire(const OpRecord& r, const WallClock& clock) {
  wire::TraceRecord w;
  w.op = r.op;
  w.method = r.method;
  w.tensors = static_cast<std::uint32_t>(r.tensors);
  w.elements = r.elements;
  w.local_ranks = static_cast<std::uint32_t>(r.local_ranks);
  w.nodes = static_cast<std::uint32_t>(r.nodes);
  w.wire_bytes = r.wire_bytes;
  w.dense_bytes = r.elements * sizeof(float);
  if (r.error) w.error = static_cast<std::uint32_t>(*r.error);
  w.first_submitted_ns = clock.unix_ns(r.first_submitted);
  w.last_submitted_ns = clock.unix_ns(r.last_submitted);
  w.ring_began_ns = clock.unix_ns(r.ring_began);
  w.prepared_ns = clock.unix_ns(r.prepared);
  w.summarized_ns = clock.unix_ns(r.summarized);
  w.data_done_ns = clock.unix_ns(r.data_done);
  w.answered_ns = clock.unix_ns(r.answered);
  return w;
}

}  // namespace

void OpTimeline::add(OpRecord record) {
  if (records_.size() < kCapacity) {
    records_.push_back(std::move(record));
    return;
  }
  records_[oldest_] = std::move(record);
  oldest_ = (oldest_ + 1) % kCapacity;
}

wire::Trace OpTimeline::export_trace(const std::string& node) const {
  const WallClock clock;
  wire::Trace trace;
  trace.node = node;
  trace.records.reserve(records_.size());
  for (std::size_t i = 0; i < records_.size(); ++i)
    trace.records.push_back(to_wire(records_[(oldest_ + i) % records_.size()], clock));
  return trace;
}

}  // namespace zring::daemon
