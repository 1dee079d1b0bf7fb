// affine_blocks.hpp - block bookkeeping shared by quantization and signsgd
// (internal). Both payloads are a table of per-block headers followed by one
// continuous bit stream of codes; every block but the last has kBlockElems
// codes, a whole number of bytes, so each block's codes start on a byte.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "codec/codec.hpp"

namespace zring::codec::detail {

inline constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

constexpr std::size_t block_count(std::size_t n) noexcept {
  return (n + kBlockElems - 1) / kBlockElems;
}
constexpr std::size_t block_length(std::size_t n, std::size_t block) noexcept {
  return std::min(kBlockElems, n - block * kBlockElems);
}
// Where block's codes start in the bit stream.
constexpr std::size_t block_code_offset(std::size_t block, unsigned bits) noexcept {
  return block * (kBlockElems / 8) * bits;
}

inline bool is_finite_grid(AffineGrid g) noexcept {
  return std::isfinite(g.offset) && std::isfinite(g.step);
}

// True when the bits of the stream past its last code are not zero.
inline bool has_stray_bits(const std::uint8_t* stream, std::size_t n, unsigned bits) noexcept {
  const std::size_t used = (n * bits) % 8;
  return used != 0 && (stream[packed_bytes(n, bits) - 1] >> used) != 0;
}

}  // namespace zring::codec::detail
