// test_half.cpp - float32 <-> binary16 / bfloat16 conversions, checked
// exhaustively where the domain is 16 bits and against an independent
// round-to-nearest-even reference elsewhere.
#include <algorithm>
#include <bit>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "codec/codec.hpp"

namespace codec = zring::codec;

namespace {

bool half_is_nan(std::uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x03ffu) != 0; }
bool bf16_is_nan(std::uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x007fu) != 0; }

// The value of a half from its fields, in double.
double half_value(std::uint16_t h) {
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  const double sign = (h & 0x8000u) ? -1.0 : 1.0;
  if (exp == 0x1f) return mant ? std::nan("") : sign * INFINITY;
  if (exp == 0) return sign * std::ldexp(mant, -24);
  return sign * std::ldexp(1024 + mant, exp - 25);
}

// Nearest half to f, ties to the even bit pattern, by searching the table of
// every non-negative finite half. Values at or past 65520 (halfway to the
// next power of two) overflow to inf.
std::uint16_t reference_half(float f) {
  static const std::vector<double> table = [] {
    std::vector<double> t;
    for (std::uint16_t h = 0; h <= 0x7bff; ++h) t.push_back(half_value(h));
    return t;
  }();
  if (std::isnan(f)) return 0x7e00;
  const std::uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(f));
  if (a >= 65520.0) return sign | 0x7c00;
  const auto hi = std::lower_bound(table.begin(), table.end(), a);
  if (hi == table.begin()) return sign;
  const std::uint16_t upper = static_cast<std::uint16_t>(hi - table.begin());
  if (hi == table.end()) return sign | 0x7bff;
  const std::uint16_t lower = upper - 1;
  const double below = a - table[lower], above = table[upper] - a;
  if (above < below || (above == below && upper % 2 == 0)) return sign | upper;
  return sign | lower;
}

// Nearest bfloat16 to f, ties to even; max + half an ulp overflows to inf.
std::uint16_t reference_bf16(float f) {
  if (std::isnan(f)) return 0x7fc0;
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t lower = static_cast<std::uint16_t>(x >> 16);
  const double low_value = std::bit_cast<float>(static_cast<std::uint32_t>(lower) << 16);
  const std::uint16_t upper = lower + 1;  // one bf16 ulp away from zero (may be inf)
  const double up_value = (upper & 0x7fffu) == 0x7f80u
                              ? std::copysign(std::ldexp(1.0, 128), f)
                              : std::bit_cast<float>(static_cast<std::uint32_t>(upper) << 16);
  const double below = std::fabs(f - low_value), above = std::fabs(up_value - f);
  if (above < below || (above == below && upper % 2 == 0)) return upper;
  return lower;
}

std::vector<float> awkward_floats() {
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.0f,
                          65504.0f,
                          65519.99f,
                          65520.0f,
                          -65520.0f,
                          65536.0f,
                          1e10f,
                          std::ldexp(1.0f, -14),
                          std::ldexp(1.0f, -24),
                          std::ldexp(1.0f, -25),
                          std::ldexp(3.0f, -25),
                          std::ldexp(5.0f, -25),
                          std::ldexp(1.0f, -26),
                          std::ldexp(1023.5f, -24),
                          std::ldexp(2047.0f, -25),
                          1.0f + std::ldexp(1.0f, -11),
                          1.0f + std::ldexp(3.0f, -11),
                          1.0f + std::ldexp(1.0f, -8),
                          1.0f + std::ldexp(3.0f, -8),
                          std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::denorm_min(),
                          std::numeric_limits<float>::min(),
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          3.3895314e38f};
  std::mt19937 rng(3);
  for (int i = 0; i < 300000; ++i)
    v.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));
  for (int i = 0; i < 100000; ++i) {  // dense around the half range
    v.push_back(
        std::ldexp(static_cast<float>(rng() % 0x1000000), static_cast<int>(rng() % 48) - 50));
  }
  return v;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(half)

