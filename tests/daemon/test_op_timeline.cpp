// test_op_timeline.cpp - the daemon's op timeline keeps the last 4096 ops,
// oldest first, and exports their times as wall-clock nanoseconds that
// keep their order and spacing, unknown ones as 0.
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdlib>

#include "op_timeline.hpp"

using zring::daemon::OpRecord;
using zring::daemon::OpTimeline;
using namespace std::chrono_literals;

namespace {

OpRecord record(std::uint64_t op, OpRecord::Time at) {
  OpRecord r;
  r.op = op;
  r.method = "quant:8";
  r.tensors = 2;
  r.elements = 1000;
  r.local_ranks = 1;
  r.nodes = 2;
  r.wire_bytes = 777;
  r.first_submitted = at;
  r.last_submitted = at + 1us;
  r.ring_began = at + 2us;
  r.prepared = at + 3us;
  r.summarized = at + 5us;
  r.data_done = at + 8us;
  r.answered = at + 13us;
  return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(op_timeline)

BOOST_AUTO_TEST_CASE(keeps_the_last_4096_ops_oldest_first) {
  OpTimeline timeline;
  const auto now = std::chrono::steady_clock::now();
  for (std::uint64_t op = 1; op <= OpTimeline::kCapacity + 10; ++op) timeline.add(record(op, now));
  BOOST_TEST(timeline.size() == OpTimeline::kCapacity);
  const zring::wire::Trace trace = timeline.export_trace("b");
  BOOST_TEST(trace.node == "b");
  BOOST_TEST_REQUIRE(trace.records.size() == OpTimeline::kCapacity);
  for (std::size_t i = 0; i < trace.records.size(); ++i)
    BOOST_TEST_REQUIRE(trace.records[i].op == i + 11, "record " << i);
}

BOOST_AUTO_TEST_CASE(exports_wall_clock_times_in_order_with_their_spacing) {
  OpTimeline timeline;
  const auto now = std::chrono::steady_clock::now();
  timeline.add(record(7, now));
  const zring::wire::TraceRecord r = timeline.export_trace("a").records.at(0);
  BOOST_TEST(r.op == 7u);
  BOOST_TEST(r.method == "quant:8");
  BOOST_TEST(r.dense_bytes == 4000u);
  BOOST_TEST(r.wire_bytes == 777u);
  BOOST_TEST(!r.error.has_value());
  // Within a minute of the wall clock now: taken with an offset, not raw steady_clock.
  const auto wall = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  BOOST_TEST(std::llabs(static_cast<long long>(r.first_submitted_ns) - wall) < 60'000'000'000ll);
  BOOST_TEST(r.last_submitted_ns - r.first_submitted_ns == 1000u);
  BOOST_TEST(r.ring_began_ns - r.first_submitted_ns == 2000u);
  BOOST_TEST(r.prepared_ns - r.first_submitted_ns == 3000u);
  BOOST_TEST(r.summarized_ns - r.first_submitted_ns == 5000u);
  BOOST_TEST(r.data_done_ns - r.first_submitted_ns == 8000u);
  BOOST_TEST(r.answered_ns - r.first_submitted_ns == 13000u);
}

BOOST_AUTO_TEST_CASE(a_failed_op_keeps_its_error_and_exports_unknown_times_as_zero) {
  OpTimeline timeline;
  OpRecord r = record(0, std::chrono::steady_clock::now());
  r.error = zring::ErrorCode::invalid_argument;  // code 0, still a failure
  r.ring_began = r.prepared = r.summarized = r.data_done = {};
  timeline.add(r);
  const zring::wire::TraceRecord w = timeline.export_trace("a").records.at(0);
  BOOST_TEST_REQUIRE(w.error.has_value());
  BOOST_TEST(*w.error == 0u);
  BOOST_TEST(w.first_submitted_ns != 0u);
  BOOST_TEST(w.answered_ns != 0u);
  BOOST_TEST(w.ring_began_ns == 0u);
  BOOST_TEST(w.prepared_ns == 0u);
  BOOST_TEST(w.summarized_ns == 0u);
  BOOST_TEST(w.data_done_ns == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
