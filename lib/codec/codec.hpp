// codec.hpp - the codec interface (internal to libzring).
//
// A codec turns n float32 values into the bytes that travel (the payload) and
// back. It works on any run of values: a whole tensor or one chunk of it.
// Each codec also says how its encoded values may be combined along a ring
// without breaking the aggregation contract (docs/aggregation.md): the ring
// never re-compresses a partial sum lossily.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>
#include <zring/compression.hpp>

namespace zring::codec {

// How the values of a codec are summed across ranks: it picks the ring's
// schedule for the method (collective/allreduce_op.cpp, make_plan). Each
// method's is in its row of the table of methods (methods.cpp).
enum class Summation {
  dense_float,     // none: float32 values, summed as floats
  rounded_half,    // fp16/bf16: 16-bit values; partial sums rounded per hop (documented)
  affine_codes,    // quantization/signsgd: integer codes on a grid all ranks share,
                   // summed exactly in widened integers
  shared_indices,  // randomk: indices from a shared seed, float32 values summed
  sparse,          // topk/threshold: (index, value) pairs; gathered, summed in rank order
};

// Per-call inputs that are not part of the method.
struct CodecContext {
  std::uint64_t seed = 0;  // randomk: picks the indices (all ranks use the same)
};

class Codec {
 public:
  virtual ~Codec() = default;
  [[nodiscard]] virtual const CompressionMethod& method() const noexcept = 0;
  // The summation of the method's row (methods.hpp).
  [[nodiscard]] Summation summation() const;

  // Compresses n values. The result has method, original_size = n,
  // shape = {n}, payload (the real encoding), the decoded view (indices,
  // values = D(C(x))), value_bits and compression_ratio filled in.
  [[nodiscard]] virtual CompressedGradient compress(const float* x, std::size_t n,
                                                    const CodecContext& ctx) const = 0;

  // Error feedback's compress: the corrected values x + r made into out
  // (out may be r, never x; r null: x itself, make_corrected), `finite`
  // set as make_corrected answers, and compress of out. The same result as
  // making them first and compressing them after, which is what this does
  // by default; top-k reads them as it makes them, block by block, one pass
  // over the tensor fewer.
  [[nodiscard]] virtual CompressedGradient compress_corrected(const float* x, const float* r,
                                                              std::size_t n, float* out,
                                                              const CodecContext& ctx,
                                                              bool& finite) const;

  // Validates g.payload for a tensor of g.original_size elements and fills
  // the view (indices, values, seed, value_bits, compression_ratio). The
  // payload is untrusted: every length, index and width is checked and a bad
  // one throws zring::Error(malformed_message); nothing is allocated beyond
  // what original_size and the payload length justify.
  virtual void decode(CompressedGradient& g) const = 0;
};

// A codec for a method without error feedback. Throws Error(invalid_argument)
// when the method has error feedback (use ErrorFeedback around the base).
[[nodiscard]] std::unique_ptr<Codec> make_codec(const CompressionMethod& method);

// Adds the view of g (dense or sparse) into out[0 .. g.original_size).
void accumulate(const CompressedGradient& g, float* out);

// ---------------------------------------------------------------------------
// Affine-code codecs (quantization, signsgd): value = offset + code * step.
// Used per block of kBlockElems consecutive elements of a tensor (the last
// block may be shorter). The standalone codec derives each block's grid from
// its own statistics; the ring first combines the statistics of all ranks so
// every rank encodes on the same grid and codes can be summed exactly.

inline constexpr std::size_t kBlockElems = 4096;

struct AffineGrid {
  float offset = 0.0f;
  float step = 0.0f;  // 0 when all values of the block are equal
};

class AffineCodec : public Codec {
 public:
  // Floats of statistics per block (quantization: min, max; signsgd: sum |x|).
  [[nodiscard]] virtual std::size_t stats_per_block() const noexcept = 0;
  // Statistics of one block of n values. A block holding inf or nan has
  // nan statistics, so its grid (and every value decoded on it) is nan.
  virtual void block_stats(const float* x, std::size_t n, float* stats) const noexcept = 0;
  // acc <- combine(acc, other) for one block; nan is sticky.
  virtual void combine_stats(float* acc, const float* other) const noexcept = 0;
  // The grid of one block of n elements from statistics combined over
  // contributors ranks.
  [[nodiscard]] virtual AffineGrid grid(const float* stats, std::size_t n,
                                        std::size_t contributors) const noexcept = 0;
  // Largest code (2^bits - 1).
  [[nodiscard]] virtual std::uint32_t max_code() const noexcept = 0;
  // Codes of n values on grid: round to nearest, clamped to [0, max_code];
  // all zero when the grid is not finite.
  virtual void encode_codes(const float* x, std::size_t n, AffineGrid grid,
                            std::uint32_t* codes) const noexcept = 0;
};

// The grid value of a code.
inline float affine_value(AffineGrid g, std::uint32_t code) noexcept {
  return g.offset + static_cast<float>(code) * g.step;
}

// ---------------------------------------------------------------------------
// Pieces the ring shares with the codecs.

// IEEE binary16 and bfloat16, round to nearest even; inf and nan preserved
// (nan stays nan), finite values beyond the range become inf.
std::uint16_t float_to_half(float f) noexcept;
float half_to_float(std::uint16_t h) noexcept;
std::uint16_t float_to_bf16(float f) noexcept;
float bf16_to_float(std::uint16_t h) noexcept;
void floats_to_halves(const float* x, std::size_t n, std::uint16_t* out) noexcept;
void halves_to_floats(const std::uint16_t* h, std::size_t n, float* out) noexcept;
void floats_to_bf16s(const float* x, std::size_t n, std::uint16_t* out) noexcept;
void bf16s_to_floats(const std::uint16_t* h, std::size_t n, float* out) noexcept;

// k distinct indices in [0, n), sorted ascending, drawn from seed by a
// generator that is the same on every platform (so every rank draws the same).
// Throws Error(invalid_argument) unless k <= n <= 2^32.
std::vector<std::uint32_t> random_indices(std::uint64_t seed, std::size_t n, std::size_t k);

// Ascending indices of the inf/nan values of x[0 .. n) that are not in
// `sampled` (ascending): what randomk sends besides its sample. Each block
// is tested whole without a branch first, overflow being rare.
std::vector<std::uint32_t> unsampled_nonfinite(const float* x, std::size_t n,
                                               const std::vector<std::uint32_t>& sampled);

// The randomk seed of one tensor in one op: the op's seed (shared by every
// rank) mixed with a hash of the tensor's name, so tensors draw different
// indices and every rank derives the same seed for the same tensor.
std::uint64_t tensor_seed(std::uint64_t op_seed, std::string_view tensor_name);

// Bit packing of codes of `bits` bits (1..32), LSB first, into
// packed_bytes(n, bits) bytes.
[[nodiscard]] constexpr std::size_t packed_bytes(std::size_t n, unsigned bits) noexcept {
  return (n * bits + 7) / 8;
}
void pack_bits(const std::uint32_t* codes, std::size_t n, unsigned bits,
               std::uint8_t* out) noexcept;
void unpack_bits(const std::uint8_t* in, std::size_t n, unsigned bits,
                 std::uint32_t* codes) noexcept;

}  // namespace zring::codec
