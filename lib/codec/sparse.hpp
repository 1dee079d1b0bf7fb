// sparse.hpp - the (index, value) layout shared by topk and threshold
// (internal):
//   u32 m; m x f32 values; m indices as unsigned LEB128 varints, the first
//   index itself and then the gaps idx[j] - idx[j-1] >= 1.
// Delta-coded indices cost 1-2 bytes each at the densities top-k is used at,
// against 4 for plain u32 indices.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>
#include <zring/compression.hpp>

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

// decode_sparse of the size bytes at data, the payload of a tensor of n
// elements, into indices and values (keeping their capacity): the same
// checks and errors, without a copy of the payload in a gradient.
void decode_sparse_pairs(const CompressionMethod& method, const std::uint8_t* data,
                         std::size_t size, std::size_t n, std::vector<std::uint32_t>& indices,
                         std::vector<float>& values);

}  // namespace zring::codec::detail
