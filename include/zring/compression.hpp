// zring/compression.hpp - compression methods and what a compressed gradient is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace zring {

// The codec families. error_feedback is not a kind: it wraps any of these.
enum class CompressionKind : std::uint8_t {
  none,          // float32 values
  fp16,          // IEEE half, round to nearest even
  bf16,          // bfloat16, round to nearest even
  topk,          // the k largest magnitudes, as (index, value) pairs
  randomk,       // k values at indices drawn from a seed every rank can reproduce
  threshold,     // (index, value) pairs with |value| > t
  quantization,  // b-bit codes on an affine grid per block (1 <= b <= 16)
  signsgd,       // 1 bit per element and one scale (mean |g|) per block
};

// A compression method: a kind, its parameter, and optionally error feedback.
// Text form (parse / to_string round-trip):
//   none | fp16 | bf16 | topk:K | topk:R% | randomk:K | randomk:R% |
//   threshold:T | quant:B | sign | ef:<any of these>
// A value type: cheap to copy, comparable.
class CompressionMethod {
 public:
  CompressionMethod() = default;  // none

  static CompressionMethod none();
  static CompressionMethod fp16();
  static CompressionMethod bf16();
  static CompressionMethod topk(std::size_t k);          // k >= 1
  static CompressionMethod topk_ratio(double ratio);     // 0 < ratio <= 1
  static CompressionMethod randomk(std::size_t k);       // k >= 1
  static CompressionMethod randomk_ratio(double ratio);  // 0 < ratio <= 1
  static CompressionMethod threshold(float t);           // t >= 0, finite
  static CompressionMethod quantization(unsigned bits);  // 1..16
  static CompressionMethod signsgd();
  // Wraps base (which must not itself have error feedback).
  static CompressionMethod error_feedback(const CompressionMethod& base);

  // Parses the text form; throws zring::Error(invalid_argument) naming the
  // offending text and the accepted forms.
  static CompressionMethod parse(std::string_view text);
  [[nodiscard]] std::string to_string() const;

  [[nodiscard]] CompressionKind kind() const noexcept { return kind_; }
  [[nodiscard]] bool has_error_feedback() const noexcept { return error_feedback_; }
  // The method without error feedback.
  [[nodiscard]] CompressionMethod base() const;

  // Parameters (meaningful for the kinds that have them).
  [[nodiscard]] bool is_ratio() const noexcept { return is_ratio_; }
  [[nodiscard]] std::size_t count() const noexcept { return count_; }
  [[nodiscard]] double ratio() const noexcept { return ratio_; }
  [[nodiscard]] float threshold_value() const noexcept { return threshold_; }
  [[nodiscard]] unsigned bits() const noexcept { return bits_; }

  // For topk / randomk: how many of n elements are kept (0 when n == 0,
  // otherwise between 1 and n). For the other kinds: n.
  [[nodiscard]] std::size_t kept_for(std::size_t n) const noexcept;

  friend bool operator==(const CompressionMethod& a, const CompressionMethod& b) {
    return a.kind_ == b.kind_ && a.error_feedback_ == b.error_feedback_ &&
           a.is_ratio_ == b.is_ratio_ && a.count_ == b.count_ && a.ratio_ == b.ratio_ &&
           a.threshold_ == b.threshold_ && a.bits_ == b.bits_;
  }
  friend bool operator!=(const CompressionMethod& a, const CompressionMethod& b) {
    return !(a == b);
  }

 private:
  static CompressionMethod counted(CompressionKind kind, const char* name, std::size_t k);
  static CompressionMethod fraction(CompressionKind kind, const char* name, double ratio);

  CompressionKind kind_ = CompressionKind::none;
  bool error_feedback_ = false;
  bool is_ratio_ = false;
  std::size_t count_ = 0;
  double ratio_ = 0.0;
  float threshold_ = 0.0f;
  unsigned bits_ = 32;
};

// One tensor as it travels: the real encoded bytes (payload) and, for the
// caller's convenience, the decoded view of them.
//
// The view: indices empty means dense (values has original_size entries);
// otherwise values[j] belongs at indices[j] and every other element is zero.
// Values are the dequantized float32 numbers, i.e. D(C(g)).
struct CompressedGradient {
  CompressionMethod method;            // the codec (never with error feedback)
  std::vector<std::uint32_t> indices;  // sorted ascending; empty when dense
  std::vector<float> values;           // dequantized float32
  std::size_t original_size = 0;       // elements of the uncompressed tensor
  std::vector<std::size_t> shape;      // shape of the uncompressed tensor
  double compression_ratio = 1.0;      // payload_bytes() / dense_bytes()
  unsigned value_bits = 32;            // bits per transmitted value
  std::uint64_t seed = 0;              // randomk: the seed that picked indices
  std::vector<std::uint8_t> payload;   // the encoded bytes that travel

  // Exactly the size of the encoding that travels, in bytes.
  [[nodiscard]] std::size_t payload_bytes() const noexcept { return payload.size(); }
  // What the same tensor costs as dense float32.
  [[nodiscard]] std::size_t dense_bytes() const noexcept { return original_size * sizeof(float); }
  // Scatters the view into a dense vector of original_size floats.
  [[nodiscard]] std::vector<float> to_dense() const;
};

using CompressedMap = std::map<std::string, CompressedGradient>;

}  // namespace zring
