// none.cpp - no compression: the payload is the n float32 values.
#include <cstdint>
#include <string>

#include "codec/codecs.hpp"
#include "codec/payload.hpp"

namespace zring::codec {
namespace {

class NoneCodec final : public Codec {
 public:
  explicit NoneCodec(const CompressionMethod& method) : method_(method) {}

  const CompressionMethod& method() const noexcept override { return method_; }

  CompressedGradient compress(const float* x, std::size_t n, const CodecContext&) const override {
    CompressedGradient g = detail::start_gradient(method_, n);
    detail::reserve_for_append(g.payload, n * sizeof(float));
    if constexpr (detail::kLittleEndian) {
      const auto* bytes = reinterpret_cast<const std::uint8_t*>(x);
      g.payload.insert(g.payload.end(), bytes, bytes + n * sizeof(float));
    } else {
      g.payload.resize(n * sizeof(float));
      detail::store_f32s(x, n, g.payload.data());
    }
    detail::reserve_for_append(g.values, n);
    g.values.insert(g.values.end(), x, x + n);
    detail::finish_gradient(g, 32);
    return g;
  }

  void decode(CompressedGradient& g) const override {
    const detail::PayloadReader in(method_, g);
    const std::size_t n = g.original_size;
    if (g.payload.size() % sizeof(float) != 0 || g.payload.size() / sizeof(float) != n) {
      in.fail("expected " + std::to_string(n) + " float32 values");
    }
    g.indices.clear();
    detail::resize_for_overwrite(g.values, n);
    detail::load_f32s(g.payload.data(), n, g.values.data());
    g.seed = 0;
    detail::finish_gradient(g, 32);
  }

 private:
  CompressionMethod method_;
};

}  // namespace

std::unique_ptr<Codec> detail::make_none_codec(const CompressionMethod& method) {
  return std::make_unique<NoneCodec>(method);
}

}  // namespace zring::codec
