// half.cpp - float32 <-> IEEE binary16 and bfloat16, round to nearest even.
//
// Written as straight-line integer and float arithmetic, so the bulk loops
// vectorise with plain SSE2/NEON (no F16C needed) and every host rounds
// identically. Each conversion computes the result of every case and picks
// one with a bit mask: a ?: would let the compiler move the float
// arithmetic into a branch, which it then may not vectorise (float
// operations are assumed to trap).
#include <bit>
#include <cstdint>

#include "codec/codec.hpp"
#include "codec/vector_clones.hpp"

namespace zring::codec {
namespace {

inline std::uint32_t bits_of(float f) noexcept { return std::bit_cast<std::uint32_t>(f); }
inline float float_of(std::uint32_t u) noexcept { return std::bit_cast<float>(u); }

// All ones when cond holds, else zero.
inline std::uint32_t mask_if(bool cond) noexcept { return 0u - static_cast<std::uint32_t>(cond); }
// if_true where mask is set, if_false elsewhere.
inline std::uint32_t pick(std::uint32_t mask, std::uint32_t if_true,
                          std::uint32_t if_false) noexcept {
  return (if_true & mask) | (if_false & ~mask);
}

// |f| bit patterns that bound the half cases.
constexpr std::uint32_t kFloatInf = 0x7f800000u;
constexpr std::uint32_t kHalfMinNormal = 0x38800000u;  // 2^-14
constexpr std::uint32_t kHalfOverflow = 0x477ff000u;   // 65520: rounds (to even) up to 2^16

inline std::uint16_t to_half(float f) noexcept {
  const std::uint32_t x = bits_of(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t a = x & 0x7fffffffu;

  // Normal halves: rebias the exponent (127 -> 15) and round the 13 dropped
  // mantissa bits to nearest even; a carry out of the mantissa correctly
  // bumps the exponent.
  const std::uint32_t odd = (a >> 13) & 1u;
  const std::uint32_t normal = (a - ((127u - 15u) << 23) + 0xfffu + odd) >> 13;
  // Subnormal halves (|f| < 2^-14): adding 0.5 puts |f| where the float's
  // ulp is 2^-24, the half subnormal step, so the FPU does the round to
  // nearest even; the mantissa bits are then the half's bits (2^-14 itself
  // comes out as the smallest normal, which is also right).
  const std::uint32_t subnormal = bits_of(float_of(a) + 0.5f) - 0x3f000000u;
  // inf stays inf; nan keeps its top payload bits and is made quiet.
  const std::uint32_t nan_bits = (0x0200u | ((a >> 13) & 0x03ffu)) & mask_if(a > kFloatInf);
  const std::uint32_t special = 0x7c00u | nan_bits;

  std::uint32_t h = pick(mask_if(a < kHalfMinNormal), subnormal, normal);
  h = pick(mask_if(a >= kHalfOverflow), special, h);
  return static_cast<std::uint16_t>(sign | h);
}

inline float from_half(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t em = h & 0x7fffu;
  const std::uint32_t normal = (em << 13) + ((127u - 15u) << 23);
  // Subnormals: the mantissa counts units of 2^-24 exactly.
  const std::uint32_t subnormal =
      bits_of(static_cast<float>(static_cast<std::int32_t>(em)) * 0x1p-24f);
  // inf and nan: all-ones exponent; a nan is made quiet.
  const std::uint32_t quiet = 0x00400000u & mask_if(em > 0x7c00u);
  const std::uint32_t special = 0x7f800000u | (em & 0x03ffu) << 13 | quiet;

  std::uint32_t f = pick(mask_if(em < 0x0400u), subnormal, normal);
  f = pick(mask_if(em >= 0x7c00u), special, f);
  return float_of(sign | f);
}

inline std::uint16_t to_bf16(float f) noexcept {
  const std::uint32_t x = bits_of(f);
  // Round the low 16 bits to nearest even; a carry may overflow into inf,
  // which is the right answer for large finite values.
  const std::uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  const std::uint32_t quiet_nan = (x >> 16) | 0x0040u;
  const bool is_nan = (x & 0x7fffffffu) > kFloatInf;
  return static_cast<std::uint16_t>(is_nan ? quiet_nan : rounded);
}

inline float from_bf16(std::uint16_t h) noexcept {
  const std::uint32_t x = static_cast<std::uint32_t>(h) << 16;
  const bool is_nan = (x & 0x7fffffffu) > kFloatInf;
  return float_of(is_nan ? x | 0x00400000u : x);
}

}  // namespace

std::uint16_t float_to_half(float f) noexcept { return to_half(f); }
float half_to_float(std::uint16_t h) noexcept { return from_half(h); }
std::uint16_t float_to_bf16(float f) noexcept { return to_bf16(f); }
float bf16_to_float(std::uint16_t h) noexcept { return from_bf16(h); }

ZRING_VECTOR_CLONES void floats_to_halves(const float* x, std::size_t n,
                                          std::uint16_t* out) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = to_half(x[i]);
}

ZRING_VECTOR_CLONES void halves_to_floats(const std::uint16_t* h, std::size_t n,
                                          float* out) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = from_half(h[i]);
}

ZRING_VECTOR_CLONES void floats_to_bf16s(const float* x, std::size_t n,
                                         std::uint16_t* out) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = to_bf16(x[i]);
}

ZRING_VECTOR_CLONES void bf16s_to_floats(const std::uint16_t* h, std::size_t n,
                                         float* out) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = from_bf16(h[i]);
}

}  // namespace zring::codec
