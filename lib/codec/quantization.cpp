// quantization.cpp - b-bit codes on an affine grid per block (1 <= b <= 16).
//
// Layout: for each block of kBlockElems elements (the last one shorter) an
// f32 offset and f32 step; then packed_bytes(n, b) bytes of b-bit codes for
// all n elements. The grid runs from the block's minimum to its maximum in
// 2^b - 1 steps, and a value decodes to offset + code * step, within step/2
// of the original (plus float rounding). A block holding inf or nan gets a
// nan grid, so it decodes to nan: an overflow is never hidden.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "codec/affine_blocks.hpp"
#include "codec/codecs.hpp"
#include "codec/payload.hpp"
#include "codec/vector_clones.hpp"

namespace zring::codec {
namespace {

// Floats as signed integers that order like the floats (for non-nan): the
// magnitude bits of negatives are flipped. The map is its own inverse.
inline std::int32_t ordered(std::uint32_t bits) noexcept {
  const std::uint32_t flip = static_cast<std::uint32_t>(static_cast<std::int32_t>(bits) >> 31) >> 1;
  return static_cast<std::int32_t>(bits ^ flip);
}
inline float from_ordered(std::int32_t key) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(ordered(static_cast<std::uint32_t>(key))));
}

inline float nan_min(float a, float b) noexcept {
  return std::isnan(a) || std::isnan(b) ? detail::kNan : std::min(a, b);
}
inline float nan_max(float a, float b) noexcept {
  return std::isnan(a) || std::isnan(b) ? detail::kNan : std::max(a, b);
}

// The hot loops, as free functions so they can be built for two vector
// widths (vector_clones.hpp).

// The smallest and largest order keys of n values, and the largest |x| bit
// pattern (inf or nan when it reaches 0x7f800000), in one pass. Integer
// min/max reductions vectorise; float ones (which must honour nan) do not.
struct KeyRange {
  std::int32_t lo = std::numeric_limits<std::int32_t>::max();
  std::int32_t hi = std::numeric_limits<std::int32_t>::min();
  std::uint32_t largest_magnitude = 0;
};

ZRING_VECTOR_CLONES KeyRange key_range(const float* x, std::size_t n) noexcept {
  KeyRange r;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(x[i]);
    const std::int32_t key = ordered(bits);
    r.lo = std::min(r.lo, key);
    r.hi = std::max(r.hi, key);
    r.largest_magnitude = std::max(r.largest_magnitude, bits & 0x7fffffffu);
  }
  return r;
}

// Multiply by the inverse step and round by adding 0.5 and truncating, on
// values clamped to [0, top] first (nan clamps to 0), so the integer
// conversion is always defined.
ZRING_VECTOR_CLONES void encode_on_grid(const float* x, std::size_t n, float offset, float inverse,
                                        float top, std::uint32_t* codes) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    float v = (x[i] - offset) * inverse;
    v = v > 0.0f ? v : 0.0f;
    v = v < top ? v : top;
    codes[i] = static_cast<std::uint32_t>(static_cast<std::int32_t>(v + 0.5f));
  }
}

// The same in double, for more than 12 bits: there a float product is off by
// up to 2^-24 of 2^16 codes, enough to round a visible share of values to
// the neighbouring code; in double the code is exact but for ties.
ZRING_VECTOR_CLONES void encode_on_grid_wide(const float* x, std::size_t n, double offset,
                                             double inverse, double top,
                                             std::uint32_t* codes) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    double v = (static_cast<double>(x[i]) - offset) * inverse;
    v = v > 0.0 ? v : 0.0;
    v = v < top ? v : top;
    codes[i] = static_cast<std::uint32_t>(static_cast<std::int32_t>(v + 0.5));
  }
}

// The view of one block: the grid value of each code. Shared by compress
// and decode so both produce the same bits.
ZRING_VECTOR_CLONES void decode_block(const std::uint32_t* codes, std::size_t n, AffineGrid grid,
                                      float* out) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = affine_value(grid, codes[i]);
}

class QuantizationCodec final : public AffineCodec {
 public:
  explicit QuantizationCodec(const CompressionMethod& method)
      : method_(method), bits_(method.bits()), max_code_((1u << method.bits()) - 1) {}

  const CompressionMethod& method() const noexcept override { return method_; }
  std::size_t stats_per_block() const noexcept override { return 2; }
  std::uint32_t max_code() const noexcept override { return max_code_; }

  // {min, max}, or nan for both when the block holds inf or nan.
  void block_stats(const float* x, std::size_t n, float* stats) const noexcept override {
    if (n == 0) {
      stats[0] = stats[1] = 0.0f;
      return;
    }
    const KeyRange r = key_range(x, n);
    const bool bad = r.largest_magnitude >= 0x7f800000u;
    stats[0] = bad ? detail::kNan : from_ordered(r.lo);
    stats[1] = bad ? detail::kNan : from_ordered(r.hi);
  }

  void combine_stats(float* acc, const float* other) const noexcept override {
    acc[0] = nan_min(acc[0], other[0]);
    acc[1] = nan_max(acc[1], other[1]);
  }

