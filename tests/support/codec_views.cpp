// codec_views.cpp - what any codec's view must look like (codec_views.hpp).
#include "support/codec_views.hpp"

#include <cstring>

namespace zring::testing {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

unsigned expected_value_bits(const CompressionMethod& method) {
  switch (method.kind()) {
    case CompressionKind::fp16:
    case CompressionKind::bf16:
      return 16;
    case CompressionKind::quantization:
      return method.bits();
    case CompressionKind::signsgd:
      return 1;
    default:
      return 32;
  }
}

}  // namespace zring::testing
