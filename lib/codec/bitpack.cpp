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

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "codec/codec.hpp"
#include "codec/payload.hpp"
#include "codec/vector_clones.hpp"

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

#ifdef ZRING_AVX2_DISPATCH

// AVX2 for widths that are not a whole number of bytes per code (3..15):
// a group of 8 codes is W bytes, loaded (or stored) as 16. Code j starts at
// bit j*W: byte o_j = j*W/8, shift s_j = j*W%8, and spans at most 3 bytes.
// Groups stop 16 bytes before the end of the stream; the general loops
// finish. Same bits as the scalar code.
struct GroupLayout {
  alignas(32) std::uint8_t gather[32];  // unpack: the bytes of code j into lane j
  alignas(32) std::uint32_t shift[8];
};

GroupLayout group_layout(unsigned w) noexcept {
  GroupLayout g{};
  for (unsigned j = 0; j < 8; ++j) {
    const unsigned o = j * w / 8;
    g.shift[j] = j * w % 8;
    for (unsigned b = 0; b < 4; ++b) {
      // pshufb works within each 128-bit half; both halves hold the same 16 bytes.
      const unsigned from = o + b;
      g.gather[4 * j + b] = (b < 3 && from < 16) ? static_cast<std::uint8_t>(from) : 0x80;
    }
  }
  return g;
}

// Whole groups that can be read or written as 16 bytes inside `bytes`.
std::size_t safe_groups(std::size_t n, unsigned w, std::size_t bytes) noexcept {
  const std::size_t groups = n / 8;
  if (bytes < 16) return 0;
  return std::min(groups, (bytes - 16) / w + 1);
}

__attribute__((target("avx2"))) std::size_t unpack_avx2(const std::uint8_t* in, std::size_t n,
                                                        unsigned w, std::uint32_t* codes) noexcept {
  const std::size_t groups = safe_groups(n, w, packed_bytes(n, w));
  const GroupLayout layout = group_layout(w);
  const __m256i gather = _mm256_load_si256(reinterpret_cast<const __m256i*>(layout.gather));
  const __m256i shift = _mm256_load_si256(reinterpret_cast<const __m256i*>(layout.shift));
  const __m256i mask = _mm256_set1_epi32(static_cast<int>((1u << w) - 1));
  for (std::size_t g = 0; g < groups; ++g) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + g * w));
    const __m256i both = _mm256_broadcastsi128_si256(bytes);
    const __m256i lanes = _mm256_srlv_epi32(_mm256_shuffle_epi8(both, gather), shift);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + 8 * g), _mm256_and_si256(lanes, mask));
  }
  return groups;
}

// Packing W >= 9: each output byte takes bits from at most two codes, which
// two pshufb per 128-bit half gather (lanes 0-3 the low half, 4-7 the high).
struct PackLayout {
  alignas(32) std::uint8_t first[32];
  alignas(32) std::uint8_t second[32];
};

PackLayout pack_layout(unsigned w) noexcept {
  PackLayout p{};
  for (unsigned half = 0; half < 2; ++half) {
    for (unsigned m = 0; m < 16; ++m) {
      std::uint8_t picks[2] = {0x80, 0x80};
      unsigned found = 0;
      for (unsigned j = 4 * half; j < 4 * half + 4 && found < 2; ++j) {
        const unsigned o = j * w / 8;
        const unsigned last = (j * w + w - 1) / 8;
        if (m >= o && m <= last)
          picks[found++] = static_cast<std::uint8_t>(4 * (j - 4 * half) + (m - o));
      }
      p.first[16 * half + m] = picks[0];
      p.second[16 * half + m] = picks[1];
    }
  }
  return p;
}

__attribute__((target("avx2"))) std::size_t pack_avx2(const std::uint32_t* codes, std::size_t n,
                                                      unsigned w, std::uint8_t* out) noexcept {
  const std::size_t groups = safe_groups(n, w, packed_bytes(n, w));
  const GroupLayout layout = group_layout(w);
  const PackLayout picks = pack_layout(w);
  const __m256i shift = _mm256_load_si256(reinterpret_cast<const __m256i*>(layout.shift));
  const __m256i first = _mm256_load_si256(reinterpret_cast<const __m256i*>(picks.first));
  const __m256i second = _mm256_load_si256(reinterpret_cast<const __m256i*>(picks.second));
  const __m256i mask = _mm256_set1_epi32(static_cast<int>((1u << w) - 1));
  for (std::size_t g = 0; g < groups; ++g) {
    const __m256i c =
        _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + 8 * g)), mask);
    const __m256i placed = _mm256_sllv_epi32(c, shift);
    const __m256i halves =
        _mm256_or_si256(_mm256_shuffle_epi8(placed, first), _mm256_shuffle_epi8(placed, second));
    const __m128i bytes =
        _mm_or_si128(_mm256_castsi256_si128(halves), _mm256_extracti128_si256(halves, 1));
    // 16 bytes, of which the group owns W: the next group's store (or the
    // general loop) writes the rest.
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + g * w), bytes);
  }
  return groups;
}
#endif

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
    default: {
      std::size_t done = 0;
#ifdef ZRING_AVX2_DISPATCH
      if (bits >= 9 && bits <= 15 && have_avx2()) done = pack_avx2(codes, n, bits, out);
#endif
      codes += 8 * done;
      n -= 8 * done;
      out += done * bits;
      if (kGrouped && pack_grouped(bits, codes, n, out, Widths{})) return;
      return pack_any(codes, n, bits, out);
    }
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
    default: {
      std::size_t done = 0;
#ifdef ZRING_AVX2_DISPATCH
      if (bits <= 15 && have_avx2()) done = unpack_avx2(in, n, bits, codes);
#endif
      codes += 8 * done;
      n -= 8 * done;
      in += done * bits;
      if (kGrouped && unpack_grouped(bits, in, n, codes, Widths{})) return;
      return unpack_any(in, n, bits, codes);
    }
  }
}

}  // namespace zring::codec
