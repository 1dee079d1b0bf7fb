// test_ipc_messages.cpp - IPC headers (client or zringctl <-> zringd) round
// trip for every kind, and hostile ones throw malformed_message.
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

const wt::Decoder ipc = [](const std::uint8_t* d, std::size_t n) {
  (void)wire::decode_ipc_header(d, n);
};

// A valid submit header as a Value, to change one field of. Body fields
// start at 2; the manifest is field 5.
Value ipc_value() {
  return wt::parse_value(wire::encode_ipc_header(wt::sample_ipc_header(wire::IpcKind::submit)));
}
Value& tensors(Value& message) { return message[5][1]; }

}  // namespace

BOOST_AUTO_TEST_SUITE(ipc_header)

BOOST_AUTO_TEST_CASE(every_kind_round_trips_with_a_manifest) {
  for (const wire::IpcKind kind : wt::all_ipc_kinds()) {
    BOOST_TEST_CONTEXT("kind " << static_cast<int>(kind)) {
      const wire::IpcHeader h = wt::sample_ipc_header(kind);
      BOOST_TEST_REQUIRE(!h.manifest.tensors.empty());
      const Bytes bytes = wire::encode_ipc_header(h);
      BOOST_TEST((wire::peek_message_type(bytes.data(), bytes.size()) == wire::MessageType::ipc));
      wt::check_equal(wire::decode_ipc_header(bytes.data(), bytes.size()), h);
    }
  }
}

BOOST_AUTO_TEST_CASE(default_header_layout_is_pinned) {
  const Bytes bytes = wire::encode_ipc_header({});
  // array16 of 17: 3, 4, kind 1, request 0, local_rank 0, manifest ["", [],
  // kind 1 (all-reduce), root 0], five u32, node "", op, wire_bytes,
  // dense_bytes, error_code, text "".
  const Bytes want = {0xdc, 0, 17, 3, 4, 1, 0,    0, 0x94, 0xa0, 0x90, 1,
                      0,    0, 0,  0, 0, 0, 0xa0, 0, 0,    0,    0,    0xa0};
  BOOST_TEST(bytes == want, boost::test_tools::per_element());
  wt::check_equal(wire::decode_ipc_header(bytes.data(), bytes.size()), wire::IpcHeader{});
}

BOOST_AUTO_TEST_CASE(texts_at_and_beyond_their_limits) {
  wire::IpcHeader h = wt::sample_ipc_header(wire::IpcKind::status);
  h.node = std::string(wire::kMaxNodeNameBytes, 'n');
  h.text = std::string(wire::kMaxIpcTextBytes, '{');
  const Bytes bytes = wire::encode_ipc_header(h);
  wt::check_equal(wire::decode_ipc_header(bytes.data(), bytes.size()), h);

  h.node += "n";
  wt::expect_malformed(ipc, wire::encode_ipc_header(h), "node");
  h.node = "a";
  h.text += "}";
  wt::expect_malformed(ipc, wire::encode_ipc_header(h), "65537");
}

BOOST_AUTO_TEST_CASE(kinds_out_of_range) {
  for (const std::uint64_t kind : {0ull, 13ull, 99ull}) {
    BOOST_TEST_CONTEXT("kind " << kind) {
      Value m = ipc_value();
      m[2] = kind;
      wt::expect_malformed(ipc, wt::pack_value(m), "IPC header: kind");
    }
  }
}

BOOST_AUTO_TEST_CASE(fields_out_of_range_or_of_another_type) {
  Value m = ipc_value();
  m[15] = wt::kUnknownErrorCode;
  wt::expect_malformed(ipc, wt::pack_value(m), "error_code");
  for (const std::size_t field : {4u, 6u, 7u, 8u, 9u, 10u}) {  // the u32 fields
    BOOST_TEST_CONTEXT("field " << field) {
      m = ipc_value();
      m[field] = 1ull << 32;
      wt::expect_malformed(ipc, wt::pack_value(m), "exceeds");
    }
  }
  m = ipc_value();
  m[3] = Value::negative_int(-1);
  wt::expect_malformed(ipc, wt::pack_value(m), "request: not an unsigned integer");
  m = ipc_value();
  m[11] = 5;
  wt::expect_malformed(ipc, wt::pack_value(m), "node: not a string");
  m = ipc_value();
  m[16] = Value::binary({'h', 'i'});  // IPC headers carry no binaries
  wt::expect_malformed(ipc, wt::pack_value(m), "binary");
  m = ipc_value();
  m[5] = "manifest";
  wt::expect_malformed(ipc, wt::pack_value(m), "manifest: not an array");
  m = ipc_value();
  m.items.pop_back();
  wt::expect_malformed(ipc, wt::pack_value(m), "expected 17");
}

