// test_trace_messages.cpp - the trace message (zringd -> zringctl trace):
// round trips, its layout, its bounds, and hostile or cut ones refused with
// malformed_message naming the message and the field.
#include <boost/test/unit_test.hpp>
#include <msgpack.hpp>
#include <zring/error.hpp>

#include "message_samples.hpp"
#include "msgpack_value.hpp"
#include "wire/wire.hpp"
#include "wire_test_util.hpp"

namespace wt = zring::wire_test;
namespace wire = zring::wire;
using wt::Bytes;
using wt::Value;
using zring::ErrorCode;

namespace {

const wt::Decoder trace = [](const std::uint8_t* d, std::size_t n) {
  (void)wire::decode_trace(d, n);
};

// The sample as a Value: [1, 5, node, [record...]]; records[i][f] is field f.
Value trace_value() { return wt::parse_value(wire::encode_trace(wt::sample_trace())); }
Value& record(Value& message, std::size_t i) { return message[3][i]; }

// [1, 5, "n", <array header claiming `records` items>] and nothing after it.
Bytes claiming_records(std::uint32_t records) {
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> p(buffer);
  p.pack_array(4);
  p.pack_uint32(zring::wire::kWireVersion);
  p.pack_uint32(5);
  p.pack(std::string("n"));
  p.pack_array(records);
  const auto* b = reinterpret_cast<const std::uint8_t*>(buffer.data());
  return Bytes(b, b + buffer.size());
}

}  // namespace

BOOST_AUTO_TEST_SUITE(trace_message)

BOOST_AUTO_TEST_CASE(round_trips_ok_failed_and_never_run_records) {
  const wire::Trace t = wt::sample_trace();
  BOOST_TEST_REQUIRE(t.records.size() == 3u);
  const Bytes bytes = wire::encode_trace(t);
  BOOST_TEST((wire::peek_message_type(bytes.data(), bytes.size()) == wire::MessageType::trace));
  const wire::Trace back = wire::decode_trace(bytes.data(), bytes.size());
  wt::check_equal(back, t);
  BOOST_TEST(!back.records[0].error.has_value());
  BOOST_TEST_REQUIRE(back.records[1].error.has_value());
  BOOST_TEST(*back.records[1].error == 0u, "invalid_argument (0) is a failure, not success");
}

