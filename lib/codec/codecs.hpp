// codecs.hpp - the factory of each codec, one per method file (internal).
#pragma once

#include <memory>

#include "codec/codec.hpp"

namespace zring::codec::detail {

std::unique_ptr<Codec> make_none_codec(const CompressionMethod& method);
std::unique_ptr<Codec> make_fp16_codec(const CompressionMethod& method);
std::unique_ptr<Codec> make_bf16_codec(const CompressionMethod& method);
std::unique_ptr<Codec> make_topk_codec(const CompressionMethod& method);
std::unique_ptr<Codec> make_randomk_codec(const CompressionMethod& method);
std::unique_ptr<Codec> make_threshold_codec(const CompressionMethod& method);
std::unique_ptr<Codec> make_quantization_codec(const CompressionMethod& method);
std::unique_ptr<Codec> make_signsgd_codec(const CompressionMethod& method);

}  // namespace zring::codec::detail
