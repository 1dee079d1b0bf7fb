// threshold.cpp - (index, value) pairs of the elements with |x| > t.
//
// The test is !(|x| <= t), so that nan, which compares false with
// everything, is kept rather than silently dropped; it is made on the
// values' bit patterns (magnitude_key), eight at a time without a branch.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "codec/codecs.hpp"
#include "codec/collect.hpp"
#include "codec/correction.hpp"
#include "codec/payload.hpp"
#include "codec/sparse.hpp"

namespace zring::codec {
namespace {

class ThresholdCodec final : public Codec {
 public:
  explicit ThresholdCodec(const CompressionMethod& method)
      : method_(method), bound_(magnitude_key(method.threshold_value()) + 1) {}

  const CompressionMethod& method() const noexcept override { return method_; }

  CompressedGradient compress(const float* x, std::size_t n, const CodecContext&) const override {
    auto in_place = [x](std::size_t begin, std::size_t) { return x + begin; };
    return select(n, in_place);
  }

  // x + r made into out block by block, each block collected from while
  // it is in the cache.
  CompressedGradient compress_corrected(const float* x, const float* r, std::size_t n, float* out,
                                        const CodecContext&, bool& finite) const override {
    CorrectedBlocks make(x, r, out);
    CompressedGradient g = select(n, make);
    finite = make.finite();
    return g;
  }

  void decode(CompressedGradient& g) const override {
    detail::decode_sparse(method_, g);
    g.seed = 0;
    detail::finish_gradient(g, 32);
  }

 private:
  // One branch-free pass: the elements of each block made by make_block
  // (make_blocks) whose magnitude passes the threshold, appended.
  template <class MakeBlock>
  CompressedGradient select(std::size_t n, MakeBlock& make_block) const {
    detail::check_indexable(method_, n);
    CompressedGradient g = detail::start_gradient(method_, n);
    std::uint32_t found[kCollectBlock], bits[kCollectBlock];
    for (std::size_t begin = 0; begin < n; begin += kCollectBlock) {
      const std::size_t end = std::min(n, begin + kCollectBlock);
      const float* block = make_block(begin, end) - begin;
      const std::size_t count = collect(block, begin, end, bound_, found, bits);
      g.indices.insert(g.indices.end(), found, found + count);
      for (std::size_t j = 0; j < count; ++j) g.values.push_back(std::bit_cast<float>(bits[j]));
    }
    detail::encode_sparse(g);
    detail::finish_gradient(g, 32);
    return g;
  }

  CompressionMethod method_;
  // Kept: !(|x| <= t), nan too. For t finite and >= 0 (the method's
  // rule), |x| <= t exactly when magnitude_key(x) <= magnitude_key(t), and
  // every nan's key lies above: kept are the keys from key(t) + 1 up.
  std::uint32_t bound_;
};

}  // namespace

std::unique_ptr<Codec> detail::make_threshold_codec(const CompressionMethod& method) {
  return std::make_unique<ThresholdCodec>(method);
}

}  // namespace zring::codec
