// correction.cpp - g + r in one pass, and the codecs' default of compressing
// it after it is made.
#include "codec/correction.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>

#include "codec/codec.hpp"
#include "codec/vector_clones.hpp"

namespace zring::codec {

ZRING_VECTOR_CLONES bool add_all_finite(const float* x, const float* r, std::size_t n,
                                        float* out) noexcept {
  std::uint32_t not_finite = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const float v = x[i] + r[i];
    out[i] = v;
    not_finite |= (std::bit_cast<std::uint32_t>(v) & 0x7f800000u) == 0x7f800000u;
  }
  return not_finite == 0;
}

bool make_corrected(const float* x, const float* r, std::size_t n, float* out) noexcept {
  if (r == nullptr) {
    std::copy(x, x + n, out);
    return false;
  }
  return add_all_finite(x, r, n, out);
}

CompressedGradient Codec::compress_corrected(const float* x, const float* r, std::size_t n,
                                             float* out, const CodecContext& ctx,
                                             bool& finite) const {
  finite = make_corrected(x, r, n, out);
  return compress(out, n, ctx);
}

}  // namespace zring::codec
