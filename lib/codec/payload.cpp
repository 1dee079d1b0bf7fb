// payload.cpp - little-endian payload helpers shared by the codecs.
#include "codec/payload.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <zring/error.hpp>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace zring::codec::detail {

void store_f32s(const float* x, std::size_t n, std::uint8_t* out) noexcept {
  if constexpr (kLittleEndian) {
    if (n != 0) std::memcpy(out, x, n * sizeof(float));
  } else {
    for (std::size_t i = 0; i < n; ++i) store_f32(out + 4 * i, x[i]);
  }
}

void load_f32s(const std::uint8_t* in, std::size_t n, float* out) noexcept {
  if constexpr (kLittleEndian) {
    if (n != 0) std::memcpy(out, in, n * sizeof(float));
  } else {
    for (std::size_t i = 0; i < n; ++i) out[i] = load_f32(in + 4 * i);
  }
}

void store_u16s(const std::uint16_t* x, std::size_t n, std::uint8_t* out) noexcept {
  if constexpr (kLittleEndian) {
    if (n != 0) std::memcpy(out, x, n * sizeof(std::uint16_t));
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint16_t v = byteswap16(x[i]);
      std::memcpy(out + 2 * i, &v, 2);
    }
  }
}

void append_u16s(std::vector<std::uint8_t>& out, const std::uint16_t* x, std::size_t n) {
  if constexpr (kLittleEndian) {
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(x);
    out.insert(out.end(), bytes, bytes + 2 * n);
  } else {
    const std::size_t at = out.size();
    out.resize(at + 2 * n);
    store_u16s(x, n, out.data() + at);
  }
}

void load_u16s(const std::uint8_t* in, std::size_t n, std::uint16_t* out) noexcept {
  if constexpr (kLittleEndian) {
    if (n != 0) std::memcpy(out, in, n * sizeof(std::uint16_t));
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      std::uint16_t v;
      std::memcpy(&v, in + 2 * i, 2);
      out[i] = byteswap16(v);
    }
  }
}

void advise_huge_pages(void* p, std::size_t bytes) noexcept {
#if defined(MADV_HUGEPAGE)
  constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
  if (bytes < 4 * kHuge) return;
  const auto begin = (reinterpret_cast<std::uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const auto end = (reinterpret_cast<std::uintptr_t>(p) + bytes) & ~(kHuge - 1);
  // Only a hint: without transparent huge pages the call fails, harmlessly.
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

PayloadReader::PayloadReader(const CompressionMethod& method, const CompressedGradient& g) noexcept
    : PayloadReader(method, g.payload.data(), g.payload.size(), g.original_size) {}

PayloadReader::PayloadReader(const CompressionMethod& method, const std::uint8_t* data,
                             std::size_t size, std::size_t n) noexcept
    : method_(method), payload_bytes_(size), original_size_(n), p_(data), end_(data + size) {}

void PayloadReader::short_of(std::size_t bytes, const char* what) const {
  fail(std::string(what) + " needs " + std::to_string(bytes) + " bytes but only " +
       std::to_string(remaining()) + " remain");
}

std::uint32_t PayloadReader::long_varint(const char* what) {
  // 5 bytes carry 35 bits; the fifth may only hold the top 4 bits of a u32.
  std::uint32_t value = 0;
  for (unsigned i = 0; i < 5; ++i) {
    const std::uint8_t byte = *take(1, what);
    if (i == 4 && (byte & 0x80u) != 0) fail(std::string(what) + " is longer than 5 bytes");
    if (i == 4 && byte > 0x0fu) fail(std::string(what) + " overflows 32 bits");
    value |= static_cast<std::uint32_t>(byte & 0x7fu) << (7 * i);
    if ((byte & 0x80u) == 0) {
      // A zero final byte after the first means a padded (non-canonical)
      // encoding; rejecting it keeps every value's encoding unique.
      if (i > 0 && byte == 0) fail(std::string(what) + " is not minimally encoded");
      return value;
    }
  }
  fail(std::string(what) + " is longer than 5 bytes");  // not reached: i == 4 returns or fails
}

void PayloadReader::expect_end() const {
  if (p_ != end_) fail(std::to_string(remaining()) + " unexpected trailing bytes");
}

void PayloadReader::fail(const std::string& what) const {
  throw Error(ErrorCode::malformed_message,
              method_.to_string() + ": " + what + " (payload " + std::to_string(payload_bytes_) +
                  " bytes, tensor of " + std::to_string(original_size_) + " elements)");
}

CompressedGradient start_gradient(const CompressionMethod& method, std::size_t n) {
  CompressedGradient g;
  g.method = method;
  g.original_size = n;
  g.shape = {n};
  return g;
}

void finish_gradient(CompressedGradient& g, unsigned value_bits) noexcept {
  g.value_bits = value_bits;
  g.compression_ratio = g.original_size == 0 ? 1.0
                                             : static_cast<double>(g.payload_bytes()) /
                                                   static_cast<double>(g.dense_bytes());
}

void check_indexable(const CompressionMethod& method, std::size_t n) {
  constexpr std::uint64_t kMax = std::uint64_t{std::numeric_limits<std::uint32_t>::max()} + 1;
  if (static_cast<std::uint64_t>(n) > kMax) {
    throw Error(ErrorCode::invalid_argument,
                method.to_string() + ": a tensor of " + std::to_string(n) +
                    " elements is too large for 32-bit indices (at most 2^32 elements)");
  }
}

}  // namespace zring::codec::detail
