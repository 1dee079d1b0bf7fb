// codec_views.hpp - what any codec's view must look like, for the codec
// tests (tests/codec) and the codec fuzz target (tests/fuzz).
#pragma once

#include <vector>
#include <zring/compression.hpp>

namespace zring::testing {

// Bitwise equality (so nan == nan when the bits agree, and -0 != +0).
bool same_bits(const std::vector<float>& a, const std::vector<float>& b);

// The value_bits a view of this method reports: 16 for fp16/bf16, the
// quantization's bits, 1 for signsgd, 32 otherwise.
unsigned expected_value_bits(const CompressionMethod& method);

}  // namespace zring::testing
