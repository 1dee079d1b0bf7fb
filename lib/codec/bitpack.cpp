// bitpack.cpp - codes of 1..32 bits as one continuous LSB-first bit stream.
//
// Code i occupies bits [i*bits, (i+1)*bits) of the stream, and bit j of the
// stream is bit (j % 8) of byte j / 8. The widths the codecs use most (1, 2,
// 4, 8, 16) have loops the compiler vectorises; the others go through a
// 64-bit accumulator. Unused high bits of the last byte are zero.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <utility>

#include "codec/codec.hpp"
#include "codec/payload.hpp"

namespace zring::codec {
namespace {

// Widths that divide 8: `per` codes fill each byte.
template <unsigned Bits>
void pack_small(const std::uint32_t* codes, std::size_t n, std::uint8_t* out) noexcept {
  constexpr unsigned per = 8 / Bits;
  constexpr std::uint32_t mask = (1u << Bits) - 1;
  const std::size_t full = n / per;
  for (std::size_t b = 0; b < full; ++b) {
    std::uint32_t byte = 0;
    for (unsigned j = 0; j < per; ++j) byte |= (codes[b * per + j] & mask) << (j * Bits);
    out[b] = static_cast<std::uint8_t>(byte);
  }
  if (full * per < n) {
    std::uint32_t byte = 0;
    for (std::size_t j = 0; full * per + j < n; ++j) {
      byte |= (codes[full * per + j] & mask) << (j * Bits);
    }
    out[full] = static_cast<std::uint8_t>(byte);
  }
}

template <unsigned Bits>
void unpack_small(const std::uint8_t* in, std::size_t n, std::uint32_t* codes) noexcept {
  constexpr unsigned per = 8 / Bits;
  constexpr std::uint32_t mask = (1u << Bits) - 1;
  const std::size_t full = n / per;
  for (std::size_t b = 0; b < full; ++b) {
    for (unsigned j = 0; j < per; ++j) codes[b * per + j] = (in[b] >> (j * Bits)) & mask;
  }
  for (std::size_t j = 0; full * per + j < n; ++j)
    codes[full * per + j] = (in[full] >> (j * Bits)) & mask;
}

// One bit per code, the sign codec's width. Codes are first narrowed to
// bytes of 0 / 1 (a loop that vectorises); then a multiply gathers the low
// bit of each of 8 bytes into the top byte of the product: bit 0 of byte j
// lands on bit 56 + j, and no two partial products collide.
constexpr std::uint64_t kGatherBits = 0x0102040810204080ull;
// And back: spread a byte's bits one per byte, then make each byte 0 or 1.
constexpr std::uint64_t kRepeatByte = 0x0101010101010101ull;
constexpr std::uint64_t kBitOfByte = 0x8040201008040201ull;
constexpr std::size_t kBitChunk = 512;

void pack1(const std::uint32_t* codes, std::size_t n, std::uint8_t* out) noexcept {
  std::uint8_t bytes[kBitChunk];
  for (std::size_t at = 0; at < n; at += kBitChunk) {
    const std::size_t len = std::min(kBitChunk, n - at);
    const std::size_t groups = (len + 7) / 8;
    for (std::size_t i = 0; i < len; ++i) bytes[i] = static_cast<std::uint8_t>(codes[at + i] & 1u);
    std::fill(bytes + len, bytes + 8 * groups, std::uint8_t{0});
    for (std::size_t g = 0; g < groups; ++g) {
      out[at / 8 + g] =
          static_cast<std::uint8_t>((detail::load_u64(bytes + 8 * g) * kGatherBits) >> 56);
    }
  }
}

void unpack1(const std::uint8_t* in, std::size_t n, std::uint32_t* codes) noexcept {
  std::uint8_t bytes[kBitChunk];
  for (std::size_t at = 0; at < n; at += kBitChunk) {
    const std::size_t len = std::min(kBitChunk, n - at);
    for (std::size_t g = 0; g < (len + 7) / 8; ++g) {
      const std::uint64_t spread = (in[at / 8 + g] * kRepeatByte) & kBitOfByte;
      // A nonzero byte plus 0x7f reaches bit 7 (and never carries out).
      detail::store_u64(bytes + 8 * g, ((spread + 0x7f7f7f7f7f7f7f7full) >> 7) & kRepeatByte);
    }
    for (std::size_t i = 0; i < len; ++i) codes[at + i] = bytes[i];
  }
}

void pack16(const std::uint32_t* codes, std::size_t n, std::uint8_t* out) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    out[2 * i] = static_cast<std::uint8_t>(codes[i]);
    out[2 * i + 1] = static_cast<std::uint8_t>(codes[i] >> 8);
  }
}

void unpack16(const std::uint8_t* in, std::size_t n, std::uint32_t* codes) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    codes[i] = static_cast<std::uint32_t>(in[2 * i]) | static_cast<std::uint32_t>(in[2 * i + 1])
                                                           << 8;
  }
}

