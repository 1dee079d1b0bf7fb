// registry.cpp - make_codec (method -> codec) and accumulate (view -> sum).
#include <string>
#include <zring/error.hpp>

#include "codec/codecs.hpp"
#include "codec/view.hpp"

namespace zring::codec {

std::unique_ptr<Codec> make_codec(const CompressionMethod& method) {
  if (method.has_error_feedback()) {
    throw Error(
        ErrorCode::invalid_argument,
        "make_codec: '" + method.to_string() +
            "' has error feedback; make the codec of its base() and wrap it in ErrorFeedback");
  }
  switch (method.kind()) {
    case CompressionKind::none:
      return detail::make_none_codec(method);
    case CompressionKind::fp16:
      return detail::make_fp16_codec(method);
    case CompressionKind::bf16:
      return detail::make_bf16_codec(method);
    case CompressionKind::topk:
      return detail::make_topk_codec(method);
    case CompressionKind::randomk:
      return detail::make_randomk_codec(method);
    case CompressionKind::threshold:
      return detail::make_threshold_codec(method);
    case CompressionKind::quantization:
      return detail::make_quantization_codec(method);
    case CompressionKind::signsgd:
      return detail::make_signsgd_codec(method);
  }
  throw Error(ErrorCode::internal, "make_codec: unknown compression kind " +
                                       std::to_string(static_cast<int>(method.kind())));
}

void accumulate(const CompressedGradient& g, float* out) {
  if (detail::is_dense_view(g)) {
    for (std::size_t i = 0; i < g.original_size; ++i) out[i] += g.values[i];
  } else {
    for (std::size_t j = 0; j < g.indices.size(); ++j) out[g.indices[j]] += g.values[j];
  }
}

}  // namespace zring::codec
