#include "collective/float_sum.hpp"

#include <bit>
#include <cstring>

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

}  // namespace

void divide(float* result, std::size_t n, std::size_t divisor) noexcept {
  if (divisor == 1) return;
  if (exact_inverse(divisor)) scale(result, n, 1.0f / static_cast<float>(divisor));
  else divide_by(result, n, static_cast<float>(divisor));
}

ZRING_VECTOR_CLONES void add_into(float* __restrict sum, const float* __restrict mine,
                                  std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) sum[i] += mine[i];
}

void add_and_average(float* sum, const float* mine, float* out, std::size_t n,
                     std::size_t divisor) noexcept {
  if (exact_inverse(divisor)) add_scale(sum, mine, out, n, 1.0f / static_cast<float>(divisor));
  else add_divide(sum, mine, out, n, static_cast<float>(divisor));
}

void average_from_wire(const std::uint8_t* in, float* out, std::size_t n,
                       std::size_t divisor) noexcept {
  if (exact_inverse(divisor)) wire_scale(in, out, n, 1.0f / static_cast<float>(divisor));
  else wire_divide(in, out, n, static_cast<float>(divisor));
}

}  // namespace zring::collective
