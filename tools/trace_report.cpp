#include "trace_report.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <zring/error.hpp>

namespace zring::tools {
namespace {

constexpr int kOpsThread = 1, kIpcThread = 2, kRingThread = 3;

int thread_of(const PhaseSpan& span) {
  return std::string_view(span.track) == "ring" ? kRingThread : kIpcThread;
}

std::string error_text(const wire::TraceRecord& r) {
  return r.error ? to_string(static_cast<ErrorCode>(*r.error)) : "ok";
}

// A JSON string; bytes beyond ASCII are written as the code points of the
// same number, so whatever a daemon sent, the file stays valid JSON.
std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte >= 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", byte);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Nanoseconds as microseconds with three decimals: exact, whatever the size.
std::string microseconds(std::uint64_t ns) {
  char text[32];
  std::snprintf(text, sizeof text, "%llu.%03llu", static_cast<unsigned long long>(ns / 1000),
                static_cast<unsigned long long>(ns % 1000));
  return text;
}

std::string milliseconds(std::uint64_t ns) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", static_cast<double>(ns) / 1e6);
  return text;
}

// Where the file's time 0 is: the earliest submission of any node.
std::uint64_t time_zero(const std::vector<wire::Trace>& nodes) {
  std::uint64_t zero = std::numeric_limits<std::uint64_t>::max();
  for (const wire::Trace& node : nodes)
    for (const wire::TraceRecord& r : node.records)
      for (const std::uint64_t t : {r.first_submitted_ns, r.last_submitted_ns, r.ring_began_ns})
        if (t != 0) zero = std::min(zero, t);
  return zero == std::numeric_limits<std::uint64_t>::max() ? 0 : zero;
}

std::string op_args(const wire::TraceRecord& r) {
  return "{\"op\":" + std::to_string(r.op) + ",\"method\":" + json_string(r.method) +
         ",\"elements\":" + std::to_string(r.elements) +
         ",\"wire_bytes\":" + std::to_string(r.wire_bytes) +
         ",\"dense_bytes\":" + std::to_string(r.dense_bytes) +
         ",\"error\":" + json_string(error_text(r)) + "}";
}

struct Event {
  std::string name;
  const char* category;
  std::size_t pid;
  int tid;
  std::uint64_t begin_ns, end_ns;
};

std::string complete_event(const Event& e, std::uint64_t zero, const std::string& args) {
  const std::uint64_t begin = std::max(e.begin_ns, zero);
  const std::uint64_t end = std::max(e.end_ns, begin);
  return "{\"name\":" + json_string(e.name) + ",\"cat\":\"" + e.category +
         "\",\"ph\":\"X\",\"pid\":" + std::to_string(e.pid) + ",\"tid\":" + std::to_string(e.tid) +
         ",\"ts\":" + microseconds(begin - zero) + ",\"dur\":" + microseconds(end - begin) +
         ",\"args\":" + args + "}";
}

std::string metadata(const char* name, std::size_t pid, int tid, const std::string& args) {
  return std::string("{\"name\":\"") + name + "\",\"ph\":\"M\",\"pid\":" + std::to_string(pid) +
         (tid > 0 ? ",\"tid\":" + std::to_string(tid) : "") + ",\"args\":" + args + "}";
}

// Names and orders a node's process and its three threads.
void add_metadata(std::vector<std::string>& events, const wire::Trace& node, std::size_t pid) {
  events.push_back(metadata("process_name", pid, 0, "{\"name\":" + json_string(node.node) + "}"));
  events.push_back(
      metadata("process_sort_index", pid, 0, "{\"sort_index\":" + std::to_string(pid) + "}"));
  const std::pair<int, const char*> threads[] = {
      {kOpsThread, "ops"}, {kIpcThread, "ipc"}, {kRingThread, "ring"}};
  for (const auto& [tid, name] : threads) {
    events.push_back(metadata("thread_name", pid, tid, std::string("{\"name\":\"") + name + "\"}"));
    events.push_back(
        metadata("thread_sort_index", pid, tid, "{\"sort_index\":" + std::to_string(tid) + "}"));
  }
}

// An op that never reached the ring has no number.
std::string op_number(const wire::TraceRecord& r) {
  return r.ring_began_ns != 0 ? std::to_string(r.op) : "-";
}

std::string op_name(const wire::TraceRecord& r) {
  std::string name = "op " + op_number(r) + " " + r.method;
  if (r.error) name += " (" + error_text(r) + ")";
  return name;
}

// Node, op, method, elements, each phase and the whole op in ms ("-" where
// unknown), wire bytes, result.
std::vector<std::string> table_row(const std::string& node, const wire::TraceRecord& r) {
  std::vector<std::string> row{node, op_number(r), r.method, std::to_string(r.elements)};
  const std::vector<PhaseSpan> spans = phases_of(r);
  for (const char* phase : {"assemble", "queued", "prepare", "summaries", "data", "finish"}) {
    const auto span = std::find_if(spans.begin(), spans.end(), [&](const PhaseSpan& s) {
      return std::string_view(s.name) == phase;
    });
    row.push_back(span == spans.end() ? "-" : milliseconds(span->end_ns - span->begin_ns));
  }
  const bool whole = r.first_submitted_ns != 0 && r.answered_ns >= r.first_submitted_ns;
  row.push_back(whole ? milliseconds(r.answered_ns - r.first_submitted_ns) : "-");
  row.push_back(std::to_string(r.wire_bytes));
  row.push_back(error_text(r));
  return row;
}

}  // namespace

