// test_quantization.cpp - b-bit affine codes: the grid in the payload, and
// every value within step/2 of its input.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "codec/codec.hpp"
#include "codec_fixtures.hpp"

using zring::CompressedGradient;
using zring::CompressionMethod;
namespace codec = zring::codec;
namespace t = zring::codec::test;

namespace {

float f32_at(const std::vector<std::uint8_t>& p, std::size_t offset) {
  std::uint32_t bits = 0;
  for (int i = 3; i >= 0; --i) bits = bits << 8 | p[offset + static_cast<std::size_t>(i)];
  return std::bit_cast<float>(bits);
}

CompressedGradient quantize(unsigned bits, const std::vector<float>& x) {
  return codec::make_codec(CompressionMethod::quantization(bits))->compress(x.data(), x.size(), {});
}

}  // namespace

BOOST_AUTO_TEST_SUITE(quantization)

BOOST_AUTO_TEST_CASE(error_is_at_most_half_a_step) {
  for (unsigned bits : {1u, 2u, 3u, 4u, 5u, 8u, 12u, 16u}) {
    for (float scale : {1e-3f, 1.0f, 1e4f}) {
      std::vector<float> x = t::normal_values(10000, bits, scale);
      for (std::size_t i = 0; i < x.size(); i += 3) x[i] += 3.0f * scale;  // off-centre
      const CompressedGradient g = quantize(bits, x);
      const double max_code = std::ldexp(1.0, static_cast<int>(bits)) - 1.0;
      std::size_t bad = 0;
      for (std::size_t b = 0; b * 4096 < x.size(); ++b) {
        const auto first = x.begin() + static_cast<std::ptrdiff_t>(b * 4096);
        const auto last =
            x.begin() + static_cast<std::ptrdiff_t>(std::min(x.size(), (b + 1) * 4096));
        const auto [lo, hi] = std::minmax_element(first, last);
        const double step = (static_cast<double>(*hi) - *lo) / max_code;
        // The grid in the header: offset = block min, step = range / max code.
        bad += f32_at(g.payload, 8 * b) == *lo ? 0 : 1;
        bad += f32_at(g.payload, 8 * b + 4) == static_cast<float>(step) ? 0 : 1;
        // Half a step, plus a little for float arithmetic on the grid.
        const double magnitude = std::max(std::fabs(*lo), std::fabs(*hi));
        const double tolerance =
            step * 0.5 * (1.0 + 1.0 / 64) + 4 * magnitude * std::numeric_limits<float>::epsilon();
        for (auto it = first; it != last; ++it) {
          const std::size_t i = static_cast<std::size_t>(it - x.begin());
          bad += std::fabs(static_cast<double>(g.values[i]) - x[i]) <= tolerance ? 0 : 1;
        }
      }
      BOOST_TEST(bad == 0u, "bits " << bits << " scale " << scale);
    }
  }
}

BOOST_AUTO_TEST_CASE(rounds_to_the_nearest_code) {
  // On the grid 0, 1, 2, 3 (min 0, max 3, two bits) values snap to nearest.
  const std::vector<float> x = {0.0f, 3.0f, 0.4f, 0.6f, 1.4f, 1.6f, 2.49f, 2.51f};
  const CompressedGradient g = quantize(2, x);
  BOOST_TEST(g.values == (std::vector<float>{0, 3, 0, 1, 1, 2, 2, 3}),
             boost::test_tools::per_element());
  // Codes 0 3 0 1 1 2 2 3, two bits each, LSB first.
  BOOST_TEST(g.payload.size() == 8u + 2u);
  BOOST_TEST(g.payload[8] == 0x4cu);  // 00 11 00 01 -> 0b01001100
  BOOST_TEST(g.payload[9] == 0xe9u);  // codes 1 2 2 3 -> 0b11101001
}

BOOST_AUTO_TEST_CASE(all_zero_and_all_equal_blocks_are_exact) {
  for (unsigned bits : {1u, 4u, 8u, 16u}) {
    for (float v : {0.0f, 3.7f, -1e-20f, 5e30f}) {
      const std::vector<float> x(4097, v);
      const CompressedGradient g = quantize(bits, x);
      BOOST_TEST((g.values == x), "bits " << bits << " value " << v);
      BOOST_TEST(f32_at(g.payload, 4) == 0.0f);  // step 0
    }
  }
  const std::vector<float> one = {-2.5f};
  BOOST_TEST(quantize(3, one).values[0] == -2.5f);
}

BOOST_AUTO_TEST_CASE(the_extremes_of_a_block_are_kept_well) {
  const std::vector<float> x = t::normal_values(4096, 12);
  const CompressedGradient g = quantize(8, x);
  const auto lo = std::min_element(x.begin(), x.end()) - x.begin();
  BOOST_TEST(g.values[static_cast<std::size_t>(lo)] ==
             x[static_cast<std::size_t>(lo)]);  // code 0 is the min
}

BOOST_AUTO_TEST_CASE(a_range_wider_than_float_stays_finite) {
  const std::vector<float> x = {-3e38f, 3e38f, 0.0f, 1.0f};
  const CompressedGradient g = quantize(4, x);
  for (float v : g.values) BOOST_TEST(std::isfinite(v));
}

BOOST_AUTO_TEST_SUITE_END()