BOOST_AUTO_TEST_CASE(every_half_widens_exactly_and_narrows_back) {
  std::vector<std::uint16_t> all(65536);
  for (std::uint32_t h = 0; h < 65536; ++h) all[h] = static_cast<std::uint16_t>(h);
  std::vector<float> bulk(65536);
  codec::halves_to_floats(all.data(), all.size(), bulk.data());
  std::vector<std::uint16_t> back(65536);
  codec::floats_to_halves(bulk.data(), bulk.size(), back.data());
  std::size_t wrong = 0;
  for (std::uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<std::uint16_t>(i);
    const float f = codec::half_to_float(h);
    const bool ok =
        std::bit_cast<std::uint32_t>(f) == std::bit_cast<std::uint32_t>(bulk[i]) &&
        (half_is_nan(h)
             ? std::isnan(f) && half_is_nan(codec::float_to_half(f)) && half_is_nan(back[i])
             : static_cast<double>(f) == half_value(h) && std::signbit(f) == ((h & 0x8000u) != 0) &&
                   codec::float_to_half(f) == h && back[i] == h);
    wrong += ok ? 0 : 1;
  }
  BOOST_TEST(wrong == 0u);
}

BOOST_AUTO_TEST_CASE(float_to_half_rounds_to_nearest_even) {
  const std::vector<float> v = awkward_floats();
  std::vector<std::uint16_t> bulk(v.size());
  codec::floats_to_halves(v.data(), v.size(), bulk.data());
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::uint16_t h = codec::float_to_half(v[i]);
    const bool ok = bulk[i] == h && (std::isnan(v[i]) ? half_is_nan(h) : h == reference_half(v[i]));
    if (!ok && wrong++ < 5) BOOST_TEST_MESSAGE("float " << v[i] << " -> half " << h);
  }
  BOOST_TEST(wrong == 0u);
  BOOST_TEST(codec::float_to_half(65519.99f) == 0x7bffu);
  BOOST_TEST(codec::float_to_half(65520.0f) == 0x7c00u);
  BOOST_TEST(codec::float_to_half(std::ldexp(1.0f, -25)) == 0x0000u);  // tie -> even (zero)
  BOOST_TEST(codec::float_to_half(std::ldexp(3.0f, -25)) == 0x0002u);  // tie -> even
  BOOST_TEST(codec::float_to_half(-std::numeric_limits<float>::infinity()) == 0xfc00u);
}

BOOST_AUTO_TEST_CASE(half_relative_error_is_at_most_2_to_minus_11) {
  std::mt19937 rng(5);
  double worst = 0.0;
  for (int i = 0; i < 200000; ++i) {
    // Normal half range: 2^-14 .. 65504.
    const float f = std::ldexp(1.0f + static_cast<float>(rng() % 8388608) / 8388608.0f,
                               static_cast<int>(rng() % 30) - 14);
    if (f > 65504.0f) continue;
    const float back = codec::half_to_float(codec::float_to_half(f));
    worst = std::max(worst, std::fabs(static_cast<double>(back) - f) / f);
  }
  BOOST_TEST(worst <= std::ldexp(1.0, -11));
  BOOST_TEST(worst > 0.0);
}

BOOST_AUTO_TEST_CASE(every_bf16_widens_exactly_and_narrows_back) {
  std::size_t wrong = 0;
  for (std::uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<std::uint16_t>(i);
    const float f = codec::bf16_to_float(h);
    const bool ok =
        bf16_is_nan(h) ? std::isnan(f) && bf16_is_nan(codec::float_to_bf16(f))
                       : std::bit_cast<std::uint32_t>(f) == i << 16 && codec::float_to_bf16(f) == h;
    wrong += ok ? 0 : 1;
  }
  BOOST_TEST(wrong == 0u);
}

BOOST_AUTO_TEST_CASE(float_to_bf16_rounds_to_nearest_even) {
  const std::vector<float> v = awkward_floats();
  std::vector<std::uint16_t> bulk(v.size());
  codec::floats_to_bf16s(v.data(), v.size(), bulk.data());
  std::vector<float> widened(v.size());
  codec::bf16s_to_floats(bulk.data(), bulk.size(), widened.data());
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::uint16_t h = codec::float_to_bf16(v[i]);
    const bool ok = bulk[i] == h &&
                    std::bit_cast<std::uint32_t>(widened[i]) ==
                        std::bit_cast<std::uint32_t>(codec::bf16_to_float(h)) &&
                    (std::isnan(v[i]) ? bf16_is_nan(h) : h == reference_bf16(v[i]));
    if (!ok && wrong++ < 5) BOOST_TEST_MESSAGE("float " << v[i] << " -> bf16 " << h);
  }
  BOOST_TEST(wrong == 0u);
  BOOST_TEST(codec::float_to_bf16(std::numeric_limits<float>::max()) ==
             0x7f80u);  // overflow -> inf
}

