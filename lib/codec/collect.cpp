// collect.cpp - the indices whose magnitude reaches a bound, branch-free.
#include "codec/collect.hpp"

#include <bit>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "codec/vector_clones.hpp"

namespace zring::codec {
namespace {

// Appends to out the indices i in [begin, end) whose key reaches bound, in
// order, and to bits their values' bit patterns; returns how many. Both
// must have room for end - begin more.
std::size_t collect_scalar(const float* x, std::size_t begin, std::size_t end, std::uint32_t bound,
                           std::uint32_t* out, std::uint32_t* bits) noexcept {
  std::size_t count = 0;
  for (std::size_t i = begin; i < end; ++i) {  // branch-free: candidates are rare and random
    const auto b = std::bit_cast<std::uint32_t>(x[i]);
    out[count] = static_cast<std::uint32_t>(i);
    bits[count] = b;
    count += (b & 0x7fffffffu) >= bound ? 1 : 0;
  }
  return count;
}

#ifdef ZRING_AVX2_DISPATCH
// For each 8-bit mask, the lanes whose bit is set, first to last, as the
// permutation that packs them to the front.
struct PackTable {
  alignas(32) std::uint32_t lanes[256][8];
  constexpr PackTable() : lanes{} {
    for (unsigned m = 0; m < 256; ++m) {
      unsigned j = 0;
      for (unsigned lane = 0; lane < 8; ++lane)
        if ((m >> lane) & 1u) lanes[m][j++] = lane;
    }
  }
};
constexpr PackTable kPack;

// Eight keys per compare, without a branch: every group's hits (if any)
// are packed to the front and stored whole, and count moves on by how
// many there were.
__attribute__((target("avx2,popcnt"))) std::size_t collect_avx2(const float* x, std::size_t begin,
                                                                std::size_t end,
                                                                std::uint32_t bound,
                                                                std::uint32_t* out,
                                                                std::uint32_t* bits) noexcept {
  const __m256i magnitude = _mm256_set1_epi32(0x7fffffff);
  // key >= bound as a signed compare: both lie in [0, 2^31), so bound - 1 >= -1.
  const __m256i below = _mm256_set1_epi32(static_cast<std::int32_t>(bound) - 1);
  const __m256i eight = _mm256_set1_epi32(8);
  __m256i index = _mm256_add_epi32(_mm256_set1_epi32(static_cast<std::int32_t>(begin)),
                                   _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  std::size_t count = 0;
  std::size_t i = begin;
  for (; i + 8 <= end; i += 8) {
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
    const __m256i keys = _mm256_and_si256(raw, magnitude);
    const auto hits = static_cast<unsigned>(
        _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(keys, below))));
    const __m256i pack = _mm256_load_si256(reinterpret_cast<const __m256i*>(kPack.lanes[hits]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + count),
                        _mm256_permutevar8x32_epi32(index, pack));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(bits + count),
                        _mm256_permutevar8x32_epi32(raw, pack));
    count += static_cast<std::size_t>(std::popcount(hits));
    index = _mm256_add_epi32(index, eight);
  }
  return count + collect_scalar(x, i, end, bound, out + count, bits + count);
}
#endif

}  // namespace

std::size_t collect(const float* x, std::size_t begin, std::size_t end, std::uint32_t bound,
                    std::uint32_t* out, std::uint32_t* bits) noexcept {
#ifdef ZRING_AVX2_DISPATCH
  if (have_avx2()) return collect_avx2(x, begin, end, bound, out, bits);
#endif
  return collect_scalar(x, begin, end, bound, out, bits);
}

}  // namespace zring::codec
