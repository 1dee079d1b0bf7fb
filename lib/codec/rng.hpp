// rng.hpp - a deterministic, portable pseudo-random generator (internal).
//
// randomk ranks must draw the same indices from the same seed on every
// platform and standard library, so nothing here uses <random>'s
// distributions (whose algorithms are implementation-defined). The
// generator is xoshiro256** (Blackman & Vigna) seeded through splitmix64;
// bounded draws use Lemire's multiply-shift with rejection, which is
// exactly uniform.
#pragma once

#include <cstdint>

namespace zring::codec::detail {

// One splitmix64 step: advances state and returns a well-mixed 64-bit value.
constexpr std::uint64_t splitmix64(std::uint64_t& state) noexcept {
  state += 0x9e3779b97f4a7c15ull;
  std::uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The high 64 bits of the 128-bit product a * b.
constexpr std::uint64_t mul_high64(std::uint64_t a, std::uint64_t b, std::uint64_t& low) noexcept {
#if defined(__SIZEOF_INT128__)
  const unsigned __int128 p = static_cast<unsigned __int128>(a) * b;
  low = static_cast<std::uint64_t>(p);
  return static_cast<std::uint64_t>(p >> 64);
#else
  const std::uint64_t a_lo = a & 0xffffffffull, a_hi = a >> 32;
  const std::uint64_t b_lo = b & 0xffffffffull, b_hi = b >> 32;
  const std::uint64_t lo_lo = a_lo * b_lo, hi_lo = a_hi * b_lo;
  const std::uint64_t lo_hi = a_lo * b_hi, hi_hi = a_hi * b_hi;
  const std::uint64_t mid = (lo_lo >> 32) + (hi_lo & 0xffffffffull) + lo_hi;
  low = a * b;
  return hi_hi + (hi_lo >> 32) + (mid >> 32);
#endif
}

class Xoshiro256 {
 public:
  explicit constexpr Xoshiro256(std::uint64_t seed) noexcept {
    // splitmix64 never yields four zero words, the one state xoshiro forbids.
    for (std::uint64_t& word : s_) word = splitmix64(seed);
  }

  constexpr std::uint64_t next() noexcept {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, bound), bound >= 1 (Lemire 2019, "Fast random integer
  // generation in an interval"): the high word of next() * bound, redrawn
  // when the low word falls in the short biased range.
  constexpr std::uint64_t below(std::uint64_t bound) noexcept {
    std::uint64_t low = 0;
    std::uint64_t high = mul_high64(next(), bound, low);
    if (low < bound) {
      const std::uint64_t reject_under = (0 - bound) % bound;  // 2^64 mod bound
      while (low < reject_under) high = mul_high64(next(), bound, low);
    }
    return high;
  }

 private:
  static constexpr std::uint64_t rotl(std::uint64_t x, int k) noexcept {
    return (x << k) | (x >> (64 - k));
  }
  std::uint64_t s_[4]{};
};

}  // namespace zring::codec::detail
