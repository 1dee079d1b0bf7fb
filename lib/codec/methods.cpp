// methods.cpp - the table of compression methods (methods.hpp): one row
// per method, in the order of CompressionKind.
#include "codec/methods.hpp"

#include <array>
#include <string>
#include <zring/error.hpp>

#include "codec/codecs.hpp"

namespace zring::codec {
namespace {

using M = CompressionMethod;

const std::array kRows = {
    // float32 values, summed as floats.
    MethodRow{.kind = CompressionKind::none,
              .text = "none",
              .identifier = "none",
              .parameter = Parameter::none,
              .summation = Summation::dense_float,
              .make_codec = &detail::make_none_codec,
              .plain = &M::none},
    // IEEE binary16 (conversions in half.cpp): relative error at most 2^-11
    // in the normal range; beyond +-65504 values become inf.
    MethodRow{.kind = CompressionKind::fp16,
              .text = "fp16",
              .identifier = "fp16",
              .parameter = Parameter::none,
              .summation = Summation::rounded_half,
              .make_codec = &detail::make_sixteen_bit_codec,
              .plain = &M::fp16,
              .words = {&floats_to_halves, &halves_to_floats}},
    // bfloat16: float32's range with 8 bits of precision, relative error at
    // most 2^-8.
    MethodRow{.kind = CompressionKind::bf16,
              .text = "bf16",
              .identifier = "bf16",
              .parameter = Parameter::none,
              .summation = Summation::rounded_half,
              .make_codec = &detail::make_sixteen_bit_codec,
              .plain = &M::bf16,
              .words = {&floats_to_bf16s, &bf16s_to_floats}},
    MethodRow{.kind = CompressionKind::topk,
              .text = "topk",
              .identifier = "topk",
              .parameter = Parameter::kept,
              .summation = Summation::sparse,
              .make_codec = &detail::make_topk_codec,
              .count = &M::topk,
              .ratio = &M::topk_ratio},
    MethodRow{.kind = CompressionKind::randomk,
              .text = "randomk",
              .identifier = "randomk",
              .parameter = Parameter::kept,
              .summation = Summation::shared_indices,
              .make_codec = &detail::make_randomk_codec,
              .count = &M::randomk,
              .ratio = &M::randomk_ratio},
    MethodRow{.kind = CompressionKind::threshold,
              .text = "threshold",
              .identifier = "threshold",
              .parameter = Parameter::threshold,
              .summation = Summation::sparse,
              .make_codec = &detail::make_threshold_codec,
              .real = &M::threshold},
    MethodRow{.kind = CompressionKind::quantization,
              .text = "quant",
              .identifier = "quantization",
              .parameter = Parameter::bits,
              .summation = Summation::affine_codes,
              .make_codec = &detail::make_quantization_codec,
              .bits = &M::quantization},
    MethodRow{.kind = CompressionKind::signsgd,
              .text = "sign",
              .identifier = "signsgd",
              .parameter = Parameter::none,
              .summation = Summation::affine_codes,
              .make_codec = &detail::make_signsgd_codec,
              .plain = &M::signsgd},
};

// The forms of one row in the accepted list.
std::string forms_of(const MethodRow& row) {
  const std::string name = row.text;
  switch (row.parameter) {
    case Parameter::none:
      return name;
    case Parameter::kept:
      return name + ":K | " + name + ":R%";
    case Parameter::threshold:
      return name + ":T";
    case Parameter::bits:
      return name + ":B with B in 1..16";
  }
  return name;
}

}  // namespace

std::span<const MethodRow> method_rows() noexcept { return kRows; }

const MethodRow& method_row(CompressionKind kind) {
  const auto at = static_cast<std::size_t>(kind);
  if (at >= kRows.size() || kRows[at].kind != kind) {
    throw Error(ErrorCode::internal,
                "compression kind " + std::to_string(at) + " has no row in codec/methods.cpp");
  }
  return kRows[at];
}

const MethodRow* method_named(std::string_view name) noexcept {
  for (const MethodRow& row : kRows) {
    if (name == row.text || name == row.identifier) return &row;
  }
  return nullptr;
}

const std::string& accepted_methods() {
  static const std::string text = [] {
    std::string all = "accepted:";
    for (const MethodRow& row : kRows) all += " " + forms_of(row) + " |";
    return all + " ef:<one of these>";
  }();
  return text;
}

Summation Codec::summation() const { return method_row(method().kind()).summation; }

}  // namespace zring::codec