  // Contributors do not matter: the grid spans the combined [min, max].
  AffineGrid grid(const float* stats, std::size_t, std::size_t) const noexcept override {
    if (!std::isfinite(stats[0]) || !std::isfinite(stats[1])) return {detail::kNan, detail::kNan};
    // In double, so a range wider than float's (-3e38 .. 3e38) still gives
    // a step. Capped so that max_code * step stays finite: such a block
    // loses accuracy at its top but never decodes to inf.
    const double step = (static_cast<double>(stats[1]) - stats[0]) / max_code_;
    const double cap = double{std::numeric_limits<float>::max()} / (max_code_ + 1.0);
    return {stats[0], static_cast<float>(std::min(step, cap))};
  }

  void encode_codes(const float* x, std::size_t n, AffineGrid grid,
                    std::uint32_t* codes) const noexcept override {
    if (!detail::is_finite_grid(grid)) {
      std::fill(codes, codes + n, 0u);
      return;
    }
    if (bits_ > 12) {
      const double inverse = grid.step > 0.0f ? 1.0 / static_cast<double>(grid.step) : 0.0;
      encode_on_grid_wide(x, n, grid.offset, inverse, max_code_, codes);
      return;
    }
    const float inverse = grid.step > 0.0f ? 1.0f / grid.step : 0.0f;
    encode_on_grid(x, n, grid.offset, inverse, static_cast<float>(max_code_), codes);
  }

  CompressedGradient compress(const float* x, std::size_t n, const CodecContext&) const override;
  void decode(CompressedGradient& g) const override;

 private:
  CompressionMethod method_;
  unsigned bits_;
  std::uint32_t max_code_;
};

CompressedGradient QuantizationCodec::compress(const float* x, std::size_t n,
                                               const CodecContext&) const {
  CompressedGradient g = detail::start_gradient(method_, n);
  const std::size_t blocks = detail::block_count(n);
  detail::resize_for_overwrite(g.payload, 8 * blocks + packed_bytes(n, bits_));
  detail::reserve_for_append(g.values, n);
  std::uint8_t* headers = g.payload.data();
  std::uint8_t* stream = headers + 8 * blocks;
  std::vector<std::uint32_t> codes(std::min(n, kBlockElems));
  std::vector<float> decoded(codes.size());
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t len = detail::block_length(n, b);
    const float* block = x + b * kBlockElems;
    float stats[2];
    block_stats(block, len, stats);
    const AffineGrid grid_b = grid(stats, len, 1);
    detail::store_f32(headers + 8 * b, grid_b.offset);
    detail::store_f32(headers + 8 * b + 4, grid_b.step);
    encode_codes(block, len, grid_b, codes.data());
    pack_bits(codes.data(), len, bits_, stream + detail::block_code_offset(b, bits_));
    decode_block(codes.data(), len, grid_b, decoded.data());
    g.values.insert(g.values.end(), decoded.begin(),
                    decoded.begin() + static_cast<std::ptrdiff_t>(len));
  }
  detail::finish_gradient(g, bits_);
  return g;
}

void QuantizationCodec::decode(CompressedGradient& g) const {
  const detail::PayloadReader in(method_, g);
  const std::size_t n = g.original_size;
  // n <= 8 * payload size holds for every valid payload; checking it first
  // keeps the size arithmetic below from overflowing.
  if (n / 8 > g.payload.size()) in.fail("too short for the tensor");
  const std::size_t blocks = detail::block_count(n);
  const std::size_t expected = 8 * blocks + packed_bytes(n, bits_);
  if (g.payload.size() != expected) in.fail("expected " + std::to_string(expected) + " bytes");
  const std::uint8_t* stream = g.payload.data() + 8 * blocks;
  if (detail::has_stray_bits(stream, n, bits_)) in.fail("stray bits after the last code");

  std::vector<float> values = std::move(g.values);
  detail::resize_for_overwrite(values, n);
  std::vector<std::uint32_t> codes(std::min(n, kBlockElems));
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t len = detail::block_length(n, b);
    const AffineGrid grid_b{detail::load_f32(g.payload.data() + 8 * b),
                            detail::load_f32(g.payload.data() + 8 * b + 4)};
    const bool finite = detail::is_finite_grid(grid_b) && grid_b.step >= 0.0f;
    const bool nan = std::isnan(grid_b.offset) && std::isnan(grid_b.step);
    if (!finite && !nan) in.fail("block " + std::to_string(b) + " has an invalid grid");
    unpack_bits(stream + detail::block_code_offset(b, bits_), len, bits_, codes.data());
    if (nan && std::any_of(codes.begin(), codes.begin() + static_cast<std::ptrdiff_t>(len),
                           [](std::uint32_t c) { return c != 0; })) {
      in.fail("block " + std::to_string(b) + " has a nan grid but nonzero codes");
    }
    decode_block(codes.data(), len, grid_b, values.data() + b * kBlockElems);
  }
  g.indices.clear();
  g.values = std::move(values);
  g.seed = 0;
  detail::finish_gradient(g, bits_);
}

}  // namespace

std::unique_ptr<Codec> detail::make_quantization_codec(const CompressionMethod& method) {
  return std::make_unique<QuantizationCodec>(method);
}

}  // namespace zring::codec
