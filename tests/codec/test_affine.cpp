// test_affine.cpp - the AffineCodec face of quantization and signsgd, which
// the ring uses to put every rank on one grid and sum codes exactly.
#include <bit>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "codec/codec.hpp"
#include "codec_fixtures.hpp"
#include "support/special_floats.hpp"

using zring::CompressedGradient;
using zring::CompressionMethod;
namespace codec = zring::codec;
namespace t = zring::codec::test;

namespace {

struct Affine {
  std::unique_ptr<codec::Codec> owner;
  const codec::AffineCodec* codec;
};

Affine as_affine(const CompressionMethod& m) {
  Affine a{codec::make_codec(m), nullptr};
  a.codec = dynamic_cast<const codec::AffineCodec*>(a.owner.get());
  BOOST_REQUIRE(a.codec != nullptr);
  return a;
}

using zring::testing::kNan;

}  // namespace

BOOST_AUTO_TEST_SUITE(affine)

BOOST_AUTO_TEST_CASE(only_quantization_and_signsgd_are_affine) {
  for (const CompressionMethod& m : t::every_method()) {
    const auto c = codec::make_codec(m);
    const bool expected = m.kind() == zring::CompressionKind::quantization ||
                          m.kind() == zring::CompressionKind::signsgd;
    BOOST_TEST((dynamic_cast<const codec::AffineCodec*>(c.get()) != nullptr) == expected,
               m.to_string());
  }
}

BOOST_AUTO_TEST_CASE(quantization_statistics_and_grid) {
  const Affine q = as_affine(CompressionMethod::quantization(4));
  BOOST_TEST(q.codec->stats_per_block() == 2u);
  BOOST_TEST(q.codec->max_code() == 15u);
  const std::vector<float> x = {0.5f, -2.0f, 7.0f, -0.0f, 1.0f};
  float stats[2];
  q.codec->block_stats(x.data(), x.size(), stats);
  BOOST_TEST(stats[0] == -2.0f);
  BOOST_TEST(stats[1] == 7.0f);
  float other[2] = {-3.0f, 1.0f};
  q.codec->combine_stats(stats, other);
  BOOST_TEST(stats[0] == -3.0f);
  BOOST_TEST(stats[1] == 7.0f);
  const codec::AffineGrid grid = q.codec->grid(stats, 5, 1);
  BOOST_TEST(grid.offset == -3.0f);
  BOOST_TEST(grid.step == 10.0f / 15.0f);
  const codec::AffineGrid grid4 = q.codec->grid(stats, 5, 4);  // contributors do not matter
  BOOST_TEST(grid4.offset == grid.offset);
  BOOST_TEST(grid4.step == grid.step);
  BOOST_TEST(codec::affine_value(grid, 15) == -3.0f + 15.0f * (10.0f / 15.0f));
}

BOOST_AUTO_TEST_CASE(signsgd_statistics_and_grid) {
  const Affine s = as_affine(CompressionMethod::signsgd());
  BOOST_TEST(s.codec->stats_per_block() == 1u);
  BOOST_TEST(s.codec->max_code() == 1u);
  const std::vector<float> x = {1.0f, -3.0f, 2.0f, -2.0f};
  float stats[1];
  s.codec->block_stats(x.data(), x.size(), stats);
  BOOST_TEST(stats[0] == 8.0f);
  const float other[1] = {4.0f};
  s.codec->combine_stats(stats, other);
  BOOST_TEST(stats[0] == 12.0f);
  const codec::AffineGrid grid = s.codec->grid(stats, 4, 2);  // mean over 2 ranks x 4 elements
  BOOST_TEST(grid.offset == -1.5f);
  BOOST_TEST(grid.step == 3.0f);
  std::vector<std::uint32_t> codes(4);
  s.codec->encode_codes(x.data(), 4, grid, codes.data());
  BOOST_TEST(codes == (std::vector<std::uint32_t>{1, 0, 1, 0}), boost::test_tools::per_element());
}

// Inf and nan of either sign (and any nan payload) make a block's range nan;
// the largest finite values of either sign do not.
BOOST_AUTO_TEST_CASE(every_inf_and_nan_makes_the_range_nan_and_no_finite_value_does) {
  const Affine q = as_affine(CompressionMethod::quantization(8));
  const float inf = std::numeric_limits<float>::infinity();
  const float big = std::numeric_limits<float>::max();
  const auto nan_of = [](std::uint32_t bits) { return std::bit_cast<float>(bits); };
  for (const float bad : {inf, -inf, nan_of(0x7fc00000u), nan_of(0xffc00000u), nan_of(0x7f800001u),
                          nan_of(0xff800001u), nan_of(0xffffffffu)}) {
    for (std::size_t at = 0; at < 3; ++at) {
      std::vector<float> x = {0.5f, -2.0f, 3.0f};
      x[at] = bad;
      float stats[2];
      q.codec->block_stats(x.data(), x.size(), stats);
      BOOST_TEST((std::isnan(stats[0]) && std::isnan(stats[1])), std::bit_cast<std::uint32_t>(bad)
                                                                     << " at " << at);
    }
  }
  const std::vector<float> extremes = {big, -big, 0.0f, -0.0f};
  float stats[2];
  q.codec->block_stats(extremes.data(), extremes.size(), stats);
  BOOST_TEST(stats[0] == -big);
  BOOST_TEST(stats[1] == big);
}

