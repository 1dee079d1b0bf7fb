// sparse.cpp - the delta-varint (index, value) layout of topk and threshold.
#include "codec/sparse.hpp"

#include <cstdint>
#include <string>
#include <vector>

#include "codec/payload.hpp"

namespace zring::codec::detail {
namespace {

// Checks the layout of what `in` reads for a tensor of n elements and
// calls index(j, i) for each pair j's index i; returns the values' bytes
// (m of them, in m). Throws Error(malformed_message) on the first fault.
template <class Index>
const std::uint8_t* check_sparse(PayloadReader& in, std::size_t n, std::uint32_t& m,
                                 Index index_at) {
  if (static_cast<std::uint64_t>(n) > (std::uint64_t{1} << 32))
    in.fail("tensor too large for 32-bit indices");
  m = in.u32("the pair count");
  if (m > n) {
    in.fail("claims " + std::to_string(m) + " pairs, more than the tensor's elements");
  }
  // Taking the values first bounds m by the payload size before allocating.
  const std::uint8_t* value_bytes = in.take(std::size_t{4} * m, "the values");
  std::uint64_t index = 0;
  for (std::uint32_t j = 0; j < m; ++j) {
    const std::uint32_t gap = in.varint("an index varint");
    if (j > 0 && gap == 0) {
      in.fail("index " + std::to_string(index) + " repeats at pair " + std::to_string(j));
    }
    index = (j == 0 ? 0 : index) + gap;
    if (index >= n)
      in.fail("index " + std::to_string(index) + " at pair " + std::to_string(j) +
              " is out of range");
    index_at(j, static_cast<std::uint32_t>(index));
  }
  in.expect_end();
  return value_bytes;
}

}  // namespace

std::size_t sparse_bytes(const std::uint32_t* indices, std::size_t m, std::uint32_t base) noexcept {
  std::size_t index_bytes = 0;
  std::uint32_t prev = base;
  for (std::size_t j = 0; j < m; ++j) {
    index_bytes += varint_size(indices[j] - prev);
    prev = indices[j];
  }
  return 4 + 4 * m + index_bytes;
}

void encode_sparse_range(const std::uint32_t* indices, const float* values, std::size_t m,
                         std::uint32_t base, std::uint8_t* out) noexcept {
  store_u32(out, static_cast<std::uint32_t>(m));
  store_f32s(values, m, out + 4);
  std::uint8_t* p = out + 4 + 4 * m;
  std::uint32_t prev = base;
  for (std::size_t j = 0; j < m; ++j) {
    p = put_varint(p, indices[j] - prev);
    prev = indices[j];
  }
}

void encode_sparse(CompressedGradient& g) {
  const std::size_t m = g.indices.size();
  g.payload.resize(sparse_bytes(g.indices.data(), m, 0));
  encode_sparse_range(g.indices.data(), g.values.data(), m, 0, g.payload.data());
}

void decode_sparse_pairs(const CompressionMethod& method, const std::uint8_t* data,
                         std::size_t size, std::size_t n, std::vector<std::uint32_t>& indices,
                         std::vector<float>& values) {
  PayloadReader in(method, data, size, n);
  // Decode into the caller's buffers (keeping their capacity); if a check
  // fails they are left empty rather than half filled.
  std::vector<std::uint32_t> kept = std::move(indices);
  std::vector<float> kept_values = std::move(values);
  std::uint32_t m = 0;
  const std::uint8_t* value_bytes = check_sparse(in, n, m, [&](std::uint32_t j, std::uint32_t i) {
    if (j == 0) kept.resize(m);
    kept[j] = i;
  });
  kept.resize(m);
  kept_values.resize(m);
  load_f32s(value_bytes, m, kept_values.data());
  indices = std::move(kept);
  values = std::move(kept_values);
}

void decode_sparse(const CompressionMethod& method, CompressedGradient& g) {
  decode_sparse_pairs(method, g.payload.data(), g.payload.size(), g.original_size, g.indices,
                      g.values);
}

}  // namespace zring::codec::detail
