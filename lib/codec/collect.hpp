// collect.hpp - the indices whose magnitude reaches a bound, a block at a
// time, branch-free (internal): top-k's candidates, threshold's pairs.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace zring::codec {

// |v|'s bit pattern: for non-negative floats it orders as the value does,
// and every nan pattern lies above inf.
inline std::uint32_t magnitude_key(float v) noexcept {
  return std::bit_cast<std::uint32_t>(v) & 0x7fffffffu;
}

// Appends to out the indices i in [begin, end) whose magnitude_key(x[i])
// reaches bound, in order, and to bits their values' bit patterns; returns
// how many. Both must have room for end - begin more.
std::size_t collect(const float* x, std::size_t begin, std::size_t end, std::uint32_t bound,
                    std::uint32_t* out, std::uint32_t* bits) noexcept;

// Values collected at a time: a block is still in the cache when it is
// read right after it was made (make_blocks).
inline constexpr std::size_t kCollectBlock = 4096;

// Makes every block of n values from `from` on: make_block(begin, end)
// makes values [begin, end) (error feedback's x + r) and says where value
// begin is.
template <class MakeBlock>
void make_blocks(MakeBlock& make_block, std::size_t n, std::size_t from) {
  for (std::size_t begin = from; begin < n; begin += kCollectBlock)
    (void)make_block(begin, std::min(n, begin + kCollectBlock));
}

}  // namespace zring::codec
