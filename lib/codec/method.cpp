// method.cpp - CompressionMethod factories, kept_for and base; the decoded
// view's to_dense. The text form lives in method_text.cpp.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>
#include <zring/compression.hpp>
#include <zring/error.hpp>

#include "codec/method_text.hpp"
#include "codec/methods.hpp"
#include "codec/view.hpp"

namespace zring {
namespace {

[[noreturn]] void invalid(const std::string& what) {
  throw Error(ErrorCode::invalid_argument,
              "compression method: " + what + " (" + codec::accepted_methods() + ")");
}

bool valid_ratio(double r) { return r > 0.0 && r <= 1.0; }  // false for nan

}  // namespace

CompressionMethod CompressionMethod::none() { return {}; }

CompressionMethod CompressionMethod::fp16() {
  CompressionMethod m;
  m.kind_ = CompressionKind::fp16;
  return m;
}

CompressionMethod CompressionMethod::bf16() {
  CompressionMethod m;
  m.kind_ = CompressionKind::bf16;
  return m;
}

// topk and randomk share their parameter forms: a count or a ratio.
CompressionMethod CompressionMethod::counted(CompressionKind kind, const char* name,
                                             std::size_t k) {
  if (k == 0) invalid(std::string(name) + " needs k >= 1, got 0");
  CompressionMethod m;
  m.kind_ = kind;
  m.count_ = k;
  return m;
}

CompressionMethod CompressionMethod::fraction(CompressionKind kind, const char* name,
                                              double ratio) {
  if (!valid_ratio(ratio)) {
    invalid(std::string(name) + " ratio must be in (0, 1], got " +
            codec::detail::format_double(ratio));
  }
  CompressionMethod m;
  m.kind_ = kind;
  m.is_ratio_ = true;
  m.ratio_ = ratio;
  return m;
}

CompressionMethod CompressionMethod::topk(std::size_t k) {
  return counted(CompressionKind::topk, "topk", k);
}

CompressionMethod CompressionMethod::topk_ratio(double ratio) {
  return fraction(CompressionKind::topk, "topk", ratio);
}

CompressionMethod CompressionMethod::randomk(std::size_t k) {
  return counted(CompressionKind::randomk, "randomk", k);
}

CompressionMethod CompressionMethod::randomk_ratio(double ratio) {
  return fraction(CompressionKind::randomk, "randomk", ratio);
}

CompressionMethod CompressionMethod::threshold(float t) {
  if (!(t >= 0.0f) || !std::isfinite(t)) {
    invalid("threshold must be a finite number >= 0, got " + codec::detail::format_float(t));
  }
  CompressionMethod m;
  m.kind_ = CompressionKind::threshold;
  m.threshold_ = t + 0.0f;  // -0 becomes +0, so equal methods print alike
  return m;
}

CompressionMethod CompressionMethod::quantization(unsigned bits) {
  if (bits < 1 || bits > 16) invalid("quantization needs 1..16 bits, got " + std::to_string(bits));
  CompressionMethod m;
  m.kind_ = CompressionKind::quantization;
  m.bits_ = bits;
  return m;
}

CompressionMethod CompressionMethod::signsgd() {
  CompressionMethod m;
  m.kind_ = CompressionKind::signsgd;
  return m;
}

CompressionMethod CompressionMethod::error_feedback(const CompressionMethod& base) {
  if (base.error_feedback_) {
    invalid("error feedback cannot wrap '" + base.to_string() + "', which already has it");
  }
  CompressionMethod m = base;
  m.error_feedback_ = true;
  return m;
}

CompressionMethod CompressionMethod::base() const {
  CompressionMethod m = *this;
  m.error_feedback_ = false;
  return m;
}

std::size_t CompressionMethod::kept_for(std::size_t n) const noexcept {
  const auto rows = codec::method_rows();
  const auto at = static_cast<std::size_t>(kind_);
  if (at >= rows.size() || rows[at].parameter != codec::Parameter::kept) return n;
  if (n == 0) return 0;
  if (!is_ratio_) return std::min(count_, n);
  const long long wanted = std::llround(ratio_ * static_cast<double>(n));
  return std::clamp<std::size_t>(static_cast<std::size_t>(std::max(wanted, 1LL)), 1, n);
}

std::vector<float> CompressedGradient::to_dense() const {
  if (codec::detail::is_dense_view(*this)) return values;
  std::vector<float> out(original_size, 0.0f);
  for (std::size_t j = 0; j < indices.size(); ++j) out[indices[j]] = values[j];
  return out;
}

namespace codec::detail {

bool is_dense_view(const CompressedGradient& g) {
  if (g.indices.empty() && g.values.size() == g.original_size) return true;
  if (g.indices.size() != g.values.size()) {
    throw Error(ErrorCode::invalid_argument,
                "compressed gradient (" + g.method.to_string() + "): the view has " +
                    std::to_string(g.indices.size()) + " indices but " +
                    std::to_string(g.values.size()) + " values for a tensor of " +
                    std::to_string(g.original_size) + " elements");
  }
  for (std::uint32_t index : g.indices) {
    if (index >= g.original_size) {
      throw Error(ErrorCode::invalid_argument, "compressed gradient (" + g.method.to_string() +
                                                   "): index " + std::to_string(index) +
                                                   " is outside the tensor of " +
                                                   std::to_string(g.original_size) + " elements");
    }
  }
  return false;
}

}  // namespace codec::detail
}  // namespace zring
