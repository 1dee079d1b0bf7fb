// sparse.hpp - the (index, value) layout shared by topk and threshold
// (internal):
//   u32 m; m x f32 values; m indices as unsigned LEB128 varints, the first
//   index itself and then the gaps idx[j] - idx[j-1] >= 1.
// Delta-coded indices cost 1-2 bytes each at the densities top-k is used at,
// against 4 for plain u32 indices.
#pragma once

#include <zring/compression.hpp>

namespace zring::codec::detail {

// g.payload <- the layout of g.indices (ascending) and g.values.
void encode_sparse(CompressedGradient& g);

// g.indices, g.values <- g.payload, checked: m <= original_size, canonical
// varints of at most 5 bytes, indices strictly increasing and below
// original_size, every byte consumed. Throws Error(malformed_message).
void decode_sparse(const CompressionMethod& method, CompressedGradient& g);

}  // namespace zring::codec::detail