BOOST_AUTO_TEST_CASE(empty_trace_layout_is_pinned) {
  const Bytes bytes = wire::encode_trace({});
  const Bytes want = {0x94, 10, 5, 0xa0, 0x90};  // [10, 5, "", []]
  BOOST_TEST(bytes == want, boost::test_tools::per_element());
  wt::check_equal(wire::decode_trace(bytes.data(), bytes.size()), wire::Trace{});

  wire::Trace one;
  one.records.emplace_back();
  const Bytes record = wire::encode_trace(one);
  // [1, 5, "", [[op 0, method "", 0 x 6, error nil, 7 times 0]]]
  Bytes with = {0x94, 10, 5, 0xa0, 0x91, 0xdc, 0, 16, 0, 0xa0, 0, 0, 0, 0, 0, 0, 0xc0};
  with.insert(with.end(), 7, 0);
  BOOST_TEST(record == with, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(names_and_record_counts_at_and_beyond_their_limits) {
  wire::Trace t = wt::sample_trace();
  t.node = std::string(wire::kMaxNodeNameBytes, 'n');
  t.records[0].method = std::string(wire::kMaxMethodBytes, 'm');
  wt::check_equal(wire::decode_trace(wire::encode_trace(t).data(), wire::encode_trace(t).size()),
                  t);

  t.node += "n";
  wt::expect_malformed(trace, wire::encode_trace(t), "trace message: a string of 257 bytes");
  t.node = "a";
  t.records[0].method += "m";
  wt::expect_malformed(trace, wire::encode_trace(t), "trace message, record #0: method");

  wire::Trace full;
  full.records.resize(wire::kMaxTraceRecords);
  const Bytes most = wire::encode_trace(full);
  BOOST_TEST(wire::decode_trace(most.data(), most.size()).records.size() == wire::kMaxTraceRecords);
  full.records.emplace_back();
  std::string message;
  BOOST_TEST((wt::code_of([&] { (void)wire::encode_trace(full); }, &message) ==
              ErrorCode::invalid_argument));
  BOOST_TEST(message.find("65537 records") != std::string::npos, message);
}

BOOST_AUTO_TEST_CASE(a_claimed_record_count_beyond_the_bound_is_refused_before_it_is_built) {
  wt::expect_malformed(trace, claiming_records(65537),
                       "trace message: an array claims 65537 items");
  wt::expect_malformed(trace, claiming_records(0xFFFFFFFFu), "4294967295");
  wt::expect_malformed(trace, claiming_records(3), "trace message: truncated");
}

BOOST_AUTO_TEST_CASE(fields_out_of_range_or_of_another_type) {
  Value m = trace_value();
  record(m, 0)[8] = wt::kUnknownErrorCode;
  wt::expect_malformed(
      trace, wt::pack_value(m),
      "record #0: error: " + std::to_string(wt::kUnknownErrorCode) + " is not a zring error code");
  m = trace_value();
  record(m, 1)[8] = "timeout";
  wt::expect_malformed(trace, wt::pack_value(m), "record #1: error: not an unsigned integer");
  m = trace_value();
  record(m, 2)[2] = wire::kMaxManifestTensors + 1;
  wt::expect_malformed(trace, wt::pack_value(m), "record #2: tensors: 65537 exceeds");
  for (const std::size_t field : {4u, 5u}) {  // local_ranks, nodes
    BOOST_TEST_CONTEXT("field " << field) {
      m = trace_value();
      record(m, 0)[field] = 1ull << 32;
      wt::expect_malformed(trace, wt::pack_value(m), "exceeds");
    }
  }
  m = trace_value();
  record(m, 0)[12] = Value::negative_int(-1);
  wt::expect_malformed(trace, wt::pack_value(m), "prepared_ns: not an unsigned integer");
  m = trace_value();
  record(m, 0)[1] = Value::binary({'n'});
  wt::expect_malformed(trace, wt::pack_value(m), "trace message: a binary");
  m = trace_value();
  record(m, 0).items.pop_back();
  wt::expect_malformed(trace, wt::pack_value(m), "record #0: array of 15 items, expected 16");
  m = trace_value();
  m[3] = "records";
  wt::expect_malformed(trace, wt::pack_value(m), "trace message: records: not an array");
  m = trace_value();
  m[2] = 7;
  wt::expect_malformed(trace, wt::pack_value(m), "trace message: node: not a string");
  m = trace_value();
  m.items.push_back(std::uint64_t{0});
  wt::expect_malformed(trace, wt::pack_value(m), "expected 4");
}

BOOST_AUTO_TEST_CASE(garbage_and_cut_frames_are_refused_naming_the_message) {
  const Bytes whole = wire::encode_trace(wt::sample_trace());
  // Cut inside the records: the tree scan finds an object running past the end.
  const Bytes cut(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(whole.size() - 5));
  wt::expect_malformed(trace, cut, "trace message: truncated");
  Bytes trailing = whole;
  trailing.push_back(0xc0);
  wt::expect_malformed(trace, trailing, "trace message: 1 trailing bytes");
  wt::expect_malformed(trace, Bytes{0x94, 10, 5, 0xc1}, "trace message: not msgpack");
  wt::expect_malformed(trace, Bytes{0x94, 10, 5, 0x80}, "trace message: unexpected msgpack map");
  wt::expect_malformed(trace, Bytes{'{', '"', 't', 'r', 'a', 'c', 'e', '"', '}'}, "");
  wt::expect_malformed(trace, Bytes{}, "empty message");
}

BOOST_AUTO_TEST_CASE(other_message_types_are_not_traces) {
  const Bytes ipc = wire::encode_ipc(wt::sample_ipc_message(wire::IpcKind::trace_query));
  wt::expect_malformed(trace, ipc,
                       "expected a message of type 5 (trace), got type 4 (IPC message)");
  const Bytes t = wire::encode_trace(wt::sample_trace());
  const wt::Decoder ipc_decoder = [](const std::uint8_t* d, std::size_t n) {
    (void)wire::decode_ipc(d, n);
  };
  wt::expect_malformed(ipc_decoder, t, "got type 5 (trace)");
}

BOOST_AUTO_TEST_SUITE_END()
