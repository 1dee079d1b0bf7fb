// wire_trace.cpp - a zringd's op timeline, as it answers `zringctl trace`
// (layout in wire.hpp).
#include <algorithm>
#include <string>
#include <zring/error.hpp>

#include "wire/msgpack_io.hpp"
#include "wire/wire.hpp"

namespace zring::wire {

using namespace detail;

namespace {

constexpr std::size_t kTraceItems = 2;    // node, records
constexpr std::size_t kRecordItems = 16;  // flat, positional
constexpr std::string_view kTrace = "trace message";
constexpr TreeLimits kTraceTree{
    .message = kTrace,
    .max_depth = 3,  // root, records, record
    .max_array = std::max(kMaxTraceRecords, kRecordItems),
    .max_objects = 2 + kTraceItems + kMaxTraceRecords * (1 + kRecordItems),
    .max_str = std::max(kMaxNodeNameBytes, kMaxMethodBytes),
    .max_bin = 0};

void pack_record(Packer& p, const TraceRecord& r) {
  p.pack_array(kRecordItems);
  p.pack_uint64(r.op);
  pack_text(p, r.method, "a method");
  p.pack_uint32(r.tensors);
  p.pack_uint64(r.elements);
  p.pack_uint32(r.local_ranks);
  p.pack_uint32(r.nodes);
  p.pack_uint64(r.wire_bytes);
  p.pack_uint64(r.dense_bytes);
  if (r.error)
    p.pack_uint32(*r.error);
  else
    p.pack_nil();
  for (const std::uint64_t t : {r.first_submitted_ns, r.last_submitted_ns, r.ring_began_ns,
                                r.prepared_ns, r.summarized_ns, r.data_done_ns, r.answered_ns})
    p.pack_uint64(t);
}

TraceRecord read_record(const msgpack::object& o, std::size_t index) {
  const std::string context = std::string(kTrace) + ", record #" + std::to_string(index);
  const auto f = as_array(o, kRecordItems, kRecordItems, Where{context, ""});
  const auto at = [&](std::string_view field) { return Where{context, field}; };
  TraceRecord r;
  r.op = as_u64(f[0], at("op"));
  r.method = std::string(as_str(f[1], kMaxMethodBytes, at("method")));
  r.tensors = static_cast<std::uint32_t>(as_uint(f[2], kMaxManifestTensors, at("tensors")));
  r.elements = as_u64(f[3], at("elements"));
  r.local_ranks = as_u32(f[4], at("local_ranks"));
  r.nodes = as_u32(f[5], at("nodes"));
  r.wire_bytes = as_u64(f[6], at("wire_bytes"));
  r.dense_bytes = as_u64(f[7], at("dense_bytes"));
  if (f[8].type != msgpack::type::NIL) r.error = as_error_code(f[8], at("error"));
  r.first_submitted_ns = as_u64(f[9], at("first_submitted_ns"));
  r.last_submitted_ns = as_u64(f[10], at("last_submitted_ns"));
  r.ring_began_ns = as_u64(f[11], at("ring_began_ns"));
  r.prepared_ns = as_u64(f[12], at("prepared_ns"));
  r.summarized_ns = as_u64(f[13], at("summarized_ns"));
  r.data_done_ns = as_u64(f[14], at("data_done_ns"));
  r.answered_ns = as_u64(f[15], at("answered_ns"));
  return r;
}

}  // namespace

std::vector<std::uint8_t> encode_trace(const Trace& trace) {
  if (trace.records.size() > kMaxTraceRecords)
    throw Error(ErrorCode::invalid_argument,
                "wire: a trace of " + std::to_string(trace.records.size()) + " records (at most " +
                    std::to_string(kMaxTraceRecords) + ")");
  std::vector<std::uint8_t> out;
  out.reserve(32 + trace.node.size() + trace.records.size() * 96);
  ByteSink sink(out);
  Packer p(sink);
  pack_header(p, MessageType::trace, kTraceItems);
  pack_text(p, trace.node, "a node name");
  p.pack_array(frame_length(trace.records.size(), "a record count"));
  for (const TraceRecord& r : trace.records) pack_record(p, r);
  return out;
}

Trace decode_trace(const std::uint8_t* data, std::size_t size) {
  expect_type(read_header(data, size), MessageType::trace);
  const Tree tree = unpack_tree(data, size, kTraceTree);
  const auto f = body(tree.get(), kTraceItems, kTrace);
  Trace trace;
  trace.node = std::string(as_str(f[0], kMaxNodeNameBytes, Where{kTrace, "node"}));
  const auto records = as_array(f[1], 0, kMaxTraceRecords, Where{kTrace, "records"});
  trace.records.reserve(records.size());
  for (std::size_t i = 0; i < records.size(); ++i)
    trace.records.push_back(read_record(records[i], i));
  return trace;
}

}  // namespace zring::wire