BOOST_AUTO_TEST_CASE(nan_statistics_are_sticky_and_give_a_nan_grid) {
  for (const CompressionMethod& m :
       {CompressionMethod::quantization(8), CompressionMethod::signsgd()}) {
    const Affine a = as_affine(m);
    const std::vector<float> good = {1.0f, 2.0f, -1.0f};
    std::vector<float> bad = good;
    bad[1] = std::numeric_limits<float>::infinity();
    float acc[2], other[2];
    a.codec->block_stats(bad.data(), bad.size(), acc);
    for (std::size_t i = 0; i < a.codec->stats_per_block(); ++i)
      BOOST_TEST(std::isnan(acc[i]), m.to_string());
    a.codec->block_stats(good.data(), good.size(), other);
    a.codec->combine_stats(other, acc);  // finite <- nan
    for (std::size_t i = 0; i < a.codec->stats_per_block(); ++i)
      BOOST_TEST(std::isnan(other[i]), m.to_string());
    a.codec->block_stats(good.data(), good.size(), other);
    a.codec->combine_stats(acc, other);  // nan <- finite
    for (std::size_t i = 0; i < a.codec->stats_per_block(); ++i)
      BOOST_TEST(std::isnan(acc[i]), m.to_string());
    const codec::AffineGrid grid = a.codec->grid(acc, 3, 1);
    BOOST_TEST(std::isnan(grid.offset));
    BOOST_TEST(std::isnan(grid.step));
    std::vector<std::uint32_t> codes(3, 7);
    a.codec->encode_codes(good.data(), 3, {kNan, kNan}, codes.data());
    BOOST_TEST(codes == (std::vector<std::uint32_t>(3, 0)), boost::test_tools::per_element());
  }
}

BOOST_AUTO_TEST_CASE(encode_codes_matches_what_compress_sends) {
  for (const CompressionMethod& m :
       {CompressionMethod::quantization(3), CompressionMethod::quantization(16),
        CompressionMethod::signsgd()}) {
    const Affine a = as_affine(m);
    const std::vector<float> x = t::normal_values(5000, 3);
    const CompressedGradient g = a.codec->compress(x.data(), x.size(), {});
    const unsigned bits = m.kind() == zring::CompressionKind::signsgd ? 1 : m.bits();
    const std::size_t header = (m.kind() == zring::CompressionKind::signsgd ? 4 : 8) * 2;
    std::vector<std::uint32_t> sent(x.size());
    codec::unpack_bits(g.payload.data() + header, x.size(), bits, sent.data());
    std::vector<std::uint32_t> codes(x.size());
    std::vector<float> values(x.size());
    for (std::size_t b = 0; b < 2; ++b) {
      const std::size_t first = b * 4096, len = std::min<std::size_t>(4096, x.size() - first);
      float stats[2];
      a.codec->block_stats(x.data() + first, len, stats);
      const codec::AffineGrid grid = a.codec->grid(stats, len, 1);
      a.codec->encode_codes(x.data() + first, len, grid, codes.data() + first);
      for (std::size_t i = first; i < first + len; ++i)
        values[i] = codec::affine_value(grid, codes[i]);
    }
    BOOST_TEST((codes == sent), m.to_string());
    for (std::size_t i = 0; i < x.size(); ++i)
      BOOST_REQUIRE(std::fabs(values[i] - g.values[i]) <= 1e-6f * (1 + std::fabs(values[i])));
  }
}

BOOST_AUTO_TEST_CASE(codes_on_a_shared_grid_sum_to_the_sum_of_values) {
  // Two ranks agree one grid from their combined statistics; each encodes on
  // it; the ring adds the codes as integers. Decoding the sum must equal the
  // sum of what each rank's codes decode to.
  const Affine q = as_affine(CompressionMethod::quantization(6));
  const std::vector<float> a = t::normal_values(4096, 1), b = t::normal_values(4096, 2, 2.0f);
  float sa[2], sb[2];
  q.codec->block_stats(a.data(), a.size(), sa);
  q.codec->block_stats(b.data(), b.size(), sb);
  q.codec->combine_stats(sa, sb);
  const codec::AffineGrid grid = q.codec->grid(sa, 4096, 2);
  std::vector<std::uint32_t> ca(4096), cb(4096);
  q.codec->encode_codes(a.data(), a.size(), grid, ca.data());
  q.codec->encode_codes(b.data(), b.size(), grid, cb.data());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < 4096; ++i) {
    const double from_sum = 2.0 * grid.offset + static_cast<double>(ca[i] + cb[i]) * grid.step;
    const double sum =
        static_cast<double>(codec::affine_value(grid, ca[i])) + codec::affine_value(grid, cb[i]);
    bad += std::fabs(from_sum - sum) <= 1e-5 ? 0 : 1;
    // Each rank is still within half a step on the shared (wider) grid.
    bad += std::fabs(codec::affine_value(grid, ca[i]) - a[i]) <= grid.step * 0.51f ? 0 : 1;
    bad += std::fabs(codec::affine_value(grid, cb[i]) - b[i]) <= grid.step * 0.51f ? 0 : 1;
  }
  BOOST_TEST(bad == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
