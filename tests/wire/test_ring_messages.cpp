// test_ring_messages.cpp - what zringd nodes send each other: ring headers,
// node summaries and payload lists round trip byte-exactly, and hostile
// versions of them throw zring::Error(malformed_message) naming the field.
#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <limits>
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
using zring::wire::NodeSummary;
using zring::wire::Phase;

namespace {

const wt::Decoder ring = [](const std::uint8_t* d, std::size_t n) {
  (void)wire::decode_ring_header(d, n);
};
const wt::Decoder summary = [](const std::uint8_t* d, std::size_t n) {
  (void)wire::decode_summary(d, n);
};

constexpr std::uint64_t kTooLargeErrorCode = wt::kUnknownErrorCode;

// A valid message as a Value, to change one field of. Body fields start at 2.
Value ring_value() {
  return wt::parse_value(wire::encode_ring_header(wt::sample_ring_header(wire::RingKind::data)));
}
Value summary_value() { return wt::parse_value(wire::encode_summary(wt::sample_summary())); }

// The manifest of a summary Value: [method, [[name, shape, numel]...], kind, root].
Value& tensors(Value& message) { return message[2][1]; }

// [version, type, ...] whose first body item is an array claiming `items` items,
// followed by nothing: the claim must be refused before anything is built.
Bytes claiming_array(std::uint32_t type, std::uint32_t root_items, std::uint32_t items) {
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> p(buffer);
  p.pack_array(root_items);
  p.pack_uint32(zring::wire::kWireVersion);
  p.pack_uint32(type);
  p.pack_array(items);
  const auto* b = reinterpret_cast<const std::uint8_t*>(buffer.data());
  return Bytes(b, b + buffer.size());
}

}  // namespace

BOOST_AUTO_TEST_SUITE(ring_header)

BOOST_AUTO_TEST_CASE(every_kind_round_trips) {
  for (const wire::RingKind kind : wt::all_ring_kinds()) {
    BOOST_TEST_CONTEXT("kind " << static_cast<int>(kind)) {
      const wire::RingHeader h = wt::sample_ring_header(kind);
      const Bytes bytes = wire::encode_ring_header(h);
      BOOST_TEST((wire::peek_message_type(bytes.data(), bytes.size()) == wire::MessageType::ring));
      wt::check_equal(wire::decode_ring_header(bytes.data(), bytes.size()), h);
      BOOST_TEST(wt::pack_value(wt::parse_value(bytes)) == bytes);  // the helper is faithful
    }
  }
}

BOOST_AUTO_TEST_CASE(every_phase_of_a_data_message_round_trips) {
  for (const Phase phase : {Phase::manifest, Phase::reduce, Phase::gather, Phase::blobs,
                            Phase::broadcast, Phase::to_owner, Phase::from_owner, Phase::stats}) {
    wire::RingHeader h = wt::sample_ring_header(wire::RingKind::data);
    h.tag.phase = phase;
    const Bytes bytes = wire::encode_ring_header(h);
    wt::check_equal(wire::decode_ring_header(bytes.data(), bytes.size()), h);
  }
}

