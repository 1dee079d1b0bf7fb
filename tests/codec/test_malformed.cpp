// test_malformed.cpp - decode() is the validating inverse used on network
// input: every bad payload is an Error(malformed_message), never a crash,
// an out-of-range read or an allocation the payload does not justify.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>
#include <zring/error.hpp>

#include "codec/codec.hpp"
#include "codec/sparse.hpp"
#include "codec_fixtures.hpp"
#include "support/special_floats.hpp"

using zring::CompressedGradient;
using zring::CompressionMethod;
namespace codec = zring::codec;
namespace t = zring::codec::test;
using Bytes = std::vector<std::uint8_t>;

namespace {

void put_u32(Bytes& b, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
void put_f32(Bytes& b, float v) { put_u32(b, std::bit_cast<std::uint32_t>(v)); }
void set_u32(Bytes& b, std::size_t at, std::uint32_t v) {
  for (std::size_t i = 0; i < 4; ++i) b.at(at + i) = static_cast<std::uint8_t>(v >> (8 * i));
}
void set_f32(Bytes& b, std::size_t at, float v) { set_u32(b, at, std::bit_cast<std::uint32_t>(v)); }

// A sparse payload: m, then one 1.0f value per varint group, then the bytes.
Bytes sparse(std::uint32_t m, const Bytes& varints) {
  Bytes b;
  put_u32(b, m);
  for (std::uint32_t j = 0; j < m; ++j) put_f32(b, 1.0f);
  b.insert(b.end(), varints.begin(), varints.end());
  return b;
}

Bytes compressed(const codec::Codec& c, const std::vector<float>& x, std::uint64_t seed = 0) {
  codec::CodecContext ctx;
  ctx.seed = seed;
  return c.compress(x.data(), x.size(), ctx).payload;
}

// Whether decode() rejects a sparse payload, checking that the collective's
// decoder of raw bytes (decode_sparse_pairs) decides the same and, when
// both accept, finds the very same pairs.
bool sparse_rejects(const codec::Codec& c, const Bytes& payload, std::size_t n) {
  const bool rejected = t::rejects(c, payload, n);
  std::vector<std::uint32_t> indices;
  std::vector<float> values;
  try {
    codec::detail::decode_sparse_pairs(c.method(), payload.data(), payload.size(), n, indices,
                                       values);
    BOOST_TEST(!rejected, "decode_sparse_pairs accepts what decode() rejects");
    if (rejected) return rejected;
    CompressedGradient g;
    g.method = c.method();
    g.original_size = n;
    g.payload = payload;
    c.decode(g);
    BOOST_TEST((indices == g.indices));
    BOOST_TEST(t::same_bits(values, g.values));
  } catch (const zring::Error& e) {
    BOOST_TEST((e.code() == zring::ErrorCode::malformed_message));
    BOOST_TEST(rejected, "decode_sparse_pairs rejects what decode() accepts: " << e.what());
    BOOST_TEST((indices.empty() && values.empty()), "left half filled");
  }
  return rejected;
}

using zring::testing::kInf;
using zring::testing::kNan;

}  // namespace

BOOST_AUTO_TEST_SUITE(malformed)

BOOST_AUTO_TEST_CASE(every_truncation_and_extension_is_rejected) {
  for (const CompressionMethod& m : t::every_method()) {
    const auto c = codec::make_codec(m);
    for (std::size_t n : {0, 1, 7, 300, 4097}) {
      std::vector<float> x = t::normal_values(n, n + 5);
      if (n > 5) x[5] = kInf;  // exercises randomk's exceptions too
      const Bytes payload = compressed(*c, x, 9);
      BOOST_REQUIRE(!t::rejects(*c, payload, n));
      std::size_t accepted = 0;
      for (std::size_t len = 0; len < payload.size(); ++len) {
        accepted +=
            t::rejects(
                *c, Bytes(payload.begin(), payload.begin() + static_cast<std::ptrdiff_t>(len)), n)
                ? 0
                : 1;
      }
      BOOST_TEST(accepted == 0u, m.to_string() << " n=" << n);
      for (const Bytes& tail : {Bytes{0}, Bytes{1, 2, 3, 4}, Bytes(8, 0)}) {
        Bytes longer = payload;
        longer.insert(longer.end(), tail.begin(), tail.end());
        BOOST_TEST(t::rejects(*c, longer, n), m.to_string() << " n=" << n << " +" << tail.size());
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(a_huge_claimed_size_is_rejected_without_allocating) {
  const std::size_t huge = std::size_t{1} << 62;
  for (const CompressionMethod& m : t::every_method()) {
    const auto c = codec::make_codec(m);
    const std::vector<float> x = t::normal_values(100, 1);
    BOOST_TEST(t::rejects(*c, compressed(*c, x), huge), m.to_string());
    BOOST_TEST(t::rejects(*c, compressed(*c, x), std::numeric_limits<std::size_t>::max()),
               m.to_string());
  }
  const auto topk = codec::make_codec(CompressionMethod::topk(1));
  BOOST_TEST(t::rejects(*topk, Bytes{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, 1u << 30));
}

BOOST_AUTO_TEST_CASE(sparse_indices_and_varints_are_checked) {
  for (const CompressionMethod& m :
       {CompressionMethod::topk(2), CompressionMethod::threshold(0.5f)}) {
    const auto c = codec::make_codec(m);
    const std::size_t n = 10;
    BOOST_TEST(!sparse_rejects(*c, sparse(2, {3, 1}), n));        // indices 3, 4
    BOOST_TEST(!sparse_rejects(*c, sparse(1, {9}), n));           // the last element
    BOOST_TEST(!sparse_rejects(*c, sparse(0, {}), n));            // nothing kept
    BOOST_TEST(sparse_rejects(*c, sparse(11, Bytes(11, 1)), n));  // more pairs than elements
    BOOST_TEST(sparse_rejects(*c, sparse(1, {10}), n));           // index == n
    BOOST_TEST(sparse_rejects(*c, sparse(2, {5, 5}), n));         // 5 + 5 == n
    BOOST_TEST(sparse_rejects(*c, sparse(2, {3, 0}), n));         // repeated index
    BOOST_TEST(
        sparse_rejects(*c, sparse(1, {0x80, 0x80, 0x80, 0x80, 0x80, 0x00}), n));  // 6-byte varint
    BOOST_TEST(
        sparse_rejects(*c, sparse(1, {0xff, 0xff, 0xff, 0xff, 0x1f}), 1u << 31));  // > 32 bits
    BOOST_TEST(sparse_rejects(*c, sparse(1, {0x83, 0x00}), n));  // padded (non-canonical)
    BOOST_TEST(sparse_rejects(*c, sparse(1, {0x83}), n));        // unterminated
    BOOST_TEST(sparse_rejects(*c, sparse(1, {3, 0}), n));        // trailing byte
    BOOST_TEST(sparse_rejects(*c, sparse(2, {3}), n));           // missing varint
    // A gap that overflows 32 bits when added must not wrap around.
    BOOST_TEST(
        sparse_rejects(*c, sparse(2, {0xfe, 0xff, 0xff, 0xff, 0x0f, 0x05}), std::size_t{1} << 32));
    BOOST_TEST(
        !sparse_rejects(*c, sparse(1, {0xff, 0xff, 0xff, 0xff, 0x0f}), std::size_t{1} << 32));
  }
}

BOOST_AUTO_TEST_CASE(randomk_fields_are_checked) {
  const CompressionMethod m = CompressionMethod::randomk(10);
  const auto c = codec::make_codec(m);
  const std::size_t n = 100;
  std::vector<float> x = t::normal_values(n, 3);
  const std::vector<std::uint32_t> sampled = codec::random_indices(4, n, 10);
  std::uint32_t free_index = 0;
  while (std::binary_search(sampled.begin(), sampled.end(), free_index)) ++free_index;
  x[free_index] = kNan;
  const Bytes good = compressed(*c, x, 4);
  BOOST_REQUIRE(good.size() == 8u + 4 + 40 + 4 + 8);
  BOOST_TEST(!t::rejects(*c, good, n));
  const std::size_t pair = 8 + 4 + 40 + 4;

  Bytes b = good;
  set_u32(b, 8, 9);  // k one short, and the bytes to match
  b.erase(b.begin() + 12, b.begin() + 16);
  BOOST_TEST(t::rejects(*c, b, n));
  b = good;
  set_u32(b, 8, 11);
  b.insert(b.begin() + 12, {0, 0, 0, 0});
  BOOST_TEST(t::rejects(*c, b, n));
  b = good;
  set_u32(b, pair, sampled[0]);  // an exception at a sampled index
  BOOST_TEST(t::rejects(*c, b, n));
  b = good;
  set_u32(b, pair, 100);  // out of range
  BOOST_TEST(t::rejects(*c, b, n));
  b = good;
  set_f32(b, pair + 4, 1.0f);  // a finite exception
  BOOST_TEST(t::rejects(*c, b, n));
  b = good;  // two exceptions, not increasing
  set_u32(b, pair - 4, 2);
  b.insert(b.end(), b.end() - 8, b.end());
  BOOST_TEST(t::rejects(*c, b, n));
  b = good;
  set_u32(b, pair - 4, 0xffffffffu);  // an exception count the payload cannot hold
  BOOST_TEST(t::rejects(*c, b, n));
}

BOOST_AUTO_TEST_CASE(affine_headers_and_padding_are_checked) {
  const auto q = codec::make_codec(CompressionMethod::quantization(4));
  const std::vector<float> x = {1, 2, 3};  // 8 header bytes + 2 code bytes (12 bits)
  const Bytes good = compressed(*q, x);
  BOOST_REQUIRE(good.size() == 10u);
  BOOST_TEST(!t::rejects(*q, good, 3));
  Bytes b = good;
  set_f32(b, 4, -1.0f);  // negative step
  BOOST_TEST(t::rejects(*q, b, 3));
  b = good;
  set_f32(b, 0, kInf);
  BOOST_TEST(t::rejects(*q, b, 3));
  b = good;
  set_f32(b, 0, kNan);  // nan offset with a finite step
  BOOST_TEST(t::rejects(*q, b, 3));
  b = good;
  set_f32(b, 0, kNan);
  set_f32(b, 4, kNan);  // a nan grid with nonzero codes
  BOOST_TEST(t::rejects(*q, b, 3));
  b[8] = b[9] = 0;  // a nan grid with zero codes: a valid overflowed block
  BOOST_TEST(!t::rejects(*q, b, 3));
  b = good;
  b[9] |= 0x10;  // a bit past the last code
  BOOST_TEST(t::rejects(*q, b, 3));

  const auto s = codec::make_codec(CompressionMethod::signsgd());
  const Bytes sign_good = compressed(*s, x);  // 4 header bytes + 1 byte of bits
  BOOST_REQUIRE(sign_good.size() == 5u);
  BOOST_TEST(!t::rejects(*s, sign_good, 3));
  for (float bad_scale : {-1.0f, kInf, -kInf}) {
    b = sign_good;
    set_f32(b, 0, bad_scale);
    BOOST_TEST(t::rejects(*s, b, 3));
  }
  b = sign_good;
  set_f32(b, 0, kNan);  // nan scale, bits set
  BOOST_TEST(t::rejects(*s, b, 3));
  b[4] = 0;
  BOOST_TEST(!t::rejects(*s, b, 3));
  b = sign_good;
  b[4] |= 0x08;  // a fourth sign for three elements
  BOOST_TEST(t::rejects(*s, b, 3));
}

BOOST_AUTO_TEST_CASE(the_message_names_the_codec_and_the_sizes) {
  const auto c = codec::make_codec(CompressionMethod::topk_ratio(0.01));
  CompressedGradient g;
  g.original_size = 10;
  g.payload = sparse(1, {10});
  try {
    c->decode(g);
    BOOST_FAIL("decode accepted an out-of-range index");
  } catch (const zring::Error& e) {
    const std::string what = e.what();
    BOOST_TEST(what.rfind("topk:1%: ", 0) == 0u, what);
    BOOST_TEST(what.find("out of range") != std::string::npos, what);
    BOOST_TEST(what.find("(payload 9 bytes, tensor of 10 elements)") != std::string::npos, what);
  }
  BOOST_TEST(g.indices.empty());  // a failed decode leaves no half-filled view
  BOOST_TEST(g.values.empty());
}

BOOST_AUTO_TEST_SUITE_END()
