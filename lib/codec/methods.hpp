// methods.hpp - the table of compression methods (internal): one row per
// CompressionKind, and the one place that says, per method, how its text
// reads and prints, which codec it makes, how the ring sums it and what
// else the ring needs to know of it.
//
// The text form (method_text.cpp), the factories' checks (method.cpp),
// make_codec (registry.cpp), Codec::summation(), the ring's choice of plan
// (collective/allreduce_op.cpp) and the dense plan's 16-bit round trips
// (collective/plan_dense.cpp) all read the rows; none of them names a
// method. Adding one: its CompressionKind and public factory
// (include/zring/compression.hpp, method.cpp), its codec file, and its row
// in methods.cpp (docs/architecture.md, "Adding a compression method").
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "codec/codec.hpp"

namespace zring::codec {

// The forms of a method's parameter in its text.
enum class Parameter {
  none,       // "NAME"
  kept,       // "NAME:K" (a count) or "NAME:R%" (a ratio)
  threshold,  // "NAME:T", a float >= 0
  bits,       // "NAME:B", 1..16 bits
};

// How floats become 16-bit words and back (fp16, bf16), in bulk.
struct SixteenBitFormat {
  void (*encode)(const float* x, std::size_t n, std::uint16_t* out) noexcept = nullptr;
  void (*decode)(const std::uint16_t* h, std::size_t n, float* out) noexcept = nullptr;
};

struct MethodRow {
  CompressionKind kind;
  const char* text;        // the name to_string prints
  const char* identifier;  // the enum's name, which parses too ("quantization")
  Parameter parameter;
  Summation summation;  // how the ring sums it: picks its plan
  std::unique_ptr<Codec> (*make_codec)(const CompressionMethod& method);
  // The public factory of its parameter form (the others are null).
  CompressionMethod (*plain)() = nullptr;
  CompressionMethod (*count)(std::size_t k) = nullptr;
  CompressionMethod (*ratio)(double r) = nullptr;
  CompressionMethod (*real)(float t) = nullptr;
  CompressionMethod (*bits)(unsigned b) = nullptr;
  // Summation::rounded_half: the 16-bit words its values travel as.
  SixteenBitFormat words{};
};

// Every row, in the order of CompressionKind.
[[nodiscard]] std::span<const MethodRow> method_rows() noexcept;
// The row of a kind; throws Error(internal) for a value outside the enum.
[[nodiscard]] const MethodRow& method_row(CompressionKind kind);
// The row whose text or identifier is name, or nullptr.
[[nodiscard]] const MethodRow* method_named(std::string_view name) noexcept;

// Appended to every error about a method's text or parameters:
// "accepted: none | fp16 | ... | ef:<one of these>", made from the rows.
[[nodiscard]] const std::string& accepted_methods();

}  // namespace zring::codec
