// sparse.hpp - the (index, value) layout shared by topk and threshold
// (internal):
//   u32 m; m x f32 values; m indices as unsigned LEB128 varints, the first
//   index itself and then the gaps idx[j] - idx[j-1] >= 1.
// Delta-coded indices cost 1-2 bytes each at the densities top-k is used at,
// against 4 for plain u32 indices.
#pragma once

#include <cstddef>
#include <cstdint>

#include <zring/compression.hpp>

#include "codec/payload.hpp"

namespace zring::codec::detail {

// g.payload <- the layout of g.indices (ascending) and g.values.
void encode_sparse(CompressedGradient& g);

// The layout of m pairs (indices ascending, none below base) with every
// index lowered by base: a range of a gradient's pairs as the pairs of the
// slice of its tensor that starts at base. sparse_bytes says how many bytes
// encode_sparse_range writes.
[[nodiscard]] std::size_t sparse_bytes(const std::uint32_t* indices, std::size_t m,
                                       std::uint32_t base) noexcept;
void encode_sparse_range(const std::uint32_t* indices, const float* values, std::size_t m,
                         std::uint32_t base, std::uint8_t* out) noexcept;

// g.indices, g.values <- g.payload, checked: m <= original_size, canonical
// varints of at most 5 bytes, indices strictly increasing and below
// original_size, every byte consumed. Throws Error(malformed_message).
void decode_sparse(const CompressionMethod& method, CompressedGradient& g);

// A payload of the layout read where it lies, pair by pair in index order,
// instead of decoded into vectors of its own: the collective keeps every
// rank's payload until the average is made, and a decoded copy would take
// 8 bytes more per pair. The payload is checked once, when the reader is
// made, exactly as decode_sparse checks it (the same errors); the bytes
// must outlive the reader and its cursors.
class SparsePairs {
 public:
  SparsePairs() = default;
  // The payload of size bytes at data, for a tensor of n elements.
  SparsePairs(const CompressionMethod& method, const std::uint8_t* data, std::size_t size,
              std::size_t n);

  [[nodiscard]] std::size_t size() const noexcept { return pairs_; }

  // Walks the pairs in index order: index() and value() of the current one
  // while !done().
  class Cursor {
   public:
    Cursor() = default;
    explicit Cursor(const SparsePairs& pairs) noexcept;
    [[nodiscard]] bool done() const noexcept { return left_ == 0; }
    [[nodiscard]] std::uint32_t index() const noexcept { return index_; }
    [[nodiscard]] float value() const noexcept { return load_f32(value_); }
    void next() noexcept {
      value_ += 4;
      if (--left_ > 0) index_ += gap();
    }

   private:
    // The next gap, a varint the reader has checked.
    std::uint32_t gap() noexcept {
      std::uint32_t value = 0;
      for (unsigned shift = 0;; shift += 7) {
        const std::uint8_t byte = *gap_++;
        value |= static_cast<std::uint32_t>(byte & 0x7fu) << shift;
        if ((byte & 0x80u) == 0) return value;
      }
    }
    const std::uint8_t* value_ = nullptr;  // the current pair's value
    const std::uint8_t* gap_ = nullptr;    // the next pair's index gap
    std::size_t left_ = 0;                 // pairs from the current one on
    std::uint32_t index_ = 0;
  };
  [[nodiscard]] Cursor begin() const noexcept { return Cursor(*this); }

 private:
  const std::uint8_t* data_ = nullptr;
  std::size_t pairs_ = 0;
};

}  // namespace zring::codec::detail
