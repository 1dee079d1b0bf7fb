// sixteen_bit.hpp - the codec shared by fp16 and bf16: n 16-bit words
// (internal). Each format supplies its bulk conversions.
#pragma once

#include <cstdint>
#include <memory>

#include "codec/codec.hpp"

namespace zring::codec::detail {

struct SixteenBitFormat {
  void (*encode)(const float* x, std::size_t n, std::uint16_t* out) noexcept;
  void (*decode)(const std::uint16_t* h, std::size_t n, float* out) noexcept;
};

std::unique_ptr<Codec> make_sixteen_bit_codec(const CompressionMethod& method,
                                              SixteenBitFormat format);

}  // namespace zring::codec::detail
