// test_dense.cpp - none, fp16 and bf16: exact layouts and error bounds.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "codec/codec.hpp"
#include "codec_fixtures.hpp"

using zring::CompressedGradient;
using zring::CompressionMethod;
namespace codec = zring::codec;
namespace t = zring::codec::test;

namespace {

std::uint16_t word_at(const std::vector<std::uint8_t>& p, std::size_t i) {
  return static_cast<std::uint16_t>(p[2 * i] | p[2 * i + 1] << 8);
}

// Values across many magnitudes, including half subnormals and overflow.
std::vector<float> wide_values() {
  std::vector<float> x = t::normal_values(20000, 4);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::ldexp(x[i], static_cast<int>(i % 45) - 27);
  return x;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(dense)

BOOST_AUTO_TEST_CASE(none_is_exact_little_endian_float32) {
  const auto c = codec::make_codec(CompressionMethod::none());
  std::vector<float> x = t::normal_values(1000, 1);
  x[3] = -0.0f;
  const CompressedGradient g = c->compress(x.data(), x.size(), {});
  BOOST_TEST(t::same_bits(g.values, x));
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::uint32_t bits = static_cast<std::uint32_t>(g.payload[4 * i]) |
                               g.payload[4 * i + 1] << 8 | g.payload[4 * i + 2] << 16 |
                               static_cast<std::uint32_t>(g.payload[4 * i + 3]) << 24;
    BOOST_REQUIRE(bits == std::bit_cast<std::uint32_t>(x[i]));
  }
}

BOOST_AUTO_TEST_CASE(fp16_payload_is_the_halves_and_error_is_bounded) {
  const auto c = codec::make_codec(CompressionMethod::fp16());
  const std::vector<float> x = wide_values();
  const CompressedGradient g = c->compress(x.data(), x.size(), {});
  std::size_t bad = 0, overflowed = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    bad += word_at(g.payload, i) == codec::float_to_half(x[i]) ? 0 : 1;
    const double a = std::fabs(x[i]), err = std::fabs(static_cast<double>(g.values[i]) - x[i]);
    if (a >= 65520.0) {
      overflowed += 1;
      bad += std::isinf(g.values[i]) && std::signbit(g.values[i]) == std::signbit(x[i]) ? 0 : 1;
    } else if (a >= std::ldexp(1.0, -14)) {
      bad += err <= std::ldexp(a, -11) ? 0 : 1;  // normal halves: relative 2^-11
    } else {
      bad += err <= std::ldexp(1.0, -25) ? 0 : 1;  // subnormal halves: half a step of 2^-24
    }
  }
  BOOST_TEST(bad == 0u);
  BOOST_TEST(overflowed > 0u);
}

BOOST_AUTO_TEST_CASE(bf16_payload_is_the_bf16s_and_error_is_bounded) {
  const auto c = codec::make_codec(CompressionMethod::bf16());
  std::vector<float> x = wide_values();
  x.push_back(std::numeric_limits<float>::min());
  x.push_back(1e38f);
  const CompressedGradient g = c->compress(x.data(), x.size(), {});
  std::size_t bad = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    bad += word_at(g.payload, i) == codec::float_to_bf16(x[i]) ? 0 : 1;
    const double a = std::fabs(x[i]), err = std::fabs(static_cast<double>(g.values[i]) - x[i]);
    bad += err <= std::ldexp(a, -8) ? 0 : 1;
  }
  BOOST_TEST(bad == 0u);
}

BOOST_AUTO_TEST_CASE(dense_decoders_need_the_exact_length) {
  for (const CompressionMethod& m :
       {CompressionMethod::none(), CompressionMethod::fp16(), CompressionMethod::bf16()}) {
    const auto c = codec::make_codec(m);
    const std::vector<float> x = t::normal_values(50, 2);
    const CompressedGradient g = c->compress(x.data(), x.size(), {});
    BOOST_TEST(t::rejects(*c, g.payload, 49), m.to_string());
    BOOST_TEST(t::rejects(*c, g.payload, 51), m.to_string());
    BOOST_TEST(!t::rejects(*c, g.payload, 50), m.to_string());
  }
}

BOOST_AUTO_TEST_SUITE_END()
