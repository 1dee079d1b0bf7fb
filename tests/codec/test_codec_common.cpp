// test_codec_common.cpp - what every codec promises, for every method and
// sizes around the block edges: the fields compress fills, the payload
// layout's size, decode reproducing the view bit for bit, determinism.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <vector>
#include <zring/error.hpp>

#include "codec/codec.hpp"
#include "codec_fixtures.hpp"

using zring::CompressedGradient;
using zring::CompressionKind;
using zring::CompressionMethod;
namespace codec = zring::codec;
namespace t = zring::codec::test;

namespace {

const std::vector<std::size_t> kSizes = {0, 1, 2, 7, 100, 4095, 4096, 4097, 10000};

bool is_dense_kind(CompressionKind kind) {
  return kind == CompressionKind::none || kind == CompressionKind::fp16 ||
         kind == CompressionKind::bf16 || kind == CompressionKind::quantization ||
         kind == CompressionKind::signsgd;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(codec_common)

BOOST_AUTO_TEST_CASE(compress_fills_every_field) {
  for (const CompressionMethod& m : t::every_method()) {
    const auto c = codec::make_codec(m);
    BOOST_TEST((c->method() == m));
    for (std::size_t n : kSizes) {
      const std::vector<float> x = t::normal_values(n, n + 1);
      codec::CodecContext ctx;
      ctx.seed = 1234;
      const CompressedGradient g = c->compress(x.data(), n, ctx);
      BOOST_TEST_CONTEXT(m.to_string() << " n=" << n) {
        BOOST_TEST((g.method == m));
        BOOST_TEST(g.original_size == n);
        BOOST_TEST((g.shape == std::vector<std::size_t>{n}));
        BOOST_TEST(g.value_bits == zring::testing::expected_value_bits(m));
        BOOST_TEST(g.payload_bytes() == t::layout_bytes(g));
        const double ratio = n == 0 ? 1.0 : static_cast<double>(g.payload.size()) / (4.0 * n);
        BOOST_TEST(g.compression_ratio == ratio);
        if (is_dense_kind(m.kind())) {
          BOOST_TEST(g.indices.empty());
          BOOST_TEST(g.values.size() == n);
        } else {
          BOOST_TEST(g.indices.size() == g.values.size());
          BOOST_TEST(std::is_sorted(g.indices.begin(), g.indices.end()));
          BOOST_TEST((std::adjacent_find(g.indices.begin(), g.indices.end()) == g.indices.end()));
          BOOST_TEST((g.indices.empty() || g.indices.back() < n));
        }
        if (m.kind() == CompressionKind::topk || m.kind() == CompressionKind::randomk) {
          BOOST_TEST(g.indices.size() == m.kept_for(n));
        }
        BOOST_TEST(g.seed == (m.kind() == CompressionKind::randomk ? 1234u : 0u));
        BOOST_TEST(g.to_dense().size() == n);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(decode_reproduces_the_view_bit_for_bit) {
  for (const CompressionMethod& m : t::every_method()) {
    const auto c = codec::make_codec(m);
    for (std::size_t n : kSizes) {
      const std::vector<float> x = t::normal_values(n, 2 * n + 3, 10.0f);
      codec::CodecContext ctx;
      ctx.seed = n * 7 + 1;
      const CompressedGradient g = c->compress(x.data(), n, ctx);
      const CompressedGradient d = t::decoded_copy(*c, g);
      BOOST_TEST_CONTEXT(m.to_string() << " n=" << n) {
        BOOST_TEST((d.indices == g.indices));
        BOOST_TEST(t::same_bits(d.values, g.values));
        BOOST_TEST(d.seed == g.seed);
        BOOST_TEST(d.value_bits == g.value_bits);
        BOOST_TEST(d.compression_ratio == g.compression_ratio);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(decode_replaces_a_previous_view) {
  const auto c = codec::make_codec(CompressionMethod::quantization(4));
  const std::vector<float> x = t::normal_values(5000, 1);
  CompressedGradient g = c->compress(x.data(), x.size(), {});
  const std::vector<float> expected = g.values;
  g.values.assign(3, 1.0f);
  g.indices = {1, 2, 3};
  c->decode(g);
  BOOST_TEST(g.indices.empty());
  BOOST_TEST(t::same_bits(g.values, expected));
}

BOOST_AUTO_TEST_CASE(same_input_gives_the_same_bytes) {
  for (const CompressionMethod& m : t::every_method()) {
    const auto c = codec::make_codec(m);
    const std::vector<float> x = t::normal_values(10000, 77);
    codec::CodecContext ctx;
    ctx.seed = 5;
    const CompressedGradient a = c->compress(x.data(), x.size(), ctx);
    const CompressedGradient b = codec::make_codec(m)->compress(x.data(), x.size(), ctx);
    BOOST_TEST((a.payload == b.payload), m.to_string());
    BOOST_TEST(t::same_bits(a.values, b.values), m.to_string());
  }
}

BOOST_AUTO_TEST_CASE(accumulate_adds_the_view) {
  for (const CompressionMethod& m : t::every_method()) {
    const auto c = codec::make_codec(m);
    const std::vector<float> x = t::normal_values(300, 9);
    const CompressedGradient g = c->compress(x.data(), x.size(), {});
    std::vector<float> sum(x.size(), 1.0f);
    codec::accumulate(g, sum.data());
    const std::vector<float> dense = g.to_dense();
    for (std::size_t i = 0; i < x.size(); ++i)
      BOOST_TEST(sum[i] == 1.0f + dense[i], m.to_string() << " i=" << i);
  }
}

BOOST_AUTO_TEST_CASE(make_codec_refuses_error_feedback) {
  const auto ef = CompressionMethod::error_feedback(CompressionMethod::topk(3));
  BOOST_TEST(
      t::throws_code([&] { (void)codec::make_codec(ef); }, zring::ErrorCode::invalid_argument));
  BOOST_TEST((codec::make_codec(ef.base())->method() == ef.base()));
}

BOOST_AUTO_TEST_CASE(summation_matches_the_kind) {
  using codec::Summation;
  BOOST_TEST((codec::make_codec(CompressionMethod::none())->summation() == Summation::dense_float));
  BOOST_TEST(
      (codec::make_codec(CompressionMethod::fp16())->summation() == Summation::rounded_half));
  BOOST_TEST(
      (codec::make_codec(CompressionMethod::bf16())->summation() == Summation::rounded_half));
  BOOST_TEST((codec::make_codec(CompressionMethod::topk(1))->summation() == Summation::sparse));
  BOOST_TEST(
      (codec::make_codec(CompressionMethod::threshold(1))->summation() == Summation::sparse));
  BOOST_TEST(
      (codec::make_codec(CompressionMethod::randomk(1))->summation() == Summation::shared_indices));
  BOOST_TEST((codec::make_codec(CompressionMethod::quantization(2))->summation() ==
              Summation::affine_codes));
  BOOST_TEST(
      (codec::make_codec(CompressionMethod::signsgd())->summation() == Summation::affine_codes));
}

BOOST_AUTO_TEST_SUITE_END()