void pack_any(const std::uint32_t* codes, std::size_t n, unsigned bits,
              std::uint8_t* out) noexcept {
  const std::uint64_t mask = (std::uint64_t{1} << bits) - 1;
  std::uint64_t acc = 0;  // pending bits, LSB first
  unsigned held = 0;      // how many
  for (std::size_t i = 0; i < n; ++i) {
    acc |= (codes[i] & mask) << held;
    held += bits;
    while (held >= 8) {
      *out++ = static_cast<std::uint8_t>(acc);
      acc >>= 8;
      held -= 8;
    }
  }
  if (held > 0) *out = static_cast<std::uint8_t>(acc);
}

void unpack_any(const std::uint8_t* in, std::size_t n, unsigned bits,
                std::uint32_t* codes) noexcept {
  const std::uint64_t mask = (std::uint64_t{1} << bits) - 1;
  std::uint64_t acc = 0;
  unsigned held = 0;
  for (std::size_t i = 0; i < n; ++i) {
    while (held < bits) {
      acc |= std::uint64_t{*in++} << held;
      held += 8;
    }
    codes[i] = static_cast<std::uint32_t>(acc & mask);
    acc >>= bits;
    held -= bits;
  }
}

// Any width up to 16: eight codes of W bits are exactly W bytes, so a group
// is gathered into one 128-bit word and stored whole. With W known at
// compile time the shifts are constants and the loop has no branches; the
// few codes after the last whole group go through the general loop, which
// starts on a byte boundary there.
template <unsigned W>
void pack_groups(const std::uint32_t* codes, std::size_t n, std::uint8_t* out) noexcept {
  constexpr std::uint32_t mask = (1u << W) - 1;
  const std::size_t groups = n / 8;
  for (std::size_t g = 0; g < groups; ++g) {
    unsigned __int128 acc = 0;
#pragma GCC unroll 8
    for (unsigned j = 0; j < 8; ++j)
      acc |= static_cast<unsigned __int128>(codes[8 * g + j] & mask) << (j * W);
    std::memcpy(out + g * W, &acc, W);  // little-endian: the low bytes first
  }
  pack_any(codes + 8 * groups, n - 8 * groups, W, out + groups * W);
}

template <unsigned W>
void unpack_groups(const std::uint8_t* in, std::size_t n, std::uint32_t* codes) noexcept {
  constexpr std::uint32_t mask = (1u << W) - 1;
  const std::size_t groups = n / 8;
  for (std::size_t g = 0; g < groups; ++g) {
    unsigned __int128 acc = 0;
    std::memcpy(&acc, in + g * W, W);
#pragma GCC unroll 8
    for (unsigned j = 0; j < 8; ++j)
      codes[8 * g + j] = static_cast<std::uint32_t>(acc >> (j * W)) & mask;
  }
  unpack_any(in + groups * W, n - 8 * groups, W, codes + 8 * groups);
}

template <unsigned... W>
bool pack_grouped(unsigned bits, const std::uint32_t* codes, std::size_t n, std::uint8_t* out,
                  std::integer_sequence<unsigned, W...>) noexcept {
  return ((bits == W + 1 ? (pack_groups<W + 1>(codes, n, out), true) : false) || ...);
}

template <unsigned... W>
bool unpack_grouped(unsigned bits, const std::uint8_t* in, std::size_t n, std::uint32_t* codes,
                    std::integer_sequence<unsigned, W...>) noexcept {
  return ((bits == W + 1 ? (unpack_groups<W + 1>(in, n, codes), true) : false) || ...);
}

// The grouped path needs the host to store the low byte first.
constexpr bool kGrouped = std::endian::native == std::endian::little;
using Widths = std::make_integer_sequence<unsigned, 16>;  // 1..16

}  // namespace

void pack_bits(const std::uint32_t* codes, std::size_t n, unsigned bits,
               std::uint8_t* out) noexcept {
  switch (bits) {
    case 1:
      return pack1(codes, n, out);
    case 2:
      return pack_small<2>(codes, n, out);
    case 4:
      return pack_small<4>(codes, n, out);
    case 8:
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::uint8_t>(codes[i]);
      return;
    case 16:
      return pack16(codes, n, out);
    default:
      if (kGrouped && pack_grouped(bits, codes, n, out, Widths{})) return;
      return pack_any(codes, n, bits, out);
  }
}

void unpack_bits(const std::uint8_t* in, std::size_t n, unsigned bits,
                 std::uint32_t* codes) noexcept {
  switch (bits) {
    case 1:
      return unpack1(in, n, codes);
    case 2:
      return unpack_small<2>(in, n, codes);
    case 4:
      return unpack_small<4>(in, n, codes);
    case 8:
      for (std::size_t i = 0; i < n; ++i) codes[i] = in[i];
      return;
    case 16:
      return unpack16(in, n, codes);
    default:
      if (kGrouped && unpack_grouped(bits, in, n, codes, Widths{})) return;
      return unpack_any(in, n, bits, codes);
  }
}

}  // namespace zring::codec
