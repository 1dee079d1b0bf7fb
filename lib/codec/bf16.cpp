// bf16.cpp - bfloat16 values (conversions in half.cpp): float32's range
// with 8 bits of precision, relative error at most 2^-8.
#include "codec/codecs.hpp"
#include "codec/sixteen_bit.hpp"

namespace zring::codec::detail {

std::unique_ptr<Codec> make_bf16_codec(const CompressionMethod& method) {
  return make_sixteen_bit_codec(method, {&floats_to_bf16s, &bf16s_to_floats});
}

}  // namespace zring::codec::detail
