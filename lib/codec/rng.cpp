// rng.cpp - random_indices (randomk's shared index draw) and tensor_seed.
#include "codec/rng.hpp"

#include <bit>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>
#include <zring/error.hpp>

#include "codec/codec.hpp"

namespace zring::codec {

// Floyd's algorithm draws k distinct values from [0, n) with exactly k
// bounded draws: for j = n-k .. n-1 take t in [0, j], or j itself when t is
// already taken. A bitmap of n bits is the set, and reading it word by word
// yields the indices already sorted: O(k + n/64) time and n/8 bytes.
std::vector<std::uint32_t> random_indices(std::uint64_t seed, std::size_t n, std::size_t k) {
  constexpr std::uint64_t kMaxElems = std::uint64_t{std::numeric_limits<std::uint32_t>::max()} + 1;
  if (k > n || static_cast<std::uint64_t>(n) > kMaxElems) {
    throw Error(ErrorCode::invalid_argument, "random_indices: cannot draw " + std::to_string(k) +
                                                 " distinct indices of " + std::to_string(n) +
                                                 " (need k <= n <= 2^32)");
  }
  std::vector<std::uint32_t> indices;
  if (k == 0) return indices;
  std::vector<std::uint64_t> taken((n + 63) / 64, 0);
  detail::Xoshiro256 rng(seed);
  for (std::uint64_t j = n - k; j < n; ++j) {
    const std::uint64_t t = rng.below(j + 1);
    const std::uint64_t bit = std::uint64_t{1} << (t % 64);
    std::uint64_t& word = taken[t / 64];
    if ((word & bit) == 0) {
      word |= bit;
    } else {
      taken[j / 64] |= std::uint64_t{1} << (j % 64);
    }
  }
  indices.reserve(k);
  for (std::size_t w = 0; w < taken.size(); ++w) {
    for (std::uint64_t word = taken[w]; word != 0; word &= word - 1) {
      indices.push_back(
          static_cast<std::uint32_t>(w * 64 + static_cast<unsigned>(std::countr_zero(word))));
    }
  }
  return indices;
}

// FNV-1a of the name, mixed into the op's seed: every tensor of one op gets
// its own well-spread seed, and every rank derives the same one.
std::uint64_t tensor_seed(std::uint64_t op_seed, std::string_view tensor_name) {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : tensor_name) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  std::uint64_t state = op_seed;
  std::uint64_t mixed = detail::splitmix64(state) ^ hash;
  return detail::splitmix64(mixed);
}

}  // namespace zring::codec
