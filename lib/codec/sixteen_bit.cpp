// sixteen_bit.cpp - the fp16 / bf16 codec: the payload is n little-endian
// 16-bit words, and the view is those words widened again. Each method's
// format (its bulk conversions, half.cpp) is in its row (methods.cpp).
#include <algorithm>
#include <string>

#include "codec/codecs.hpp"
#include "codec/methods.hpp"
#include "codec/payload.hpp"

namespace zring::codec::detail {
namespace {

// Words and widened floats go through small (L1-resident) buffers and are
// appended to the payload and the view, which are written once each.
constexpr std::size_t kChunk = 2048;

class SixteenBitCodec final : public Codec {
 public:
  SixteenBitCodec(const CompressionMethod& method, SixteenBitFormat format)
      : method_(method), format_(format) {}

  const CompressionMethod& method() const noexcept override { return method_; }

  CompressedGradient compress(const float* x, std::size_t n, const CodecContext&) const override {
    CompressedGradient g = start_gradient(method_, n);
    reserve_for_append(g.payload, n * 2);
    reserve_for_append(g.values, n);
    std::uint16_t words[kChunk];
    float widened[kChunk];
    for (std::size_t at = 0; at < n; at += kChunk) {
      const std::size_t len = std::min(kChunk, n - at);
      format_.encode(x + at, len, words);
      append_u16s(g.payload, words, len);
      format_.decode(words, len, widened);
      g.values.insert(g.values.end(), widened, widened + len);
    }
    finish_gradient(g, 16);
    return g;
  }

  void decode(CompressedGradient& g) const override {
    const PayloadReader in(method_, g);
    const std::size_t n = g.original_size;
    if (g.payload.size() % 2 != 0 || g.payload.size() / 2 != n) {
      in.fail("expected " + std::to_string(n) + " 16-bit values");
    }
    g.indices.clear();
    resize_for_overwrite(g.values, n);
    std::uint16_t words[kChunk];
    for (std::size_t at = 0; at < n; at += kChunk) {
      const std::size_t len = std::min(kChunk, n - at);
      load_u16s(g.payload.data() + 2 * at, len, words);
      format_.decode(words, len, g.values.data() + at);
    }
    g.seed = 0;
    finish_gradient(g, 16);
  }

 private:
  CompressionMethod method_;
  SixteenBitFormat format_;
};

}  // namespace

std::unique_ptr<Codec> make_sixteen_bit_codec(const CompressionMethod& method) {
  return std::make_unique<SixteenBitCodec>(method, method_row(method.kind()).words);
}

}  // namespace zring::codec::detail