BOOST_AUTO_TEST_CASE(layout_is_pinned) {
  wire::RingHeader h;
  h.kind = wire::RingKind::data;
  h.generation = 3;
  h.op = 4;
  h.sender = 1;
  h.tag = {Phase::reduce, 5, 6, 7};
  h.text = "x";
  h.data_port = 300;
  h.settings = {0x1234, 2, 3, 1 << 20, 0, 5};
  // array 16 of 21: version 10, type 2, kind, generation, op, sender, phase,
  // segment, chunk, hop, origin, error_code, text, members (bin 8 of 0
  // bytes), data_port (uint16 300), settings: nodes (uint16 0x1234),
  // local_ranks, min_nodes, chunk_bytes (uint32 2^20), gather_bytes,
  // direct_bytes.
  const Bytes want = {0xdc, 0, 21, 10,   2,   1,    3, 4,    1,    2,    5,    6,
                      7,    0, 0,  0xa1, 'x', 0xc4, 0, 0xcd, 0x01, 0x2c, 0xcd, 0x12,
                      0x34, 2, 3,  0xce, 0,   0x10, 0, 0,    0,    5};
  BOOST_TEST(wire::encode_ring_header(h) == want, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(members_travel_as_a_bitmap) {
  wire::RingHeader h;
  h.kind = wire::RingKind::form;
  h.members = {0, 9, 10};
  const Bytes bytes = wire::encode_ring_header(h);
  // bits 0; 9 and 10; data_port 0, six settings 0
  const Bytes tail = {0xc4, 2, 0x01, 0x06, 0, 0, 0, 0, 0, 0, 0};
  BOOST_TEST(Bytes(bytes.end() - 11, bytes.end()) == tail, boost::test_tools::per_element());
  BOOST_TEST(wire::decode_ring_header(bytes.data(), bytes.size()).members == h.members,
             boost::test_tools::per_element());
  h.members = {static_cast<std::uint32_t>(wire::kMaxRingNodes)};
  BOOST_TEST(
      (wt::code_of([&] { (void)wire::encode_ring_header(h); }) == ErrorCode::invalid_argument));
}

BOOST_AUTO_TEST_CASE(long_texts_are_cut_at_a_character_boundary) {
  wire::RingHeader h = wt::sample_ring_header(wire::RingKind::abort);
  h.text = std::string(wire::kMaxRingTextBytes + 500, 'x');
  Bytes bytes = wire::encode_ring_header(h);
  BOOST_TEST(wire::decode_ring_header(bytes.data(), bytes.size()).text ==
             std::string(wire::kMaxRingTextBytes, 'x'));
  // A two-byte character across the limit goes whole.
  h.text = std::string(wire::kMaxRingTextBytes - 1, 'x') + "\xc3\xa9";
  bytes = wire::encode_ring_header(h);
  BOOST_TEST(wire::decode_ring_header(bytes.data(), bytes.size()).text ==
             std::string(wire::kMaxRingTextBytes - 1, 'x'));
}

BOOST_AUTO_TEST_CASE(kinds_out_of_range) {
  for (const std::uint64_t kind : {0ull, 9ull, 99ull, 1ull << 40}) {
    BOOST_TEST_CONTEXT("kind " << kind) {
      Value m = ring_value();
      m[2] = kind;
      wt::expect_malformed(ring, wt::pack_value(m), "kind");
    }
  }
}

BOOST_AUTO_TEST_CASE(phases) {
  Value m = ring_value();
  m[6] = std::uint64_t{0};  // a data message without a phase
  wt::expect_malformed(ring, wt::pack_value(m), "phase");
  m[2] = static_cast<std::uint64_t>(wire::RingKind::heartbeat);  // control: no phase is fine
  const Bytes heartbeat = wt::pack_value(m);
  BOOST_TEST(static_cast<int>(
                 wire::decode_ring_header(heartbeat.data(), heartbeat.size()).tag.phase) == 0);
  m[6] = 8;  // the last phase (stats) is fine
  const Bytes stats = wt::pack_value(m);
  BOOST_TEST(static_cast<int>(wire::decode_ring_header(stats.data(), stats.size()).tag.phase) ==
             static_cast<int>(Phase::stats));
  m[6] = 9;  // one past it
  wt::expect_malformed(ring, wt::pack_value(m), "phase");
}

BOOST_AUTO_TEST_CASE(fields_out_of_range_or_of_another_type) {
  Value m = ring_value();
  m[11] = kTooLargeErrorCode;
  wt::expect_malformed(
      ring, wt::pack_value(m),
      "error_code: " + std::to_string(kTooLargeErrorCode) + " is not a zring error code");
  for (std::size_t field = 5; field <= 10; ++field) {  // sender .. origin: u32
    if (field == 6) continue;                          // (phase, above)
    BOOST_TEST_CONTEXT("field " << field) {
      m = ring_value();
      m[field] = 1ull << 32;
      wt::expect_malformed(ring, wt::pack_value(m), "exceeds");
    }
  }
  m = ring_value();
  m[3] = "3";
  wt::expect_malformed(ring, wt::pack_value(m), "generation: not an unsigned integer");
  m = ring_value();
  m[4] = Value::negative_int(-4);
  wt::expect_malformed(ring, wt::pack_value(m), "op: not an unsigned integer");
  m = ring_value();
  m[12] = 7;
  wt::expect_malformed(ring, wt::pack_value(m), "text: not a string");
  for (const std::size_t field : {16, 17}) {  // local_ranks, min_nodes: u32
    m = ring_value();
    m[field] = 1ull << 32;
    wt::expect_malformed(ring, wt::pack_value(m), field == 16 ? "local_ranks" : "min_nodes");
  }
  m = ring_value();
  m[15] = "ring";
  wt::expect_malformed(ring, wt::pack_value(m), "nodes: not an unsigned integer");
  m = ring_value();
  m[20] = Value::negative_int(-1);
  wt::expect_malformed(ring, wt::pack_value(m), "direct_bytes: not an unsigned integer");
}

// What a node logs and reports of a node whose ring file differs: every
// key that differs, theirs first.
BOOST_AUTO_TEST_CASE(settings_differences_name_every_key_that_differs) {
  const wire::RingSettings here{7, 1, 3, 1 << 20, 196608, 524288};
  BOOST_TEST(wire::settings_difference(here, here) == "");
  wire::RingSettings there = here;
  there.local_ranks = 2;
  BOOST_TEST(wire::settings_difference(here, there) == "local_ranks 2 there, 1 here");
  there.nodes = 8;
  there.direct_bytes = 0;
  BOOST_TEST(wire::settings_difference(here, there) ==
             "another node list (names or addresses); local_ranks 2 there, 1 here; "
             "direct_bytes 0 there, 524288 here");
  there = here;
  there.min_nodes = 2;
  there.chunk_bytes = 65536;
  there.gather_bytes = 0;
  BOOST_TEST(wire::settings_difference(here, there) ==
             "min_nodes 2 there, 3 here; chunk_bytes 65536 there, 1048576 here; gather_bytes 0 "
             "there, 196608 here");
}

BOOST_AUTO_TEST_CASE(bounds_of_the_tree) {
  Value m = ring_value();
  m[12] = std::string(wire::kMaxRingTextBytes + 1, 'x');
  wt::expect_malformed(ring, wt::pack_value(m), "4097");
  m = ring_value();
  m[12] = Value::binary({1, 2});  // the text is a string
  wt::expect_malformed(ring, wt::pack_value(m), "text: not a string");
  m = ring_value();
  m[13] = Value::binary(Bytes(wire::kMaxRingNodes / 8 + 1, 1));  // more nodes than a ring has
  wt::expect_malformed(ring, wt::pack_value(m), std::to_string(wire::kMaxRingNodes / 8 + 1));
  m = ring_value();
  m[13] = Value::binary({1, 0});  // one way to write each set of members
  wt::expect_malformed(ring, wt::pack_value(m), "members: a trailing zero byte");
  m = ring_value();
  m[3] = Value::Array{};  // nothing nests in a ring header
  wt::expect_malformed(ring, wt::pack_value(m), "nested");
  m = ring_value();
  m.items.pop_back();
  wt::expect_malformed(ring, wt::pack_value(m), "expected 21");
  m = ring_value();
  m.items.push_back(1);
  wt::expect_malformed(ring, wt::pack_value(m), "at most 21");
  m = ring_value();
  m[14] = 65536;  // a TCP port is 16 bits
  wt::expect_malformed(ring, wt::pack_value(m), "data_port");
  wt::expect_malformed(ring, claiming_array(2, 0xFFFFFFFFu, 0), "4294967295");
  Bytes trailing = wt::pack_value(ring_value());
  trailing.push_back(0xc0);
  wt::expect_malformed(ring, trailing, "trailing");
  wt::expect_malformed(ring, Bytes{0x93, 10, 2, 0x80}, "map");  // [10, 2, {}]
}

BOOST_AUTO_TEST_CASE(other_message_types) {
  const Bytes s = wire::encode_summary(wt::sample_summary());
  wt::expect_malformed(ring, s, "expected a message of type 2 (ring header), got type 3");
  wt::expect_malformed(ring, wire::encode_gradients({}), "got type 1 (gradients)");
  wt::expect_malformed(ring, Bytes{0x92, 10, 6}, "unknown message type 6");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(summary_message)

BOOST_AUTO_TEST_CASE(round_trips_with_stats_nonfinite_and_error) {
  const NodeSummary s = wt::sample_summary();
  const Bytes bytes = wire::encode_summary(s);
  BOOST_TEST((wire::peek_message_type(bytes.data(), bytes.size()) == wire::MessageType::summary));
  wt::check_equal(wire::decode_summary(bytes.data(), bytes.size()), s);
}

BOOST_AUTO_TEST_CASE(empty_summary_round_trips) {
  const NodeSummary s;
  const Bytes bytes = wire::encode_summary(s);
  // fixarray of 8: 7, 3, [method "", [], kind 1, root 0], error "", code 0,
  // bin 0, bin 0, 0.
  const Bytes want = {0x98, 10, 3, 0x94, 0xa0, 0x90, 1, 0, 0xa0, 0, 0xc4, 0, 0xc4, 0, 0};
  BOOST_TEST(bytes == want, boost::test_tools::per_element());
  wt::check_equal(wire::decode_summary(bytes.data(), bytes.size()), s);
}

BOOST_AUTO_TEST_CASE(long_error_is_cut) {
  NodeSummary s = wt::sample_summary();
  s.failure =
      zring::Status{zring::ErrorCode::size_mismatch, std::string(3 * wire::kMaxRingTextBytes, 'e')};
  const Bytes bytes = wire::encode_summary(s);
  const NodeSummary back = wire::decode_summary(bytes.data(), bytes.size());
  BOOST_TEST_REQUIRE(back.failure.has_value());
  BOOST_TEST(back.failure->text.size() == wire::kMaxRingTextBytes);
  BOOST_TEST((back.failure->code == zring::ErrorCode::size_mismatch));
}

// A failure that gives no reason still fails the op on every node: it
// travels as one that says so.
BOOST_AUTO_TEST_CASE(a_failure_without_words_still_travels_as_a_failure) {
  NodeSummary s = wt::sample_summary();
  s.failure = zring::Status{zring::ErrorCode::timeout, ""};
  const Bytes bytes = wire::encode_summary(s);
  const NodeSummary back = wire::decode_summary(bytes.data(), bytes.size());
  BOOST_TEST_REQUIRE(back.failure.has_value());
  BOOST_TEST(back.failure->text == "(no reason given)");
  BOOST_TEST((back.failure->code == zring::ErrorCode::timeout));
  s.failure.reset();
  const Bytes fine = wire::encode_summary(s);
  BOOST_TEST(!wire::decode_summary(fine.data(), fine.size()).failure.has_value());
}

BOOST_AUTO_TEST_CASE(manifests_at_the_limits_decode) {
  NodeSummary s;
  s.manifest.method = std::string(wire::kMaxMethodBytes, 'm');
  for (std::size_t i = 0; i < wire::kMaxManifestTensors; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "t%06zu", i);
    s.manifest.tensors.push_back({name, {1, 1, 1, 1, 1, 1, 1, 3}, 3});
  }
  s.manifest.tensors.back().name += std::string(wire::kMaxManifestNameBytes - 7, 'z');
  const Bytes bytes = wire::encode_summary(s);
  wt::check_equal(wire::decode_summary(bytes.data(), bytes.size()), s);

  s.manifest.tensors.push_back({"u", {1}, 1});  // one tensor too many
  wt::expect_malformed(summary, wire::encode_summary(s), "65537");
}

BOOST_AUTO_TEST_CASE(a_broadcast_manifest_round_trips_and_its_op_is_checked) {
  NodeSummary s = wt::sample_summary();
  s.manifest.kind = wire::OpKind::broadcast;
  s.manifest.root = 5;
  const Bytes bytes = wire::encode_summary(s);
  const NodeSummary got = wire::decode_summary(bytes.data(), bytes.size());
  wt::check_equal(got, s);
  BOOST_TEST((got.manifest.kind == wire::OpKind::broadcast));
  BOOST_TEST(got.manifest.root == 5u);

  Value m = wt::parse_value(bytes);
  m[2][2] = 3;  // no third kind of op
  wt::expect_malformed(summary, wt::pack_value(m), "summary message, manifest: kind");
  m[2][2] = 1;  // an all-reduce with a root
  wt::expect_malformed(summary, wt::pack_value(m), "root 5 in an all-reduce");
}

BOOST_AUTO_TEST_CASE(arrays_claiming_2_pow_32_items) {
  wt::expect_malformed(summary, claiming_array(3, 0xFFFFFFFFu, 0), "4294967295");
  // [1, 3, [method, array32 of 2^32 - 1 tensors]]
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> p(buffer);
  p.pack_array(8);
  p.pack_uint32(zring::wire::kWireVersion);
  p.pack_uint32(3);
  p.pack_array(4);
  p.pack(std::string("none"));
  p.pack_array(0xFFFFFFFFu);
  const auto* b = reinterpret_cast<const std::uint8_t*>(buffer.data());
  wt::expect_malformed(summary, Bytes(b, b + buffer.size()), "4294967295");
}

BOOST_AUTO_TEST_CASE(manifest_names) {
  Value m = summary_value();
  tensors(m)[1][0] = "a.scalar";  // a duplicate of tensor 0
  wt::expect_malformed(summary, wt::pack_value(m), "duplicate");
  m = summary_value();
  tensors(m)[2][0] = "a";  // before "b.empty"
  wt::expect_malformed(summary, wt::pack_value(m), "sorted");
  m = summary_value();
  tensors(m)[0][0] = "";
  wt::expect_malformed(summary, wt::pack_value(m), "empty tensor name");
  m = summary_value();
  tensors(m)[0][0] = std::string(wire::kMaxManifestNameBytes + 1, 'a');
  wt::expect_malformed(summary, wt::pack_value(m), "name");
  m = summary_value();
  m[2][0] = std::string(wire::kMaxMethodBytes + 1, 'm');
  wt::expect_malformed(summary, wt::pack_value(m), "method");
  // Control bytes of a hostile name never reach the error message raw.
  m = summary_value();
  tensors(m)[0][0] = "a.\x1b[31m";
  tensors(m)[1][0] = "a.\x1b[31m";
  BOOST_TEST(wt::expect_malformed(summary, wt::pack_value(m)).find('\x1b') == std::string::npos);
}

BOOST_AUTO_TEST_CASE(manifest_shapes) {
  Value m = summary_value();
  tensors(m)[2][1] = Value::Array{0xFFFFFFFFull, 0xFFFFFFFFull, 0xFFFFFFFFull};
  wt::expect_malformed(summary, wt::pack_value(m), "overflows");
  m = summary_value();
  tensors(m)[2][2] = 12301;  // numel beside shape [300x41]
  wt::expect_malformed(summary, wt::pack_value(m),
                       "[300x41] holds 12300 elements but numel is 12301");
  m = summary_value();
  tensors(m)[2][1][0] = 1ull << 32;  // an extent beyond uint32
  wt::expect_malformed(summary, wt::pack_value(m), "shape[0]");
  m = summary_value();
  tensors(m)[2][2] = 1ull << 32;
  wt::expect_malformed(summary, wt::pack_value(m), "numel");
  m = summary_value();
  tensors(m)[3][1] = Value::Array(9, Value(1));  // rank 9
  tensors(m)[3][2] = 1;
  wt::expect_malformed(summary, wt::pack_value(m), "shape");
  m = summary_value();
  tensors(m)[1][1] =
      Value::Array{std::uint64_t{0}, 1ull << 31, 1ull << 31, 1ull << 31};  // 0 whatever the rest
  tensors(m)[1][2] = std::uint64_t{0};
  const Bytes ok = wt::pack_value(m);
  BOOST_TEST(wire::decode_summary(ok.data(), ok.size()).manifest.tensors[1].numel == 0u);
  m = summary_value();
  tensors(m)[1].items.pop_back();
  wt::expect_malformed(summary, wt::pack_value(m), "expected 3");
}

BOOST_AUTO_TEST_CASE(error_code_stats_nonfinite_blob_bytes) {
  Value m = summary_value();
  m[4] = kTooLargeErrorCode;
  wt::expect_malformed(summary, wt::pack_value(m), "error_code");
  m = summary_value();
  m[5] = Value::binary(Bytes(7));
  wt::expect_malformed(summary, wt::pack_value(m), "stats");
  m = summary_value();
  m[5] = "12345678";
  wt::expect_malformed(summary, wt::pack_value(m), "stats: not a binary");
  m = summary_value();
  m[6] = Value::binary(Bytes(13));
  wt::expect_malformed(summary, wt::pack_value(m), "nonfinite");
  m = summary_value();
  m[7] = wire::kMaxBlobBytes + 1;
  wt::expect_malformed(summary, wt::pack_value(m), "blob_bytes");
  m = summary_value();
  m[3] = std::string(wire::kMaxRingTextBytes + 1, 'e');
  wt::expect_malformed(summary, wt::pack_value(m), "4097");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(payload_list)

BOOST_AUTO_TEST_CASE(round_trips_as_views_into_the_buffer) {
  const auto payloads = wt::sample_payloads();
  const Bytes bytes = wire::encode_payload_list(payloads);
  const auto spans = wire::decode_payload_list(bytes.data(), bytes.size(), payloads.size());
  BOOST_TEST_REQUIRE(spans.size() == payloads.size());
  for (std::size_t i = 0; i < spans.size(); ++i) {
    BOOST_TEST(Bytes(spans[i].data, spans[i].data + spans[i].size) == payloads[i]);
    BOOST_TEST((spans[i].data >= bytes.data() && spans[i].data <= bytes.data() + bytes.size()));
  }
  const Bytes none = wire::encode_payload_list({});
  BOOST_TEST(wire::decode_payload_list(none.data(), none.size(), 0).empty());
}

BOOST_AUTO_TEST_CASE(layout_is_pinned) {
  // u32 count, u32 lengths, bytes (little-endian hosts).
  const Bytes want = {2, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 'a', 'b'};
  BOOST_TEST(wire::encode_payload_list({{'a', 'b'}, {}}) == want, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(hostile_lists) {
  const auto list = [](std::size_t expected) {
    return [expected](const std::uint8_t* d, std::size_t n) {
      (void)wire::decode_payload_list(d, n, expected);
    };
  };
  wt::expect_malformed(list(0), {}, "shorter than its 4-byte count");
  BOOST_TEST((wt::code_of([] { (void)wire::decode_payload_list(nullptr, 0, 0); }) ==
              ErrorCode::malformed_message));
  wt::expect_malformed(list(0), {0, 0, 0}, "shorter than its 4-byte count");
  const Bytes two = wire::encode_payload_list({{'a', 'b'}, {}});
  wt::expect_malformed(list(3), two, "expected 3");
  // A count of 2^32 - 1 in 8 bytes: refused before anything is allocated.
  wt::expect_malformed(list(0xFFFFFFFFu), {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, "shorter");
  Bytes past = two;
  past[4] = 3;  // payload 0 claims 3 bytes, 2 remain
  wt::expect_malformed(list(2), past, "runs past the end");
  Bytes huge = two;
  huge[4] = huge[5] = huge[6] = huge[7] = 0xff;
  wt::expect_malformed(list(2), huge, "runs past the end");
  Bytes trailing = two;
  trailing.push_back(0);
  wt::expect_malformed(list(2), trailing, "after the last payload");
}

BOOST_AUTO_TEST_SUITE_END()
