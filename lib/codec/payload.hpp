// payload.hpp - little-endian bytes in and out of a payload, and the one way
// a decoder reports a malformed payload (internal to the codecs).
//
// Payloads are little-endian on every host, so ranks of different
// endianness read each other's bytes. On little-endian hosts the bulk
// helpers are plain copies.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>
#include <zring/compression.hpp>

namespace zring::codec::detail {

inline constexpr bool kLittleEndian = std::endian::native == std::endian::little;

constexpr std::uint16_t byteswap16(std::uint16_t v) noexcept {
  return static_cast<std::uint16_t>((v >> 8) | (v << 8));
}
constexpr std::uint32_t byteswap32(std::uint32_t v) noexcept {
  return (v >> 24) | ((v >> 8) & 0xff00u) | ((v << 8) & 0xff0000u) | (v << 24);
}
constexpr std::uint64_t byteswap64(std::uint64_t v) noexcept {
  return (std::uint64_t{byteswap32(static_cast<std::uint32_t>(v))} << 32) |
         byteswap32(static_cast<std::uint32_t>(v >> 32));
}

inline void store_u32(std::uint8_t* p, std::uint32_t v) noexcept {
  if constexpr (!kLittleEndian) v = byteswap32(v);
  std::memcpy(p, &v, sizeof v);
}
inline void store_u64(std::uint8_t* p, std::uint64_t v) noexcept {
  if constexpr (!kLittleEndian) v = byteswap64(v);
  std::memcpy(p, &v, sizeof v);
}
inline void store_f32(std::uint8_t* p, float v) noexcept {
  store_u32(p, std::bit_cast<std::uint32_t>(v));
}
inline std::uint32_t load_u32(const std::uint8_t* p) noexcept {
  std::uint32_t v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (!kLittleEndian) v = byteswap32(v);
  return v;
}
inline std::uint64_t load_u64(const std::uint8_t* p) noexcept {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (!kLittleEndian) v = byteswap64(v);
  return v;
}
inline float load_f32(const std::uint8_t* p) noexcept { return std::bit_cast<float>(load_u32(p)); }

// n floats / 16-bit words to and from their little-endian bytes.
void store_f32s(const float* x, std::size_t n, std::uint8_t* out) noexcept;
void load_f32s(const std::uint8_t* in, std::size_t n, float* out) noexcept;
void store_u16s(const std::uint16_t* x, std::size_t n, std::uint8_t* out) noexcept;
void load_u16s(const std::uint8_t* in, std::size_t n, std::uint16_t* out) noexcept;

// Unsigned LEB128: 7 bits per byte, low bits first, high bit = more follows.
inline std::size_t varint_size(std::uint32_t v) noexcept {
  std::size_t size = 1;
  while (v >= 0x80u) {
    v >>= 7;
    ++size;
  }
  return size;
}
inline std::uint8_t* put_varint(std::uint8_t* p, std::uint32_t v) noexcept {
  while (v >= 0x80u) {
    *p++ = static_cast<std::uint8_t>(v | 0x80u);
    v >>= 7;
  }
  *p++ = static_cast<std::uint8_t>(v);
  return p;
}

// Reads an untrusted payload front to back. Every read is bounds-checked;
// a failure throws Error(malformed_message) with the codec's name, what is
// wrong, and the sizes involved.
class PayloadReader {
 public:
  PayloadReader(const CompressionMethod& method, const CompressedGradient& g) noexcept;
  // The same over size bytes at data, the payload of a tensor of n elements.
  PayloadReader(const CompressionMethod& method, const std::uint8_t* data, std::size_t size,
                std::size_t n) noexcept;

  [[nodiscard]] std::size_t remaining() const noexcept {
    return static_cast<std::size_t>(end_ - p_);
  }
  // The next `bytes` bytes; throws when fewer remain.
  const std::uint8_t* take(std::size_t bytes, const char* what) {
    if (bytes > remaining()) short_of(bytes, what);
    const std::uint8_t* at = p_;
    p_ += bytes;
    return at;
  }
  std::uint32_t u32(const char* what) { return load_u32(take(4, what)); }
  std::uint64_t u64(const char* what) { return load_u64(take(8, what)); }
  float f32(const char* what) { return load_f32(take(4, what)); }
  // One canonical varint of at most 5 bytes whose value fits 32 bits.
  std::uint32_t varint(const char* what) {
    // Inline for the common one- and two-byte forms (index deltas).
    if (remaining() >= 2 && (p_[0] & 0x80u) == 0) return *p_++;
    if (remaining() >= 2 && (p_[1] & 0x80u) == 0 && p_[1] != 0) {
      const std::uint32_t v = (p_[0] & 0x7fu) | (static_cast<std::uint32_t>(p_[1]) << 7);
      p_ += 2;
      return v;
    }
    return long_varint(what);
  }
  // Throws unless every byte was consumed.
  void expect_end() const;
  [[noreturn]] void fail(const std::string& what) const;

 private:
  [[noreturn]] void short_of(std::size_t bytes, const char* what) const;
  std::uint32_t long_varint(const char* what);
  const CompressionMethod& method_;
  std::size_t payload_bytes_;
  std::size_t original_size_;
  const std::uint8_t* p_;
  const std::uint8_t* end_;
};

// Asks the OS to back [p, p + bytes) with huge pages where it can (Linux
// transparent huge pages); a no-op elsewhere or for small buffers.
void advise_huge_pages(void* p, std::size_t bytes) noexcept;

// Resizes v to n elements that the caller then overwrites (old contents are
// not kept when v must grow). Filling a fresh 256 MiB buffer otherwise costs
// 65536 page faults, which take longer than the codec itself.
template <class T>
void resize_for_overwrite(std::vector<T>& v, std::size_t n) {
  if (n > v.capacity()) {
    std::vector<T>().swap(v);
    v.reserve(n);
    advise_huge_pages(v.data(), n * sizeof(T));
  }
  v.resize(n);
}

// Empties v and reserves room for n elements that the caller then appends
// (v.insert at the end copies straight into the reserved storage, where
// resize would first zero-fill it: one pass over memory instead of two).
template <class T>
void reserve_for_append(std::vector<T>& v, std::size_t n) {
  v.clear();
  if (n > v.capacity()) {
    std::vector<T>().swap(v);
    v.reserve(n);
    advise_huge_pages(v.data(), n * sizeof(T));
  }
}

// Appends the little-endian bytes of n 16-bit words to out.
void append_u16s(std::vector<std::uint8_t>& out, const std::uint16_t* x, std::size_t n);

// The fields every compress() fills before its payload: method, size, shape.
CompressedGradient start_gradient(const CompressionMethod& method, std::size_t n);
// value_bits and compression_ratio, once the payload is final.
void finish_gradient(CompressedGradient& g, unsigned value_bits) noexcept;

// Sparse codecs store indices as 32-bit numbers: n must not exceed 2^32.
void check_indexable(const CompressionMethod& method, std::size_t n);

}  // namespace zring::codec::detail
