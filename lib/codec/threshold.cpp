// threshold.cpp - (index, value) pairs of the elements with |x| > t.
//
// The test is written !(|x| <= t) so that nan, which compares false with
// everything, is kept rather than silently dropped.
#include <cmath>
#include <cstdint>
#include <vector>

#include "codec/codecs.hpp"
#include "codec/payload.hpp"
#include "codec/sparse.hpp"

namespace zring::codec {
namespace {

class ThresholdCodec final : public Codec {
 public:
  explicit ThresholdCodec(const CompressionMethod& method)
      : method_(method), t_(method.threshold_value()) {}

  const CompressionMethod& method() const noexcept override { return method_; }

  CompressedGradient compress(const float* x, std::size_t n, const CodecContext&) const override {
    detail::check_indexable(method_, n);
    CompressedGradient g = detail::start_gradient(method_, n);
    // Count first (a loop that vectorises), so the pairs are allocated once.
    std::size_t m = 0;
    for (std::size_t i = 0; i < n; ++i) m += kept(x[i]) ? 1 : 0;
    g.indices.resize(m);
    g.values.resize(m);
    std::size_t j = 0;
    for (std::size_t i = 0; i < n && j < m; ++i) {
      if (kept(x[i])) {
        g.indices[j] = static_cast<std::uint32_t>(i);
        g.values[j++] = x[i];
      }
    }
    detail::encode_sparse(g);
    detail::finish_gradient(g, 32);
    return g;
  }

  void decode(CompressedGradient& g) const override {
    detail::decode_sparse(method_, g);
    g.seed = 0;
    detail::finish_gradient(g, 32);
  }

 private:
  bool kept(float v) const noexcept { return !(std::fabs(v) <= t_); }

  CompressionMethod method_;
  float t_;
};

}  // namespace

std::unique_ptr<Codec> detail::make_threshold_codec(const CompressionMethod& method) {
  return std::make_unique<ThresholdCodec>(method);
}

}  // namespace zring::codec
