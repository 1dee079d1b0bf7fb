// test_hostile_gradients.cpp - hand-built messages that lie about their sizes, break
// the layout or the rules; each must throw zring::Error, never crash or
// allocate what it claims.
#include <boost/test/unit_test.hpp>
#include <limits>
#include <msgpack.hpp>

#include "codec/codec.hpp"
#include "wire/wire.hpp"
#include "wire_test_util.hpp"

namespace wt = zring::wire_test;
using wt::Bytes;
using zring::ErrorCode;
namespace wire = zring::wire;

namespace {

// Raw msgpack bytes, written by hand through the packer.
struct Builder {
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> p{buffer};
  // [version, 1, ...] with room for `items` body items.
  Builder& header(std::uint32_t body_items = 1) {
    p.pack_array(2 + body_items);
    p.pack_uint32(zring::wire::kWireVersion);
    p.pack_uint32(1);
    return *this;
  }
  Bytes bytes() const {
    const auto* b = reinterpret_cast<const std::uint8_t*>(buffer.data());
    return Bytes(b, b + buffer.size());
  }
};

// The code decode_gradients throws, and its message in *message.
ErrorCode decode_code(const Bytes& bytes, std::string* message = nullptr,
                      const wire::DecodeLimits& limits = {}) {
  return wt::code_of([&] { (void)wire::decode_gradients(bytes.data(), bytes.size(), limits); },
                     message);
}

void expect_malformed(const Bytes& bytes, const std::string& mention = "",
                      const wire::DecodeLimits& limits = {}) {
  std::string message;
  BOOST_TEST((decode_code(bytes, &message, limits) == ErrorCode::malformed_message));
  BOOST_TEST_MESSAGE(message);
  BOOST_TEST(message.find(mention) != std::string::npos, message << " should mention " << mention);
}

wt::RawEntry valid_entry(const std::string& name = "w") {
  return wt::raw_entry(name, wt::make_gradient("none", 6, {2, 3}));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(hostile)

BOOST_AUTO_TEST_CASE(tiny_inputs) {
  BOOST_TEST((wt::code_of([] { (void)wire::decode_gradients(nullptr, 0); }) ==
              ErrorCode::malformed_message));
  const Bytes none;
  expect_malformed(none, "empty");
  for (int b = 0; b < 256; ++b) {
    BOOST_TEST_CONTEXT("byte " << b) {
      const Bytes one = {static_cast<std::uint8_t>(b)};
      BOOST_TEST((decode_code(one) == ErrorCode::malformed_message));
    }
  }
}

BOOST_AUTO_TEST_CASE(top_level_must_be_an_array) {
  for (const Bytes& bytes : {Bytes{0x80}, Bytes{0x01}, Bytes{0xa1, 'x'}, Bytes{0xc0}})
    expect_malformed(bytes, "array");
  expect_malformed(Bytes{0x90}, "version, type");        // []
  expect_malformed(Bytes{0x91, 0x0a}, "version, type");  // [10]
  expect_malformed(Bytes{0x92, 0xa1, 'x', 0x01}, "unsigned integer");
}

BOOST_AUTO_TEST_CASE(array_claiming_2_pow_32_elements) {
  Builder root;  // the root itself claims 2^32 - 1 items
  root.p.pack_array(0xFFFFFFFFu);
  root.p.pack_uint32(zring::wire::kWireVersion);
  root.p.pack_uint32(1);
  expect_malformed(root.bytes(), "4294967295");

  Builder tensors;  // the tensor list claims 2^32 - 1 entries
  tensors.header().p.pack_array(0xFFFFFFFFu);
  expect_malformed(tensors.bytes(), "4294967295");

  // Entries of 65535 items each (as large as an array may be): legal one by
  // one, but together more objects than any gradients message needs, so the
  // scan stops before msgpack-c would allocate them all.
  Builder entries;
  entries.header().p.pack_array(65536);
  for (int i = 0; i < 16; ++i) {
    entries.p.pack_array(65535);
    for (int j = 0; j < 65535; ++j) entries.p.pack_nil();
  }
  expect_malformed(entries.bytes(), "claim more than");
}

BOOST_AUTO_TEST_CASE(lengths_beyond_the_buffer) {
  Builder str;  // a name claiming 2 GiB, three bytes present
  str.header().p.pack_array(1);
  str.p.pack_array(5);
  str.p.pack_str(0x80000000u);
  str.p.pack_str_body("abc", 3);
  expect_malformed(str.bytes(), "truncated");

  Builder bin;  // a payload claiming 4 GiB
  const wt::RawEntry e = valid_entry();
  bin.header().p.pack_array(1);
  bin.p.pack_array(5);
  bin.p.pack(e.name);
  bin.p.pack(e.method);
  bin.p.pack_array(2);
  bin.p.pack_uint32(2);
  bin.p.pack_uint32(3);
  bin.p.pack_uint32(6);
  bin.p.pack_bin(0xFFFFFFFFu);
  bin.p.pack_bin_body("\x01\x02", 2);
  expect_malformed(bin.bytes());
}

BOOST_AUTO_TEST_CASE(every_truncation_of_a_message_is_an_error) {
  // Hand-built twin of the truncation sweep in test_fuzz: a name string cut.
  Bytes bytes = wt::pack_message({valid_entry("a_longer_tensor_name")});
  bytes.resize(bytes.size() / 2);
  expect_malformed(bytes, "truncated");
}

BOOST_AUTO_TEST_CASE(trailing_bytes_are_malformed) {
  Bytes bytes = wt::pack_message({valid_entry()});
  bytes.push_back(0x00);
  expect_malformed(bytes, "trailing");
}

BOOST_AUTO_TEST_CASE(nested_depth_bomb) {
  Builder inner;  // [1, 1, [[[[...]]]]] 100000 deep
  inner.header();
  Bytes bytes = inner.bytes();
  bytes.insert(bytes.end(), 100000, 0x91);
  bytes.push_back(0x90);
  expect_malformed(bytes, "nested");

  Bytes root(1000000, 0x91);  // the root itself: [[[[...]]]]
  root.push_back(0x01);
  expect_malformed(root, "unsigned integer");
}

BOOST_AUTO_TEST_CASE(maps_and_ext_are_not_part_of_the_format) {
  Builder map;
  map.header().p.pack_map(1);
  map.p.pack_uint32(1);
  map.p.pack_uint32(2);
  expect_malformed(map.bytes(), "map");

  Builder ext;
  ext.header().p.pack_ext(2, 1);
  ext.p.pack_ext_body("ab", 2);
  expect_malformed(ext.bytes(), "ext");
}

BOOST_AUTO_TEST_CASE(entry_layout) {
  Builder short_entry;  // 4 fields instead of 5
  short_entry.header().p.pack_array(1);
  short_entry.p.pack_array(4);
  for (int i = 0; i < 4; ++i) short_entry.p.pack_uint32(1);
  expect_malformed(short_entry.bytes(), "expected 5");

  Builder not_list;  // tensors is a string
  not_list.header().p.pack("tensors");
  expect_malformed(not_list.bytes(), "tensors");

  Builder extra_body;  // [1, 1, [], []]
  extra_body.header(2).p.pack_array(0);
  extra_body.p.pack_array(0);
  expect_malformed(extra_body.bytes(), "expected 3");
}

BOOST_AUTO_TEST_CASE(field_types) {
  const wt::RawEntry e = valid_entry();
  // original_size as a negative number, then as a float.
  for (int variant = 0; variant < 3; ++variant) {
    Builder b;
    b.header().p.pack_array(1);
    b.p.pack_array(5);
    b.p.pack(e.name);
    if (variant == 2)
      b.p.pack_uint32(7);
    else
      b.p.pack(e.method);
    b.p.pack_array(2);
    b.p.pack_uint32(2);
    b.p.pack_uint32(3);
    if (variant == 0)
      b.p.pack_int32(-6);
    else if (variant == 1)
      b.p.pack_double(6.5);  // (msgpack-c packs 6.0 as an int)
    else
      b.p.pack_uint32(6);
    b.p.pack_bin(static_cast<std::uint32_t>(e.payload.size()));
    b.p.pack_bin_body(reinterpret_cast<const char*>(e.payload.data()),
                      static_cast<std::uint32_t>(e.payload.size()));
    expect_malformed(b.bytes(), variant == 2 ? "method" : "original_size");
  }
  Builder b;  // payload as a str instead of a bin
  b.header().p.pack_array(1);
  b.p.pack_array(5);
  b.p.pack(e.name);
  b.p.pack(e.method);
  b.p.pack_array(1);
  b.p.pack_uint32(6);
  b.p.pack_uint32(6);
  b.p.pack(std::string(24, 'x'));
  expect_malformed(b.bytes(), "payload");
}

BOOST_AUTO_TEST_CASE(shape_product_must_equal_original_size) {
  wt::RawEntry e = valid_entry();
  e.shape = {3, 3};
  expect_malformed(wt::pack_message({e}), "original_size is 6");

  e.shape = {0xFFFFFFFFull, 0xFFFFFFFFull, 0xFFFFFFFFull};
  expect_malformed(wt::pack_message({e}), "overflows");

  // Extents whose product wraps to exactly original_size (0) in 64 bits,
  // with the per-extent bound lifted so only the overflow check stands.
  wt::RawEntry wrap = wt::raw_entry("w", wt::make_gradient("none", 0));
  wrap.shape = {1ull << 32, 1ull << 32};
  wire::DecodeLimits loose;
  loose.max_elements = std::numeric_limits<std::size_t>::max();
  expect_malformed(wt::pack_message({wrap}), "overflows", loose);

  // A zero extent makes the product 0 even beside a large one.
  wrap.shape = {0, 1ull << 20};
  const Bytes ok = wt::pack_message({wrap});
  BOOST_TEST(wire::decode_gradients(ok.data(), ok.size()).at("w").original_size == 0u);

  e.shape = {1, 1, 1, 1, 1, 1, 1, 1, 6};  // rank 9 > max_rank 8
  expect_malformed(wt::pack_message({e}), "shape");
}

BOOST_AUTO_TEST_CASE(original_size_2_pow_40) {
  wt::RawEntry e = valid_entry();
  e.original_size = 1ull << 40;
  e.shape = {1ull << 20, 1ull << 20};
  expect_malformed(wt::pack_message({e}), "original_size");
}

BOOST_AUTO_TEST_CASE(topk_index_out_of_range) {
  // The 5 largest of 100 values placed at the end, then the message claims
  // a tensor of 50 elements: the payload's indices point past it.
  std::vector<float> x(100, 0.01f);
  for (int i = 95; i < 100; ++i) x[i] = 10.0f + static_cast<float>(i);
  const auto codec = zring::codec::make_codec(zring::CompressionMethod::topk(5));
  zring::CompressedGradient g = codec->compress(x.data(), x.size(), {});
  g.shape = {100};
  wt::RawEntry e = wt::raw_entry("w", g);
  e.original_size = 50;
  e.shape = {50};
  expect_malformed(wt::pack_message({e}), "'w'");
}

BOOST_AUTO_TEST_CASE(randomk_k_mismatch) {
  wt::RawEntry e = wt::raw_entry("w", wt::make_gradient("randomk:5", 100));
  e.method = "randomk:6";
  expect_malformed(wt::pack_message({e}), "payload");

  wt::RawEntry ratio = wt::raw_entry("w", wt::make_gradient("randomk:10%", 100));
  ratio.original_size = 200;  // 10% of 200 is 20 values, the payload has 10
  ratio.shape = {200};
  expect_malformed(wt::pack_message({ratio}), "payload");
}

BOOST_AUTO_TEST_CASE(names) {
  expect_malformed(wt::pack_message({valid_entry("w"), valid_entry("w")}), "duplicate");
  expect_malformed(wt::pack_message({valid_entry("")}), "empty");
  wire::DecodeLimits limits;
  limits.max_name_bytes = 3;
  expect_malformed(wt::pack_message({valid_entry("long_name")}), "name", limits);
  // Control bytes of a hostile name never reach the error message raw.
  std::string message;
  decode_code(wt::pack_message({valid_entry("x\n\x1b[31m"), valid_entry("x\n\x1b[31m")}), &message);
  BOOST_TEST(message.find('\x1b') == std::string::npos);
}

BOOST_AUTO_TEST_CASE(methods) {
  wt::RawEntry e = valid_entry();
  e.method = "ef:topk:1%";
  expect_malformed(wt::pack_message({e}), "error feedback");
  e.method = "zip";
  expect_malformed(wt::pack_message({e}), "method");
  e.method = std::string(100, 'a');
  expect_malformed(wt::pack_message({e}));
  e.method = "quant:8";  // a valid method that does not match the payload
  expect_malformed(wt::pack_message({e}), "payload");
}

BOOST_AUTO_TEST_CASE(limits_are_enforced) {
  const Bytes two = wt::pack_message({valid_entry("a"), valid_entry("b")});
  wire::DecodeLimits limits;
  limits.max_tensors = 1;
  expect_malformed(two, "", limits);
  limits = {};
  limits.max_message_bytes = two.size() - 1;
  expect_malformed(two, "bytes", limits);
  limits = {};
  limits.max_total_elements = 11;  // each tensor holds 6
  expect_malformed(two, "together", limits);
  limits = {};
  limits.max_elements = 5;
  expect_malformed(two, "", limits);
  BOOST_TEST(wire::decode_gradients(two.data(), two.size()).size() == 2u);
}

BOOST_AUTO_TEST_SUITE_END()
