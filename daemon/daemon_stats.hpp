// daemon_stats.hpp - what `zringctl status`, the metrics endpoint and the
// logs report of a daemon (daemon-internal).
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "ring_worker.hpp"

namespace zring::daemon {

// What `zringctl status`, the metrics endpoint and the logs report. Lives on
// the io thread; daemon/metrics.cpp renders it as JSON and Prometheus text.
struct DaemonStats {
  using Time = std::chrono::system_clock::time_point;
  Time started = std::chrono::system_clock::now();
  std::uint64_t ops_done = 0;
  std::uint64_t ops_failed = 0;
  std::uint64_t ops_rung = 0;  // of ops_done: rung on the bell and started by the ring thread
  std::string last_error;
  Time last_error_at{};
  struct PerMethod {
    std::uint64_t ops = 0;  // succeeded
    std::uint64_t failed = 0;
    std::uint64_t raw_bytes = 0;            // what a dense float32 ring would have sent (and
                                            // received): 2 (N-1) / N of the gradients per op
    std::uint64_t wire_bytes_sent = 0;      // ring frames sent while ops of this method ran
    std::uint64_t wire_bytes_received = 0;  // ring frames received while they ran
  };
  std::map<std::string, PerMethod> methods;     // by method text ("quant:8")
  std::map<std::string, std::uint64_t> errors;  // failed ops by error kind ("timeout")
  // Ring traffic between ops: heartbeats and membership.
  std::uint64_t idle_bytes_sent = 0;
  std::uint64_t idle_bytes_received = 0;
  // Seconds from an op's last local submission to its result, successful ops only.
  struct Durations {
    static constexpr std::array<double, 14> bounds{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                   0.25,  0.5,    1,     2.5,  5,     10,   30};
    std::array<std::uint64_t, bounds.size()> counts{};  // per bucket, not cumulative
    std::uint64_t count = 0;                            // also those above the last bound
    double sum = 0;
  } durations;
  RingState ring;
  Time ring_since = started;                 // when ring.up last changed
  std::optional<std::string> traffic_owner;  // method of the op that ended since the last report

  void op_succeeded(const std::string& method, std::uint64_t gradient_bytes, std::size_t nodes,
                    double seconds) {
    PerMethod& m = methods[method];
    ++m.ops;
    ++ops_done;
    if (nodes > 1) m.raw_bytes += gradient_bytes * 2 * (nodes - 1) / nodes;
    std::size_t b = 0;
    while (b < Durations::bounds.size() && seconds > Durations::bounds[b]) ++b;
    if (b < Durations::bounds.size()) ++durations.counts[b];
    ++durations.count;
    durations.sum += seconds;
    traffic_owner = method;
  }
  void op_failed(const std::string& method, const Status& failure) {
    ++methods[method].failed;
    ++ops_failed;
    ++errors[to_string(failure.code)];
    last_error = failure.text;
    last_error_at = std::chrono::system_clock::now();
    traffic_owner = method;
  }
  // The ring thread reports with every op's answer and after every
  // membership change, and between ops a change of the byte counts alone
  // at most once a second: the bytes counted since the previous report
  // belong to the op that ended in between, if one did (so those between
  // two ops less than a second apart, heartbeats and the later op's early
  // messages, count to the later op).
  void ring_reported(const RingState& state) {
    const transport::RingCounters& now = state.counters;
    const std::uint64_t sent = now.bytes_sent - std::min(now.bytes_sent, ring.counters.bytes_sent);
    const std::uint64_t received =
        now.bytes_received - std::min(now.bytes_received, ring.counters.bytes_received);
    if (traffic_owner) {
      methods[*traffic_owner].wire_bytes_sent += sent;
      methods[*traffic_owner].wire_bytes_received += received;
    } else {
      idle_bytes_sent += sent;
      idle_bytes_received += received;
    }
    traffic_owner.reset();
    if (state.up != ring.up) ring_since = std::chrono::system_clock::now();
    ring = state;
  }
};

}  // namespace zring::daemon