// The bulk conversions (F16C and AVX2 where the host has them) give the
// single-value functions' bits for every sign, exponent and top mantissa
// bits of a float, each with the low bits that decide the rounding (none,
// the least, just below, at and just above half of a half's or a bf16's
// ulp, all), and for every 16-bit pattern the other way, nans included;
// in batches whose length is not a multiple of eight.
BOOST_AUTO_TEST_CASE(bulk_conversions_give_the_single_value_bits) {
  std::vector<float> v;
  for (std::uint32_t top = 0; top < (1u << 19); ++top) {
    for (const std::uint32_t low : {0x0000u, 0x0001u, 0x0fffu, 0x1000u, 0x1001u, 0x1fffu}) {
      v.push_back(std::bit_cast<float>(top << 13 | low));
      // bf16 drops 16 bits: the same patterns one ulp higher up.
      v.push_back(std::bit_cast<float>((top << 13 & 0xffff0000u) | low << 3 | (low & 1u)));
    }
  }
  v.push_back(1.5f);
  std::vector<std::uint16_t> halves(v.size()), bf16s(v.size());
  codec::floats_to_halves(v.data(), v.size(), halves.data());
  codec::floats_to_bf16s(v.data(), v.size(), bf16s.data());
  std::size_t wrong_half = 0, wrong_bf16 = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (halves[i] != codec::float_to_half(v[i]) && wrong_half++ < 5)
      BOOST_TEST_MESSAGE("float bits " << std::hex << std::bit_cast<std::uint32_t>(v[i])
                                       << " -> half " << halves[i]);
    if (bf16s[i] != codec::float_to_bf16(v[i]) && wrong_bf16++ < 5)
      BOOST_TEST_MESSAGE("float bits " << std::hex << std::bit_cast<std::uint32_t>(v[i])
                                       << " -> bf16 " << bf16s[i]);
  }
  BOOST_TEST(wrong_half == 0u);
  BOOST_TEST(wrong_bf16 == 0u);

  std::vector<std::uint16_t> all(65536 + 3);
  for (std::size_t h = 0; h < all.size(); ++h) all[h] = static_cast<std::uint16_t>(h);
  std::vector<float> from_half(all.size()), from_bf16(all.size());
  codec::halves_to_floats(all.data(), all.size(), from_half.data());
  codec::bf16s_to_floats(all.data(), all.size(), from_bf16.data());
  std::size_t wrong_widened = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const auto bits = [](float f) { return std::bit_cast<std::uint32_t>(f); };
    if (bits(from_half[i]) != bits(codec::half_to_float(all[i])) ||
        bits(from_bf16[i]) != bits(codec::bf16_to_float(all[i])))
      ++wrong_widened;
  }
  BOOST_TEST(wrong_widened == 0u);
}

BOOST_AUTO_TEST_CASE(nan_stays_nan_and_becomes_quiet) {
  const float signaling = std::bit_cast<float>(0x7f800001u);
  const float negative_nan = std::bit_cast<float>(0xffc00000u);
  for (float f : {signaling, negative_nan, std::numeric_limits<float>::quiet_NaN()}) {
    const std::uint16_t h = codec::float_to_half(f);
    BOOST_TEST(half_is_nan(h));
    BOOST_TEST((h & 0x0200u) != 0u);  // quiet bit
    const std::uint16_t b = codec::float_to_bf16(f);
    BOOST_TEST(bf16_is_nan(b));
    BOOST_TEST((b & 0x0040u) != 0u);
  }
  const float from_signaling = codec::half_to_float(0x7c01);
  BOOST_TEST(std::isnan(from_signaling));
  BOOST_TEST((std::bit_cast<std::uint32_t>(from_signaling) & 0x00400000u) != 0u);
  BOOST_TEST(std::isnan(codec::bf16_to_float(0x7f81)));
  BOOST_TEST((std::bit_cast<std::uint32_t>(codec::bf16_to_float(0x7f81)) & 0x00400000u) != 0u);
}

BOOST_AUTO_TEST_SUITE_END()