BOOST_AUTO_TEST_CASE(hostile_manifests) {
  Value m = ipc_value();
  tensors(m)[4][0] = "d.conv";  // a duplicate of tensor 3
  wt::expect_malformed(ipc, wt::pack_value(m), "duplicate");
  m = ipc_value();
  std::swap(tensors(m)[0], tensors(m)[1]);
  wt::expect_malformed(ipc, wt::pack_value(m), "sorted");
  m = ipc_value();
  tensors(m)[5][0] = "";
  wt::expect_malformed(ipc, wt::pack_value(m), "empty tensor name");
  m = ipc_value();
  tensors(m)[3][1] = Value::Array{1ull << 31, 1ull << 31, 1ull << 31, 1ull << 31};
  wt::expect_malformed(ipc, wt::pack_value(m), "overflows");
  m = ipc_value();
  tensors(m)[3][2] = 1729;
  wt::expect_malformed(ipc, wt::pack_value(m), "numel is 1729");

  // What the op is: a kind 1 (all-reduce) or 2 (broadcast), a root only
  // for a broadcast, and under 2^32.
  for (const std::uint64_t kind : {0ull, 3ull, 1ull << 40}) {
    BOOST_TEST_CONTEXT("op kind " << kind) {
      m = ipc_value();
      m[5][2] = kind;
      wt::expect_malformed(ipc, wt::pack_value(m), "IPC header, manifest: kind");
    }
  }
  m = ipc_value();
  m[5][2] = "broadcast";
  wt::expect_malformed(ipc, wt::pack_value(m), "kind: not an unsigned integer");
  m = ipc_value();
  m[5][3] = 2;  // the sample is an all-reduce
  wt::expect_malformed(ipc, wt::pack_value(m), "root 2 in an all-reduce");
  m = ipc_value();
  m[5][2] = 2;
  m[5][3] = 1ull << 32;
  wt::expect_malformed(ipc, wt::pack_value(m), "IPC header, manifest: root");
  m[5][3] = 0xFFFFFFFFull;
  const Bytes broadcast = wt::pack_value(m);
  const wire::IpcHeader h = wire::decode_ipc_header(broadcast.data(), broadcast.size());
  BOOST_TEST((h.manifest.kind == wire::OpKind::broadcast));
  BOOST_TEST(h.manifest.root == 0xFFFFFFFFu);
  m[5].items.pop_back();  // a manifest of the last version: no root
  wt::expect_malformed(ipc, wt::pack_value(m), "array of 3 items, expected 4");

  // A tensor list claiming 2^32 - 1 entries, refused before it is built.
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> p(buffer);
  p.pack_array(17);
  p.pack_uint32(zring::wire::kWireVersion);
  p.pack_uint32(4);
  p.pack_uint32(3);
  p.pack_uint32(0);
  p.pack_uint32(0);
  p.pack_array(4);
  p.pack(std::string("none"));
  p.pack_array(0xFFFFFFFFu);
  const auto* b = reinterpret_cast<const std::uint8_t*>(buffer.data());
  wt::expect_malformed(ipc, Bytes(b, b + buffer.size()), "4294967295");
}

BOOST_AUTO_TEST_CASE(other_message_types) {
  const Bytes ring = wire::encode_ring_header(wt::sample_ring_header(wire::RingKind::up));
  wt::expect_malformed(ipc, ring,
                       "expected a message of type 4 (IPC header), got type 2 (ring header)");
}

BOOST_AUTO_TEST_SUITE_END()
