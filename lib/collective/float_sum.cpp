#include "collective/float_sum.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "codec/vector_clones.hpp"

namespace zring::collective {
namespace {

// x / d and x * (1 / d) are the same real number when 1 / d is exact, so
// both round to the same float: a power of two may multiply.
bool exact_inverse(std::size_t divisor) noexcept { return std::has_single_bit(divisor); }

ZRING_VECTOR_CLONES void scale(float* __restrict r, std::size_t n, float by) noexcept {
  for (std::size_t i = 0; i < n; ++i) r[i] *= by;
}
ZRING_VECTOR_CLONES void divide_by(float* __restrict r, std::size_t n, float d) noexcept {
  for (std::size_t i = 0; i < n; ++i) r[i] /= d;
}

ZRING_VECTOR_CLONES void add_scale(float* __restrict sum, const float* mine, float* out,
                                   std::size_t n, float by) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    const float s = sum[i] + mine[i];
    sum[i] = s;
    out[i] = s * by;
  }
}
ZRING_VECTOR_CLONES void add_divide(float* __restrict sum, const float* mine, float* out,
                                    std::size_t n, float d) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    const float s = sum[i] + mine[i];
    sum[i] = s;
    out[i] = s / d;
  }
}

ZRING_VECTOR_CLONES void wire_scale(const std::uint8_t* __restrict in, float* __restrict out,
                                    std::size_t n, float by) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, in + 4 * i, 4);
    out[i] = v * by;
  }
}
ZRING_VECTOR_CLONES void wire_divide(const std::uint8_t* __restrict in, float* __restrict out,
                                     std::size_t n, float d) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, in + 4 * i, 4);
    out[i] = v / d;
  }
}

#ifdef ZRING_AVX2_DISPATCH
// One float op, the same in the scalar head/tail and the vector body.
template <bool Multiply>
inline float apply(float v, float by) noexcept {
  return Multiply ? v * by : v / by;
}
template <bool Multiply>
__attribute__((target("avx2"))) inline __m256 apply(__m256 v, __m256 by) noexcept {
  return Multiply ? _mm256_mul_ps(v, by) : _mm256_div_ps(v, by);
}

// Elements before out + i is 32-byte aligned (out is float aligned, so at
// most 7).
inline std::size_t head(const float* out, std::size_t n) noexcept {
  const std::size_t misaligned = (reinterpret_cast<std::uintptr_t>(out) % 32) / 4;
  return std::min(n, misaligned == 0 ? 0 : 8 - misaligned);
}

template <bool Multiply>
__attribute__((target("avx2"))) void wire_stream(const std::uint8_t* in, float* out, std::size_t n,
                                                 float by) noexcept {
  auto one = [&](std::size_t i) {
    float v;
    std::memcpy(&v, in + 4 * i, 4);
    out[i] = apply<Multiply>(v, by);
  };
  std::size_t i = 0;
  for (const std::size_t h = head(out, n); i < h; ++i) one(i);
  const __m256 vby = _mm256_set1_ps(by);
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(reinterpret_cast<const float*>(in + 4 * i));
    _mm256_stream_ps(out + i, apply<Multiply>(v, vby));
  }
  for (; i < n; ++i) one(i);
  _mm_sfence();  // ordered before whatever tells another process the result is there
}

__attribute__((target("avx2"))) void copy_stream(float* out, const float* in,
                                                 std::size_t n) noexcept {
  std::size_t i = head(out, n);
  std::memcpy(out, in, i * sizeof(float));
  for (; i + 8 <= n; i += 8) _mm256_stream_ps(out + i, _mm256_loadu_ps(in + i));
  std::memcpy(out + i, in + i, (n - i) * sizeof(float));
  _mm_sfence();  // ordered before whatever tells another process the values are there
}

template <bool Multiply>
__attribute__((target("avx2"))) void add_stream(float* sum, const float* mine, float* out,
                                                std::size_t n, float by) noexcept {
  auto one = [&](std::size_t i) {
    const float s = sum[i] + mine[i];
    sum[i] = s;
    out[i] = apply<Multiply>(s, by);
  };
  std::size_t i = 0;
  for (const std::size_t h = head(out, n); i < h; ++i) one(i);
  const __m256 vby = _mm256_set1_ps(by);
  for (; i + 8 <= n; i += 8) {
    const __m256 s = _mm256_add_ps(_mm256_loadu_ps(sum + i), _mm256_loadu_ps(mine + i));
    _mm256_storeu_ps(sum + i, s);
    _mm256_stream_ps(out + i, apply<Multiply>(s, vby));
  }
  for (; i < n; ++i) one(i);
  _mm_sfence();
}
#endif

}  // namespace

void divide(float* result, std::size_t n, std::size_t divisor) noexcept {
  if (divisor == 1) return;
  if (exact_inverse(divisor))
    scale(result, n, 1.0f / static_cast<float>(divisor));
  else
    divide_by(result, n, static_cast<float>(divisor));
}

ZRING_VECTOR_CLONES void add_into(float* __restrict sum, const float* __restrict mine,
                                  std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) sum[i] += mine[i];
}

void add_and_average(float* sum, const float* mine, float* out, std::size_t n,
                     std::size_t divisor) noexcept {
  if (exact_inverse(divisor))
    add_scale(sum, mine, out, n, 1.0f / static_cast<float>(divisor));
  else
    add_divide(sum, mine, out, n, static_cast<float>(divisor));
}

void average_from_wire(const std::uint8_t* in, float* out, std::size_t n,
                       std::size_t divisor) noexcept {
  if (exact_inverse(divisor))
    wire_scale(in, out, n, 1.0f / static_cast<float>(divisor));
  else
    wire_divide(in, out, n, static_cast<float>(divisor));
}

void average_from_wire_streamed(const std::uint8_t* in, float* out, std::size_t n,
                                std::size_t divisor) noexcept {
#ifdef ZRING_AVX2_DISPATCH
  if (codec::have_avx2()) {
    if (exact_inverse(divisor))
      wire_stream<true>(in, out, n, 1.0f / static_cast<float>(divisor));
    else
      wire_stream<false>(in, out, n, static_cast<float>(divisor));
    return;
  }
#endif
  average_from_wire(in, out, n, divisor);
}

void add_and_average_streamed(float* sum, const float* mine, float* out, std::size_t n,
                              std::size_t divisor) noexcept {
#ifdef ZRING_AVX2_DISPATCH
  if (codec::have_avx2()) {
    if (exact_inverse(divisor))
      add_stream<true>(sum, mine, out, n, 1.0f / static_cast<float>(divisor));
    else
      add_stream<false>(sum, mine, out, n, static_cast<float>(divisor));
    return;
  }
#endif
  add_and_average(sum, mine, out, n, divisor);
}

void copy_streamed(float* out, const float* in, std::size_t n) noexcept {
#ifdef ZRING_AVX2_DISPATCH
  if (codec::have_avx2()) {
    copy_stream(out, in, n);
    return;
  }
#endif
  std::memcpy(out, in, n * sizeof(float));
}

}  // namespace zring::collective
