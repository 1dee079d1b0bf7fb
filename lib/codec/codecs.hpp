// codecs.hpp - the factory of each codec, one per method file (internal);
// the table of methods (methods.cpp) names them.
#pragma once

#include <memory>

#include "codec/codec.hpp"

namespace zring::codec::detail {

std::unique_ptr<Codec> make_none_codec(const CompressionMethod& method);
// fp16 and bf16: n 16-bit words, in the format of the method's row
// (methods.hpp).
std::unique_ptr<Codec> make_sixteen_bit_codec(const CompressionMethod& method);
std::unique_ptr<Codec> make_topk_codec(const CompressionMethod& method);
std::unique_ptr<Codec> make_randomk_codec(const CompressionMethod& method);
std::unique_ptr<Codec> make_threshold_codec(const CompressionMethod& method);
std::unique_ptr<Codec> make_quantization_codec(const CompressionMethod& method);
std::unique_ptr<Codec> make_signsgd_codec(const CompressionMethod& method);

}  // namespace zring::codec::detail
