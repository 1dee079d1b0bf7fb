// test_signsgd.cpp - one sign bit per element and the block's mean |x|.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "codec/codec.hpp"
#include "codec_fixtures.hpp"

using zring::CompressedGradient;
using zring::CompressionMethod;
namespace codec = zring::codec;
namespace t = zring::codec::test;

namespace {

CompressedGradient sign(const std::vector<float>& x) {
  return codec::make_codec(CompressionMethod::signsgd())->compress(x.data(), x.size(), {});
}

}  // namespace

BOOST_AUTO_TEST_SUITE(signsgd)

BOOST_AUTO_TEST_CASE(values_are_plus_or_minus_the_block_mean_magnitude) {
  std::vector<float> x = t::normal_values(10000, 21, 3.0f);
  x[5] = -0.0f;
  x[6] = 0.0f;
  x[7] = -1e-30f;  // tiny negative: must stay negative
  const CompressedGradient g = sign(x);
  std::size_t bad = 0;
  for (std::size_t b = 0; b * 4096 < x.size(); ++b) {
    const std::size_t first = b * 4096, last = std::min(x.size(), first + 4096);
    double sum = 0.0;
    for (std::size_t i = first; i < last; ++i) sum += std::fabs(x[i]);
    const double mean = sum / static_cast<double>(last - first);
    for (std::size_t i = first; i < last; ++i) {
      const double expected = x[i] >= 0.0f ? mean : -mean;
      bad += std::fabs(g.values[i] - expected) <= 1e-6 * mean ? 0 : 1;
    }
  }
  BOOST_TEST(bad == 0u);
  BOOST_TEST(g.values[5] > 0.0f);
  BOOST_TEST(g.values[7] < 0.0f);
}

BOOST_AUTO_TEST_CASE(layout_is_scales_then_sign_bits) {
  const std::vector<float> x = {1.0f, -2.0f, 3.0f, -4.0f, 5.0f, 6.0f, -7.0f, 8.0f, -9.0f};
  const CompressedGradient g = sign(x);
  BOOST_TEST(g.payload.size() == 4u + 2u);
  float scale = 0.0f;
  std::memcpy(&scale, g.payload.data(), 4);
  BOOST_TEST(scale == 5.0f);          // mean |x| = 45 / 9
  BOOST_TEST(g.payload[4] == 0xb5u);  // + - + - + + - +  -> 1 0 1 0 1 1 0 1, LSB first
  BOOST_TEST(g.payload[5] == 0x00u);  // -9 -> 0
  BOOST_TEST(g.values == (std::vector<float>{5, -5, 5, -5, 5, 5, -5, 5, -5}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(all_zero_and_all_equal_blocks) {
  const std::vector<float> zeros(4097, 0.0f);
  for (float v : sign(zeros).values) BOOST_REQUIRE(v == 0.0f);
  const std::vector<float> equal(4097, -2.5f);
  BOOST_TEST((sign(equal).values == equal));
  const std::vector<float> one = {0.75f};
  BOOST_TEST(sign(one).values[0] == 0.75f);
}

BOOST_AUTO_TEST_SUITE_END()
