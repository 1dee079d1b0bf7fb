// registry.cpp - make_codec (method -> codec, from the method's row in
// methods.cpp) and accumulate (view -> sum).
#include <string>
#include <zring/error.hpp>

#include "codec/methods.hpp"
#include "codec/view.hpp"

namespace zring::codec {

std::unique_ptr<Codec> make_codec(const CompressionMethod& method) {
  if (method.has_error_feedback()) {
    throw Error(
        ErrorCode::invalid_argument,
        "make_codec: '" + method.to_string() +
            "' has error feedback; make the codec of its base() and wrap it in ErrorFeedback");
  }
  return method_row(method.kind()).make_codec(method);
}

void accumulate(const CompressedGradient& g, float* out) {
  if (detail::is_dense_view(g)) {
    for (std::size_t i = 0; i < g.original_size; ++i) out[i] += g.values[i];
  } else {
    for (std::size_t j = 0; j < g.indices.size(); ++j) out[g.indices[j]] += g.values[j];
  }
}

}  // namespace zring::codec
