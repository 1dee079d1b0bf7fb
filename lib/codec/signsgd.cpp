// signsgd.cpp - one bit per element and one scale (mean |x|) per block.
//
// Layout: for each block of kBlockElems elements (the last one shorter) an
// f32 scale, the block's mean |x|; then packed_bytes(n, 1) bytes of sign
// bits: 1 means x >= 0 and decodes to +scale, 0 means x < 0 and decodes to
// -scale. A block holding inf or nan gets a nan scale and zero bits, so it
// decodes to nan.
//
// As an affine codec the grid is {offset -s, step 2s} with codes 0 and 1;
// the sign is exactly the nearest of the two grid points (ties at 0 go up),
// computed by comparison rather than arithmetic so it never rounds wrong.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "codec/affine_blocks.hpp"
#include "codec/codecs.hpp"
#include "codec/payload.hpp"
#include "codec/vector_clones.hpp"

namespace zring::codec {
namespace {

// The block's mean |x| from its statistics combined over contributors ranks.
inline float scale_of(const float* stats, std::size_t n, std::size_t contributors) noexcept {
  if (!std::isfinite(stats[0])) return detail::kNan;
  if (n == 0 || contributors == 0) return 0.0f;
  return static_cast<float>(static_cast<double>(stats[0]) /
                            (static_cast<double>(n) * contributors));
}

// The hot loops, as free functions so they can be built for two vector
// widths (vector_clones.hpp).

// Sum of |x| in 32 double accumulators: independent chains, enough of them
// that the adds' latency does not bound the loop (8 were: two chains of
// 4-wide adds with AVX2, each add waiting for the last), summed in an order fixed by
// the source (so the sum is the same on every build), and no overflow for
// any finite input. An inf or nan among the values makes it inf or nan.
ZRING_VECTOR_CLONES double sum_magnitudes(const float* x, std::size_t n) noexcept {
  constexpr std::size_t kLanes = 32;
  double lane[kLanes] = {};
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (std::size_t l = 0; l < kLanes; ++l) lane[l] += std::fabs(x[i + l]);
  }
  for (std::size_t l = 0; i < n; ++i, ++l) lane[l] += std::fabs(x[i]);
  for (std::size_t width = kLanes / 2; width != 0; width /= 2)
    for (std::size_t l = 0; l < width; ++l) lane[l] += lane[l + width];
  return lane[0];
}

ZRING_VECTOR_CLONES void sign_codes(const float* x, std::size_t n, std::uint32_t* codes) noexcept {
  for (std::size_t i = 0; i < n; ++i) codes[i] = x[i] >= 0.0f ? 1u : 0u;
}

ZRING_VECTOR_CLONES void decode_block(const std::uint32_t* codes, std::size_t n, float scale,
                                      float* out) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = codes[i] != 0 ? scale : -scale;
}

class SignCodec final : public AffineCodec {
 public:
  explicit SignCodec(const CompressionMethod& method) : method_(method) {}

  const CompressionMethod& method() const noexcept override { return method_; }
  std::size_t stats_per_block() const noexcept override { return 1; }
  std::uint32_t max_code() const noexcept override { return 1; }

  // {sum |x|}, or nan when the block holds inf or nan.
  void block_stats(const float* x, std::size_t n, float* stats) const noexcept override {
    // Finite values cannot make the double sum overflow: it is finite
    // exactly when every value is (one pass, not a second one to check).
    const double sum = sum_magnitudes(x, n);
    stats[0] = std::isfinite(sum) ? static_cast<float>(sum) : detail::kNan;
  }

  void combine_stats(float* acc, const float* other) const noexcept override {
    acc[0] = std::isnan(acc[0]) || std::isnan(other[0]) ? detail::kNan : acc[0] + other[0];
  }

  AffineGrid grid(const float* stats, std::size_t n,
                  std::size_t contributors) const noexcept override {
    const float s = scale_of(stats, n, contributors);
    return {-s, 2.0f * s};
  }

  void encode_codes(const float* x, std::size_t n, AffineGrid grid,
                    std::uint32_t* codes) const noexcept override {
    if (!detail::is_finite_grid(grid)) {
      std::fill(codes, codes + n, 0u);
      return;
    }
    sign_codes(x, n, codes);
  }

  CompressedGradient compress(const float* x, std::size_t n, const CodecContext&) const override;
  void decode(CompressedGradient& g) const override;

 private:
  CompressionMethod method_;
};

CompressedGradient SignCodec::compress(const float* x, std::size_t n, const CodecContext&) const {
  CompressedGradient g = detail::start_gradient(method_, n);
  const std::size_t blocks = detail::block_count(n);
  detail::resize_for_overwrite(g.payload, 4 * blocks + packed_bytes(n, 1));
  detail::reserve_for_append(g.values, n);
  std::uint8_t* stream = g.payload.data() + 4 * blocks;
  std::vector<std::uint32_t> codes(std::min(n, kBlockElems));
  std::vector<float> decoded(codes.size());
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t len = detail::block_length(n, b);
    const float* block = x + b * kBlockElems;
    float stats[1];
    block_stats(block, len, stats);
    const float scale = scale_of(stats, len, 1);
    detail::store_f32(g.payload.data() + 4 * b, scale);
    encode_codes(block, len, grid(stats, len, 1), codes.data());
    pack_bits(codes.data(), len, 1, stream + detail::block_code_offset(b, 1));
    decode_block(codes.data(), len, scale, decoded.data());
    g.values.insert(g.values.end(), decoded.begin(),
                    decoded.begin() + static_cast<std::ptrdiff_t>(len));
  }
  detail::finish_gradient(g, 1);
  return g;
}

void SignCodec::decode(CompressedGradient& g) const {
  const detail::PayloadReader in(method_, g);
  const std::size_t n = g.original_size;
  if (n / 8 > g.payload.size()) in.fail("too short for the tensor");
  const std::size_t blocks = detail::block_count(n);
  const std::size_t expected = 4 * blocks + packed_bytes(n, 1);
  if (g.payload.size() != expected) in.fail("expected " + std::to_string(expected) + " bytes");
  const std::uint8_t* stream = g.payload.data() + 4 * blocks;
  if (detail::has_stray_bits(stream, n, 1)) in.fail("stray bits after the last sign");

  std::vector<float> values = std::move(g.values);
  detail::resize_for_overwrite(values, n);
  std::vector<std::uint32_t> codes(std::min(n, kBlockElems));
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t len = detail::block_length(n, b);
    const float scale = detail::load_f32(g.payload.data() + 4 * b);
    if (!(std::isnan(scale) || (std::isfinite(scale) && scale >= 0.0f))) {
      in.fail("block " + std::to_string(b) + " has an invalid scale");
    }
    unpack_bits(stream + detail::block_code_offset(b, 1), len, 1, codes.data());
    if (std::isnan(scale) &&
        std::any_of(codes.begin(), codes.begin() + static_cast<std::ptrdiff_t>(len),
                    [](std::uint32_t c) { return c != 0; })) {
      in.fail("block " + std::to_string(b) + " has a nan scale but nonzero bits");
    }
    decode_block(codes.data(), len, scale, values.data() + b * kBlockElems);
  }
  g.indices.clear();
  g.values = std::move(values);
  g.seed = 0;
  detail::finish_gradient(g, 1);
}

}  // namespace

std::unique_ptr<Codec> detail::make_signsgd_codec(const CompressionMethod& method) {
  return std::make_unique<SignCodec>(method);
}

}  // namespace zring::codec