std::vector<PhaseSpan> phases_of(const wire::TraceRecord& r) {
  // A node without a plan has no prepared time: its summaries phase runs
  // from the ring's start.
  const std::uint64_t summaries_from = r.prepared_ns != 0 ? r.prepared_ns : r.ring_began_ns;
  const PhaseSpan all[] = {
      {"assemble", "ipc", r.first_submitted_ns, r.last_submitted_ns},
      {"queued", "ipc", r.last_submitted_ns, r.ring_began_ns},
      {"prepare", "ring", r.ring_began_ns, r.prepared_ns},
      {"summaries", "ring", summaries_from, r.summarized_ns},
      {"data", "ring", r.summarized_ns, r.data_done_ns},
      {"finish", "ipc", r.data_done_ns, r.answered_ns},
  };
  // A daemon's clock never runs back between two of its times; should a
  // file say so anyway, the phase lasts 0.
  std::vector<PhaseSpan> known;
  for (PhaseSpan span : all) {
    if (span.begin_ns == 0 || span.end_ns == 0) continue;
    span.end_ns = std::max(span.end_ns, span.begin_ns);
    known.push_back(span);
  }
  return known;
}

std::string chrome_trace_json(const std::vector<wire::Trace>& nodes) {
  const std::uint64_t zero = time_zero(nodes);
  std::vector<std::string> events;
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    const std::size_t pid = n + 1;
    add_metadata(events, nodes[n], pid);
    for (const wire::TraceRecord& r : nodes[n].records) {
      const std::string args = op_args(r);
      const std::uint64_t end = std::max(r.answered_ns, r.data_done_ns);
      if (r.first_submitted_ns != 0 && end != 0)
        events.push_back(complete_event(
            {op_name(r), "op", pid, kOpsThread, r.first_submitted_ns, end}, zero, args));
      for (const PhaseSpan& span : phases_of(r))
        events.push_back(complete_event(
            {span.name, span.track, pid, thread_of(span), span.begin_ns, span.end_ns}, zero, args));
    }
  }
  std::string out = "{\"traceEvents\":[\n";
  for (std::size_t i = 0; i < events.size(); ++i)
    out += events[i] + (i + 1 < events.size() ? ",\n" : "\n");
  // otherData keeps the wall-clock time of ts 0, which the events are relative to.
  out += "],\"displayTimeUnit\":\"ms\",\"otherData\":{\"source\":\"zringctl trace\"," +
         ("\"time_zero_unix_ns\":\"" + std::to_string(zero) + "\"}}\n");
  return out;
}

std::vector<std::vector<std::string>> trace_table(const std::vector<wire::Trace>& nodes) {
  std::vector<std::vector<std::string>> rows{{"NODE", "OP", "METHOD", "ELEMENTS", "ASSEMBLE",
                                              "QUEUED", "PREPARE", "SUMMARIES", "DATA", "FINISH",
                                              "TOTAL MS", "WIRE BYTES", "RESULT"}};
  for (const wire::Trace& node : nodes)
    for (const wire::TraceRecord& r : node.records) rows.push_back(table_row(node.node, r));
  return rows;
}

}  // namespace zring::tools
