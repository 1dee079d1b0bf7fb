// sparse.cpp - the delta-varint (index, value) layout of topk and threshold.
#include "codec/sparse.hpp"

#include <cstdint>
#include <string>
#include <vector>

#include "codec/payload.hpp"

namespace zring::codec::detail {

void encode_sparse(CompressedGradient& g) {
  const std::size_t m = g.indices.size();
  std::size_t index_bytes = 0;
  std::uint32_t prev = 0;
  for (std::size_t j = 0; j < m; ++j) {
    index_bytes += varint_size(g.indices[j] - prev);
    prev = g.indices[j];
  }
  g.payload.resize(4 + 4 * m + index_bytes);
  std::uint8_t* p = g.payload.data();
  store_u32(p, static_cast<std::uint32_t>(m));
  store_f32s(g.values.data(), m, p + 4);
  p += 4 + 4 * m;
  prev = 0;
  for (std::size_t j = 0; j < m; ++j) {
    p = put_varint(p, g.indices[j] - prev);
    prev = g.indices[j];
  }
}

void decode_sparse(const CompressionMethod& method, CompressedGradient& g) {
  PayloadReader in(method, g);
  const std::size_t n = g.original_size;
  if (static_cast<std::uint64_t>(n) > (std::uint64_t{1} << 32))
    in.fail("tensor too large for 32-bit indices");
  const std::uint32_t m = in.u32("the pair count");
  if (m > n) {
    in.fail("claims " + std::to_string(m) + " pairs, more than the tensor's elements");
  }
  // Taking the values first bounds m by the payload size before allocating.
  const std::uint8_t* value_bytes = in.take(std::size_t{4} * m, "the values");
  // Decode into the gradient's own buffers (keeping their capacity); if a
  // check fails they are left empty rather than half filled.
  std::vector<std::uint32_t> indices = std::move(g.indices);
  std::vector<float> values = std::move(g.values);
  indices.resize(m);
  values.resize(m);
  load_f32s(value_bytes, m, values.data());
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
    indices[j] = static_cast<std::uint32_t>(index);
  }
  in.expect_end();
  g.indices = std::move(indices);
  g.values = std::move(values);
}

}  // namespace zring::codec::detail
