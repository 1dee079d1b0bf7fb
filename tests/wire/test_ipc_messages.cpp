// test_ipc_messages.cpp - IPC messages (client or zringctl <-> zringd):
// every kind round trips, and a hostile one of every kind throws
// malformed_message with the exact error naming the kind and the field.
#include <boost/test/unit_test.hpp>
#include <cstring>
#include <limits>
#include <msgpack.hpp>
#include <zring/error.hpp>

#include "message_samples.hpp"
#include "msgpack_value.hpp"
#include "wire/wire.hpp"
#include "wire_test_util.hpp"

namespace wt = zring::wire_test;
namespace wire = zring::wire;
using wire::IpcKind;
using wt::Bytes;
using wt::Value;
using zring::ErrorCode;

namespace {

const wt::Decoder ipc = [](const std::uint8_t* d, std::size_t n) { (void)wire::decode_ipc(d, n); };

// A valid message of `kind` as a Value, to change one item of: [version,
// type, kind, request, fields...], so the kind's first field is item 4.
Value ipc_value(IpcKind kind) {
  return wt::parse_value(wire::encode_ipc(wt::sample_ipc_message(kind)));
}
// A submit's manifest is item 7, its tensors item 1 of that.
Value& manifest(Value& submit) { return submit[7]; }
Value& submit_tensors(Value& submit) { return submit[7][1]; }

// The whole error text decoding `bytes` throws.
void expect_error(const Bytes& bytes, const std::string& error) {
  const std::string got = wt::expect_malformed(ipc, bytes, error);
  BOOST_TEST(got == error);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(ipc_message)

BOOST_AUTO_TEST_CASE(every_kind_round_trips_as_itself) {
  for (const IpcKind kind : wt::all_ipc_kinds()) {
    BOOST_TEST_CONTEXT("kind " << static_cast<int>(kind)) {
      const wire::IpcMessage m = wt::sample_ipc_message(kind);
      BOOST_TEST((wire::kind_of(m) == kind));
      BOOST_TEST(wire::request_of(m) == ~std::uint64_t{0} - static_cast<std::uint64_t>(kind));
      const Bytes bytes = wire::encode_ipc(m);
      BOOST_TEST((wire::peek_message_type(bytes.data(), bytes.size()) == wire::MessageType::ipc));
      BOOST_TEST(wt::parse_value(bytes)[2].uint == static_cast<std::uint64_t>(kind));
      wt::check_equal(wire::decode_ipc(bytes.data(), bytes.size()), m);
    }
  }
}

BOOST_AUTO_TEST_CASE(layouts_are_pinned) {
  // fixarray of 4: version 10, type 4, kind 6, request 0.
  BOOST_TEST(wire::encode_ipc(wire::Keepalive{}) == (Bytes{0x94, 10, 4, 6, 0}),
             boost::test_tools::per_element());
  // fixarray of 7: 8, 4, kind 1, request 0, local_rank 0, timeout_ms 0, sent_ns 0.
  BOOST_TEST(wire::encode_ipc(wire::Hello{}) == (Bytes{0x97, 10, 4, 1, 0, 0, 0, 0}),
             boost::test_tools::per_element());
  // fixarray of 8: 8, 4, kind 3, request 0, local_rank, timeout_ms, sent_ns,
  // manifest ["", [], kind 1 (all-reduce), root 0].
  const Bytes submit = {0x98, 10, 4, 3, 0, 0, 0, 0, 0x94, 0xa0, 0x90, 1, 0};
  BOOST_TEST(wire::encode_ipc(wire::Submit{}) == submit, boost::test_tools::per_element());
  wt::check_equal(wire::decode_ipc(submit.data(), submit.size()), wire::Submit{});
  // fixarray of 9: 8, 4, kind 9 (submit_shared), request 0, local_rank,
  // timeout_ms, sent_ns, the manifest, buffer 1 (tensors).
  wire::Submit shared;
  shared.values = wire::ValuesIn::shared_buffer;
  shared.buffer = wire::SharedSlot::tensors;
  const Bytes in_tensors = {0x99, 10, 4, 9, 0, 0, 0, 0, 0x94, 0xa0, 0x90, 1, 0, 1};
  BOOST_TEST(wire::encode_ipc(shared) == in_tensors, boost::test_tools::per_element());
  wt::check_equal(wire::decode_ipc(in_tensors.data(), in_tensors.size()), shared);
  // fixarray of 9: 8, 4, kind 8 (attach), request 0, local_rank, timeout_ms,
  // sent_ns, bytes 0, buffer 0 (ops).
  BOOST_TEST(wire::encode_ipc(wire::Attach{}) == (Bytes{0x99, 10, 4, 8, 0, 0, 0, 0, 0, 0}),
             boost::test_tools::per_element());
  // fixarray of 6: 8, 4, kind 5, request 9, error_code 10 (peer_lost), text "".
  const Bytes error = {0x96, 10, 4, 5, 9, 10, 0xa0};
  BOOST_TEST(wire::encode_ipc(wire::ErrorReply{9, ErrorCode::peer_lost, ""}) == error,
             boost::test_tools::per_element());
  BOOST_TEST(static_cast<int>(ErrorCode::peer_lost) == 10);
}

BOOST_AUTO_TEST_CASE(a_hostile_message_of_every_kind) {
  struct Case {
    IpcKind kind;
    std::function<void(Value&)> spoil;
    std::string error;
  };
  const std::vector<Case> cases = {
      {IpcKind::hello, [](Value& m) { m[4] = 1ull << 32; },
       "wire: IPC hello: local_rank: 4294967296 exceeds the limit 4294967295"},
      {IpcKind::welcome, [](Value& m) { m[9] = std::string(257, 'n'); },
       "wire: IPC welcome: node: string of 257 bytes (at most 256)"},
      {IpcKind::submit, [](Value& m) { manifest(m) = "manifest"; },
       "wire: IPC submit: manifest: not an array"},
      {IpcKind::result, [](Value& m) { m[4] = Value::negative_int(-1); },
       "wire: IPC result: op: not an unsigned integer"},
      {IpcKind::error, [](Value& m) { m[4] = wt::kUnknownErrorCode; },
       "wire: IPC error: error_code: " + std::to_string(wt::kUnknownErrorCode) +
           " is not a zring error code (docs/errors.md lists them)"},
      {IpcKind::keepalive, [](Value& m) { m.items.push_back(Value(std::uint64_t{0})); },
       "wire: IPC keepalive: array of 5 items, expected 4"},
      {IpcKind::status_query, [](Value& m) { m[3] = "one"; },
       "wire: IPC status_query: request: not an unsigned integer"},
      {IpcKind::attach, [](Value& m) { m[7] = Value::nil(); },
       "wire: IPC attach: bytes: not an unsigned integer"},
      {IpcKind::submit_shared, [](Value& m) { m[5] = 1ull << 32; },
       "wire: IPC submit_shared: timeout_ms: 4294967296 exceeds the limit 4294967295"},
      {IpcKind::result_shared, [](Value& m) { m.items.pop_back(); },
       "wire: IPC result_shared: array of 8 items, expected 9"},
      {IpcKind::submit_staged, [](Value& m) { m[6] = "now"; },
       "wire: IPC submit_staged: sent_ns: not an unsigned integer"},
      {IpcKind::trace_query, [](Value& m) { m.items.push_back("extra"); },
       "wire: IPC trace_query: array of 5 items, expected 4"},
      {IpcKind::status_report, [](Value& m) { m[4] = 5; },
       "wire: IPC status_report: status: not an array"},
      {IpcKind::attached, [](Value& m) { m[4] = 5; }, "wire: IPC attached: path: not a string"},
      {IpcKind::trace_reply, [](Value& m) { m[4] = std::string(257, 'n'); },
       "wire: IPC trace_reply: node: string of 257 bytes (at most 256)"},
  };
  BOOST_TEST(cases.size() == wt::all_ipc_kinds().size());
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT("kind " << static_cast<int>(c.kind)) {
      Value m = ipc_value(c.kind);
      c.spoil(m);
      expect_error(wt::pack_value(m), c.error);
    }
  }
}

// A shared buffer is one of a rank's two (wire::SharedSlot); a frame
// submission names none.
BOOST_AUTO_TEST_CASE(the_shared_buffer_is_one_of_two) {
  Value attach = ipc_value(IpcKind::attach);
  attach[8] = 2;
  expect_error(wt::pack_value(attach), "wire: IPC attach: buffer: 2 exceeds the limit 1");
  Value shared = ipc_value(IpcKind::submit_shared);
  shared.items.pop_back();
  expect_error(wt::pack_value(shared), "wire: IPC submit_shared: array of 8 items, expected 9");
  Value staged = ipc_value(IpcKind::submit_staged);
  staged[9] = "tensors";
  expect_error(wt::pack_value(staged), "wire: IPC submit_staged: buffer: not an unsigned integer");
  Value frame = ipc_value(IpcKind::submit);
  frame.items.push_back(Value(std::uint64_t{1}));
  expect_error(wt::pack_value(frame), "wire: IPC submit: array of 9 items, expected 8");
}

// A staged submission's block statistics are float32 values, whole ones;
// none at all is a submission that leaves them to zringd.
BOOST_AUTO_TEST_CASE(block_statistics_are_whole_floats) {
  Value m = ipc_value(IpcKind::submit_staged);
  m[8] = Value::binary(std::vector<std::uint8_t>(7, 0));
  expect_error(wt::pack_value(m),
               "wire: IPC submit_staged: block_stats: holds 7 bytes, not whole float32 values");
  m[8] = Value::binary({});
  const auto bytes = wt::pack_value(m);
  const wire::IpcMessage decoded = wire::decode_ipc(bytes.data(), bytes.size());
  BOOST_TEST(std::get<wire::Submit>(decoded).block_stats.empty());
  // A block holding inf or nan has nan statistics (codec.hpp): they cross
  // the wire bit for bit, as any other float (found by fuzz_wire, whose
  // round-trip check compared them as numbers).
  wire::Submit with_nan{9, 1, {}, wire::ValuesIn::staged, {}, {}};
  with_nan.manifest.method = "quant:8";
  with_nan.block_stats = {std::numeric_limits<float>::quiet_NaN(), 2.0f,
                          -std::numeric_limits<float>::infinity(), -0.0f};
  const Bytes encoded = wire::encode_ipc(with_nan);
  const wire::IpcMessage back = wire::decode_ipc(encoded.data(), encoded.size());
  const std::vector<float>& stats = std::get<wire::Submit>(back).block_stats;
  BOOST_TEST_REQUIRE(stats.size() == 4u);
  BOOST_TEST(std::memcmp(stats.data(), with_nan.block_stats.data(), 4 * sizeof(float)) == 0);
}

BOOST_AUTO_TEST_CASE(texts_at_and_beyond_their_limits) {
  wire::ErrorReply long_error{1, ErrorCode::internal, std::string(wire::kMaxIpcTextBytes, '{')};
  Bytes bytes = wire::encode_ipc(long_error);
  wt::check_equal(wire::decode_ipc(bytes.data(), bytes.size()), long_error);
  long_error.text += "}";
  wt::expect_malformed(ipc, wire::encode_ipc(long_error), "65537");

  const wire::Welcome welcome{2, 4, 1, 1, 100, 10, std::string(wire::kMaxNodeNameBytes, 'n')};
  bytes = wire::encode_ipc(welcome);
  wt::check_equal(wire::decode_ipc(bytes.data(), bytes.size()), welcome);
  wire::ErrorReply error{3, ErrorCode::internal, std::string(wire::kMaxIpcTextBytes, 'e')};
  bytes = wire::encode_ipc(error);
  wt::check_equal(wire::decode_ipc(bytes.data(), bytes.size()), error);
}

BOOST_AUTO_TEST_CASE(kinds_out_of_range_and_roots_too_short) {
  for (const std::uint64_t kind : {0ull, 16ull, 99ull}) {
    BOOST_TEST_CONTEXT("kind " << kind) {
      Value m = ipc_value(IpcKind::submit);
      m[2] = kind;
      wt::expect_malformed(ipc, wt::pack_value(m), "wire: IPC message: kind: ");
    }
  }
  expect_error({0x92, 10, 4}, "wire: IPC message: array of 2 items, expected 4..10");
  Value m = ipc_value(IpcKind::keepalive);
  m[2] = "keepalive";
  expect_error(wt::pack_value(m), "wire: IPC message: kind: not an unsigned integer");
}

BOOST_AUTO_TEST_CASE(hostile_manifests) {
  Value m = ipc_value(IpcKind::submit);
  submit_tensors(m)[4][0] = "d.conv";  // a duplicate of tensor 3
  wt::expect_malformed(ipc, wt::pack_value(m), "duplicate");
  m = ipc_value(IpcKind::submit);
  std::swap(submit_tensors(m)[0], submit_tensors(m)[1]);
  wt::expect_malformed(ipc, wt::pack_value(m), "sorted");
  m = ipc_value(IpcKind::submit);
  submit_tensors(m)[5][0] = "";
  wt::expect_malformed(ipc, wt::pack_value(m), "empty tensor name");
  m = ipc_value(IpcKind::submit);
  submit_tensors(m)[3][1] = Value::Array{1ull << 31, 1ull << 31, 1ull << 31, 1ull << 31};
  wt::expect_malformed(ipc, wt::pack_value(m), "overflows");
  m = ipc_value(IpcKind::submit);
  submit_tensors(m)[3][2] = 1729;
  wt::expect_malformed(ipc, wt::pack_value(m), "numel is 1729");
  m = ipc_value(IpcKind::submit);
  m[7] = Value::binary({'h', 'i'});  // a binary where the manifest goes
  wt::expect_malformed(ipc, wt::pack_value(m), "manifest: not an array");

  // What the op is: a kind 1 (all-reduce) or 2 (broadcast), a root only
  // for a broadcast, and under 2^32.
  for (const std::uint64_t kind : {0ull, 3ull, 1ull << 40}) {
    BOOST_TEST_CONTEXT("op kind " << kind) {
      m = ipc_value(IpcKind::submit);
      manifest(m)[2] = kind;
      wt::expect_malformed(ipc, wt::pack_value(m), "IPC submit, manifest: kind");
    }
  }
  m = ipc_value(IpcKind::submit);
  manifest(m)[3] = 2;  // the sample is an all-reduce
  wt::expect_malformed(ipc, wt::pack_value(m), "root 2 in an all-reduce");
  m = ipc_value(IpcKind::submit_shared);  // a broadcast from root 2^32 - 1
  manifest(m)[3] = 1ull << 32;
  wt::expect_malformed(ipc, wt::pack_value(m), "IPC submit_shared, manifest: root");

  // A tensor list claiming 2^32 - 1 entries, refused before it is built.
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> p(buffer);
  p.pack_array(8);
  p.pack_uint32(zring::wire::kWireVersion);
  p.pack_uint32(4);
  p.pack_uint32(3);
  p.pack_uint32(0);
  p.pack_uint32(0);
  p.pack_uint32(0);
  p.pack_uint32(0);
  p.pack_array(4);
  p.pack(std::string("none"));
  p.pack_array(0xFFFFFFFFu);
  const auto* b = reinterpret_cast<const std::uint8_t*>(buffer.data());
  wt::expect_malformed(ipc, Bytes(b, b + buffer.size()), "4294967295");
}

// The status report: item 4 of a status_report; its members are item 24,
// a member's state its item 3.
BOOST_AUTO_TEST_CASE(status_reports_round_trip_and_hostile_ones_are_named) {
  const wire::StatusReport report{5, wt::sample_daemon_status()};
  const Bytes bytes = wire::encode_ipc(report);
  wt::check_equal(wire::decode_ipc(bytes.data(), bytes.size()), report);
  BOOST_TEST(wt::parse_value(bytes)[4].items.size() == 37u);

  Value m = wt::parse_value(bytes);
  m[4][24][1][3] = 7;
  expect_error(wt::pack_value(m),
               "wire: IPC status_report, status, members[1]: state: 7 exceeds the limit 6");
  m = wt::parse_value(bytes);
  m[4][24][0][3] = std::uint64_t{0};
  expect_error(wt::pack_value(m),
               "wire: IPC status_report, status, members[0]: state: 0 is not "
               "a kind (kinds run 1..6)");
  m = wt::parse_value(bytes);
  m[4][7] = 1;  // ring_up
  expect_error(wt::pack_value(m), "wire: IPC status_report, status: ring_up: not a boolean");
  m = wt::parse_value(bytes);
  m[4].items.pop_back();
  expect_error(wt::pack_value(m),
               "wire: IPC status_report: status: array of 36 items, expected 37");
  m = wt::parse_value(bytes);
  m[4][24][2].items.pop_back();
  expect_error(wt::pack_value(m),
               "wire: IPC status_report, status: members[2]: array of 5 items, expected 6");
  m = wt::parse_value(bytes);
  m[4][0] = std::string(wire::kMaxStatusTextBytes + 1, 'n');
  expect_error(wt::pack_value(m),
               "wire: IPC status_report, status: node: string of 4097 bytes (at most 4096)");
  m = wt::parse_value(bytes);
  m[4][24][0][4] = 1;  // data_on_tcp that is no boolean
  expect_error(wt::pack_value(m),
               "wire: IPC status_report, status, members[0]: data_on_tcp: not a boolean");
  m = wt::parse_value(bytes);
  m[4][24][4][5] = 8;  // a mismatch that is no text
  expect_error(wt::pack_value(m),
               "wire: IPC status_report, status, members[4]: mismatch: not a string");
  m = wt::parse_value(bytes);
  m[4][11][1] = 7;  // a ring member that is no name
  expect_error(wt::pack_value(m), "wire: IPC status_report, status: ring_members[1]: not a string");

  // Longer texts are cut by the encoder, never refused by the decoder.
  wire::StatusReport long_report = report;
  long_report.status.last_error = std::string(wire::kMaxStatusTextBytes + 10, 'e');
  const Bytes cut = wire::encode_ipc(long_report);
  const auto decoded = std::get<wire::StatusReport>(wire::decode_ipc(cut.data(), cut.size()));
  BOOST_TEST(decoded.status.last_error == std::string(wire::kMaxStatusTextBytes, 'e'));
}

BOOST_AUTO_TEST_CASE(other_message_types) {
  const Bytes ring = wire::encode_ring_header(wt::sample_ring_header(wire::RingKind::up));
  expect_error(ring, "wire: expected a message of type 4 (IPC message), got type 2 (ring header)");
}

BOOST_AUTO_TEST_SUITE_END()
