// codec_fixtures.hpp - what the codec tests share: sample values and
// methods, and the layouts and checks they compare against.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>
#include <zring/compression.hpp>
#include <zring/error.hpp>

#include "codec/codec.hpp"
#include "support/codec_views.hpp"
#include "support/error_code.hpp"

namespace zring::codec::test {

// n values drawn from N(0, scale^2), the same for the same seed.
std::vector<float> normal_values(std::size_t n, std::uint64_t seed, float scale = 1.0f);

// Bitwise equality, and whether a call throws a given code: tests/support.
using zring::testing::same_bits;
using zring::testing::throws_code;

// A copy of g with only what travels (method, size, payload), decoded.
CompressedGradient decoded_copy(const Codec& codec, const CompressedGradient& g);

// True when decoding payload for a tensor of n elements is rejected as
// malformed_message (and nothing else is thrown).
bool rejects(const Codec& codec, std::vector<std::uint8_t> payload, std::size_t n);

// Error feedback's Codec::compress_corrected of x + r by the codec of m
// (top-k makes the corrected values as it reads them) against making them
// first and compressing them after (the base Codec's way): the same result,
// corrected bits and finiteness with r, with r written over, and without a
// residual (then x itself, -0 kept, and "not known" finite). Boost.Test
// checks, `what` naming the case.
void check_corrected(const std::vector<float>& x, const std::vector<float>& r,
                     const CompressionMethod& m, const std::string& what);

// A method of every kind, with typical parameters.
std::vector<CompressionMethod> every_method();

// The payload size the layout of g's method prescribes for g's view.
std::size_t layout_bytes(const CompressedGradient& g);

// Bytes of an unsigned LEB128 varint.
std::size_t leb128_size(std::uint32_t v);

}  // namespace zring::codec::test
