// half.cpp - float32 <-> IEEE binary16 and bfloat16, round to nearest even.
//
// Written as straight-line integer and float arithmetic, so that every host
// rounds identically. Each conversion computes the result of every case and
// picks one with a bit mask: a ?: would let the compiler move the float
// arithmetic into a branch, which it then may not vectorise (float
// operations are assumed to trap).
//
// The bulk loops are what the ring runs on every hop of fp16 and bf16. On
// x86-64 hosts with F16C and AVX2 they convert eight values an instruction
// (vcvtps2ph rounds to nearest even; bf16 is integer arithmetic), some 50x
// faster than the portable loops, with the same bits for every float and
// every 16-bit pattern (tests/codec/test_half.cpp compares them), so a ring
// of hosts with and without it still agrees.
#include <bit>
#include <cstdint>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

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

namespace {

ZRING_VECTOR_CLONES void floats_to_halves_portable(const float* x, std::size_t n,
                                                   std::uint16_t* out) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = to_half(x[i]);
}

ZRING_VECTOR_CLONES void halves_to_floats_portable(const std::uint16_t* h, std::size_t n,
                                                   float* out) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = from_half(h[i]);
}

ZRING_VECTOR_CLONES void floats_to_bf16s_portable(const float* x, std::size_t n,
                                                  std::uint16_t* out) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = to_bf16(x[i]);
}

ZRING_VECTOR_CLONES void bf16s_to_floats_portable(const std::uint16_t* h, std::size_t n,
                                                  float* out) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = from_bf16(h[i]);
}

#ifdef ZRING_AVX2_DISPATCH
// F16C is CPUID leaf 1, ECX bit 29 (clang's __builtin_cpu_supports does
// not know it); AVX2 says that the OS keeps the ymm registers.
bool have_f16c() noexcept {
  static const bool yes = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return have_avx2() && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
  }();
  return yes;
}

// vcvtps2ph with round to nearest even; a nan keeps its top payload bits
// and becomes quiet, as in to_half. (zringd never sets MXCSR's DAZ, so
// float subnormals convert as values.)
__attribute__((target("avx2,f16c"))) void floats_to_halves_f16c(const float* x, std::size_t n,
                                                                std::uint16_t* out) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h =
        _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  for (; i < n; ++i) out[i] = to_half(x[i]);
}

__attribute__((target("avx2,f16c"))) void halves_to_floats_f16c(const std::uint16_t* h,
                                                                std::size_t n,
                                                                float* out) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i words = _mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(words));
  }
  for (; i < n; ++i) out[i] = from_half(h[i]);
}

// to_bf16 eight at a time: round the low 16 bits to nearest even, a nan
// made quiet instead.
__attribute__((target("avx2"))) void floats_to_bf16s_avx2(const float* x, std::size_t n,
                                                          std::uint16_t* out) noexcept {
  const __m256i bias = _mm256_set1_epi32(0x7fff);
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i inf = _mm256_set1_epi32(static_cast<int>(kFloatInf));
  const __m256i quiet = _mm256_set1_epi32(0x0040);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(v, 16), one);
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(v, bias), odd), 16);
    const __m256i quiet_nan = _mm256_or_si256(_mm256_srli_epi32(v, 16), quiet);
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(v, abs_mask), inf);
    const __m256i w = _mm256_blendv_epi8(rounded, quiet_nan, is_nan);
    // Each 32-bit lane holds its 16-bit result in its low half: pack them
    // (unsigned saturation never bites: they are below 2^16).
    const __m256i packed = _mm256_packus_epi32(w, w);  // per 128-bit lane
    const __m256i ordered = _mm256_permute4x64_epi64(packed, 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_castsi256_si128(ordered));
  }
  for (; i < n; ++i) out[i] = to_bf16(x[i]);
}

__attribute__((target("avx2"))) void bf16s_to_floats_avx2(const std::uint16_t* h, std::size_t n,
                                                          float* out) noexcept {
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i inf = _mm256_set1_epi32(static_cast<int>(kFloatInf));
  const __m256i quiet = _mm256_set1_epi32(0x00400000);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i words = _mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i));
    const __m256i v = _mm256_slli_epi32(_mm256_cvtepu16_epi32(words), 16);
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(v, abs_mask), inf);
    const __m256i f = _mm256_or_si256(v, _mm256_and_si256(is_nan, quiet));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), f);
  }
  for (; i < n; ++i) out[i] = from_bf16(h[i]);
}
#endif

}  // namespace

void floats_to_halves(const float* x, std::size_t n, std::uint16_t* out) noexcept {
#ifdef ZRING_AVX2_DISPATCH
  if (have_f16c()) return floats_to_halves_f16c(x, n, out);
#endif
  floats_to_halves_portable(x, n, out);
}

void halves_to_floats(const std::uint16_t* h, std::size_t n, float* out) noexcept {
#ifdef ZRING_AVX2_DISPATCH
  if (have_f16c()) return halves_to_floats_f16c(h, n, out);
#endif
  halves_to_floats_portable(h, n, out);
}

void floats_to_bf16s(const float* x, std::size_t n, std::uint16_t* out) noexcept {
#ifdef ZRING_AVX2_DISPATCH
  if (have_avx2()) return floats_to_bf16s_avx2(x, n, out);
#endif
  floats_to_bf16s_portable(x, n, out);
}

void bf16s_to_floats(const std::uint16_t* h, std::size_t n, float* out) noexcept {
#ifdef ZRING_AVX2_DISPATCH
  if (have_avx2()) return bf16s_to_floats_avx2(h, n, out);
#endif
  bf16s_to_floats_portable(h, n, out);
}

}  // namespace zring::codec
