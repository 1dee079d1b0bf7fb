// trace_report.hpp - zringctl trace's output: the timelines of one or more
// zringd (their last ops, phase by phase) as Chrome trace-event JSON, which
// Perfetto and chrome://tracing open, or as a table.
//
// Each op is cut into six phases, one after the other:
//   assemble   the first local rank's submission to the last one's
//   queued     the last submission to the ring thread taking the op
//   prepare    this node's contribution prepared (compressed, statistics)
//   summaries  until every node's summary is known (waits for the slowest)
//   data       moving and summing the data
//   finish     the average complete to every local rank answered
// A failed op has only the phases whose ends are known.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wire/wire.hpp"

namespace zring::tools {

struct PhaseSpan {
  const char* name;   // "assemble", ...
  const char* track;  // "ipc" (the daemon's io thread) or "ring" (its ring thread)
  std::uint64_t begin_ns = 0, end_ns = 0;  // Unix ns
};

// The phases of one op whose begin and end are both known, in order.
[[nodiscard]] std::vector<PhaseSpan> phases_of(const wire::TraceRecord& record);

// {"traceEvents": [...], "displayTimeUnit": "ms", ...}: each node a process
// (named by its node, in the order given) with three threads: "ops" (one
// event per op), "ipc" (assemble, queued, finish) and "ring" (prepare,
// summaries, data). Complete events ("ph": "X"), ts and dur in microseconds
// from the earliest submission of all nodes, each with args op, method,
// elements, wire_bytes, dense_bytes and error ("ok" or the error kind).
[[nodiscard]] std::string chrome_trace_json(const std::vector<wire::Trace>& nodes);

// A heading, then one row per op of every node: node, op, method, elements,
// each phase and the total in ms, wire bytes, result.
[[nodiscard]] std::vector<std::vector<std::string>> trace_table(
    const std::vector<wire::Trace>& nodes);

}  // namespace zring::tools
