// fp16.cpp - IEEE binary16 values (conversions in half.cpp). Relative error
// at most 2^-11 in the normal range; beyond +-65504 values become inf.
#include "codec/codecs.hpp"
#include "codec/sixteen_bit.hpp"

namespace zring::codec::detail {

std::unique_ptr<Codec> make_fp16_codec(const CompressionMethod& method) {
  return make_sixteen_bit_codec(method, {&floats_to_halves, &halves_to_floats});
}

}  // namespace zring::codec::detail
