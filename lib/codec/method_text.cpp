// method_text.cpp - the text form of a CompressionMethod: parse and to_string.
//
// to_string is canonical and parse(to_string(m)) == m for every method. The
// one subtle case is a ratio printed as a percentage: r * 100 is not exact
// in binary, so "R%" is read as the decimal R shifted by two places (R e-2)
// and rounded once, and printed by shifting the shortest decimal of r that
// rounds back to r. Both sides then name the same decimal number.
//
// Which names there are and which parameter each takes is in the table of
// methods (methods.cpp); this file knows the parameter forms only.
#include "codec/method_text.hpp"

#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>
#include <zring/compression.hpp>
#include <zring/error.hpp>

#include "codec/methods.hpp"

namespace zring {
namespace codec::detail {

std::string format_double(double v) {
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

std::string format_float(float v) {
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

}  // namespace codec::detail

namespace {

using codec::MethodRow;
using codec::Parameter;

[[noreturn]] void bad_text(std::string_view text, const std::string& why) {
  throw Error(ErrorCode::invalid_argument, "compression method '" + std::string(text) + "': " +
                                               why + " (" + codec::accepted_methods() + ")");
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// An unsigned decimal number: digits with an optional fraction and an
// optional exponent. Split into the mantissa text and the exponent value.
// Rejects signs, spaces, hex, inf and nan (which from_chars would accept).
bool split_decimal(std::string_view s, std::string_view& mantissa, long& exponent) {
  std::size_t i = 0;
  std::size_t digits = 0;
  while (i < s.size() && is_digit(s[i])) ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && is_digit(s[i])) ++i, ++digits;
  }
  if (digits == 0) return false;
  mantissa = s.substr(0, i);
  exponent = 0;
  if (i == s.size()) return true;
  if (s[i] != 'e' && s[i] != 'E') return false;
  std::string_view exp_text = s.substr(i + 1);
  if (!exp_text.empty() && exp_text[0] == '+') exp_text.remove_prefix(1);
  // from_chars takes a leading '-' for a signed type. Exponents of more than
  // five digits are far beyond any double, so they are rejected outright.
  if (exp_text.empty() || exp_text.size() > 6) return false;
  const auto res = std::from_chars(exp_text.data(), exp_text.data() + exp_text.size(), exponent);
  return res.ec == std::errc() && res.ptr == exp_text.data() + exp_text.size();
}

std::size_t parse_count(std::string_view text, std::string_view arg) {
  std::size_t k = 0;
  const auto res = std::from_chars(arg.data(), arg.data() + arg.size(), k);
  const bool all_digits = !arg.empty() && is_digit(arg[0]);
  if (!all_digits || res.ec != std::errc() || res.ptr != arg.data() + arg.size()) {
    bad_text(text, "'" + std::string(arg) + "' is not a whole number of elements");
  }
  if (k == 0) bad_text(text, "the count must be at least 1");
  return k;
}

// "R" of "R%", as the fraction R / 100 rounded once.
double parse_percent(std::string_view text, std::string_view arg) {
  std::string_view mantissa;
  long exponent = 0;
  if (!split_decimal(arg, mantissa, exponent)) {
    bad_text(text, "'" + std::string(arg) + "%' is not a percentage");
  }
  const std::string shifted = std::string(mantissa) + "e" + std::to_string(exponent - 2);
  double r = 0.0;
  const auto res = std::from_chars(shifted.data(), shifted.data() + shifted.size(), r);
  if (res.ec != std::errc() || !(r > 0.0 && r <= 1.0)) {
    bad_text(text, "the percentage must be above 0% and at most 100%");
  }
  return r;
}

float parse_threshold(std::string_view text, std::string_view arg) {
  std::string_view mantissa;
  long exponent = 0;
  float t = 0.0f;
  if (!split_decimal(arg, mantissa, exponent)) {
    bad_text(text, "the threshold must be a finite number >= 0");
  }
  const auto res = std::from_chars(arg.data(), arg.data() + arg.size(), t);
  if (res.ec != std::errc() || res.ptr != arg.data() + arg.size() || !std::isfinite(t)) {
    bad_text(text, "the threshold '" + std::string(arg) + "' is out of the float range");
  }
  return t;
}

unsigned parse_bits(std::string_view text, std::string_view arg) {
  unsigned bits = 0;
  const auto res = std::from_chars(arg.data(), arg.data() + arg.size(), bits);
  if (arg.empty() || !is_digit(arg[0]) || res.ec != std::errc() ||
      res.ptr != arg.data() + arg.size() || bits < 1 || bits > 16) {
    bad_text(text, "quantization takes 1..16 bits");
  }
  return bits;
}

// NAME:K / NAME:R% (topk, randomk).
CompressionMethod parse_kept(std::string_view text, const MethodRow& row, std::string_view arg) {
  if (!arg.empty() && arg.back() == '%') {
    return row.ratio(parse_percent(text, arg.substr(0, arg.size() - 1)));
  }
  return row.count(parse_count(text, arg));
}

// One method without error feedback; text is the whole input, for messages.
CompressionMethod parse_base(std::string_view text, std::string_view spec) {
  const std::size_t colon = spec.find(':');
  const std::string_view name = spec.substr(0, colon);
  const bool has_arg = colon != std::string_view::npos;
  const std::string_view arg = has_arg ? spec.substr(colon + 1) : std::string_view{};

  const MethodRow* row = codec::method_named(name);
  if (row == nullptr) {
    if (name == "ef" || name == "error_feedback") bad_text(text, "error feedback cannot be nested");
    bad_text(text, "unknown method '" + std::string(name) + "'");
  }
  const bool plain = row->parameter == Parameter::none;
  if (plain && has_arg) bad_text(text, "'" + std::string(name) + "' takes no parameter");
  if (!plain && !has_arg) bad_text(text, "'" + std::string(name) + "' needs a parameter");

  switch (row->parameter) {
    case Parameter::none:
      return row->plain();
    case Parameter::kept:
      return parse_kept(text, *row, arg);
    case Parameter::threshold:
      return row->real(parse_threshold(text, arg));
    case Parameter::bits:
      return row->bits(parse_bits(text, arg));
  }
  bad_text(text, "unknown method '" + std::string(name) + "'");
}

// The shortest decimal of r that reads back as r, moved two places left.
std::string format_percent(double r) {
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, r, std::chars_format::scientific);
  const std::string_view sci(buf, static_cast<std::size_t>(res.ptr - buf));  // d[.ddd]e±XX
  const std::size_t e = sci.find('e');
  std::string digits(sci.substr(0, e));
  if (digits.size() > 1) digits.erase(1, 1);  // drop the '.'
  long exponent = 0;
  std::string_view exp_text = sci.substr(e + 1);
  if (exp_text[0] == '+') exp_text.remove_prefix(1);
  std::from_chars(exp_text.data(), exp_text.data() + exp_text.size(), exponent);

  // The percentage is digits * 10^scale, with the decimal point `point`
  // characters into digits.
  const long percent_exp = exponent + 2;
  const long scale = percent_exp - static_cast<long>(digits.size() - 1);
  if (scale >= 0) return digits + std::string(static_cast<std::size_t>(scale), '0');
  const long point = static_cast<long>(digits.size()) + scale;
  if (point > 0) {
    return digits.substr(0, static_cast<std::size_t>(point)) + "." +
           digits.substr(static_cast<std::size_t>(point));
  }
  if (point > -6) return "0." + std::string(static_cast<std::size_t>(-point), '0') + digits;
  // Tiny ratios: scientific notation rather than hundreds of zeros.
  const std::string tail = digits.size() > 1 ? "." + digits.substr(1) : "";
  return digits.substr(0, 1) + tail + "e" + std::to_string(percent_exp);
}

}  // namespace

CompressionMethod CompressionMethod::parse(std::string_view text) {
  const std::size_t colon = text.find(':');
  const std::string_view name = text.substr(0, colon);
  if (name == "ef" || name == "error_feedback") {
    if (colon == std::string_view::npos) bad_text(text, "error feedback needs a method to wrap");
    return error_feedback(parse_base(text, text.substr(colon + 1)));
  }
  return parse_base(text, text);
}

std::string CompressionMethod::to_string() const {
  if (error_feedback_) return "ef:" + base().to_string();
  const MethodRow& row = codec::method_row(kind_);
  const std::string name = row.text;
  switch (row.parameter) {
    case Parameter::none:
      return name;
    case Parameter::kept:
      return name + ":" + (is_ratio_ ? format_percent(ratio_) + "%" : std::to_string(count_));
    case Parameter::threshold:
      return name + ":" + codec::detail::format_float(threshold_);
    case Parameter::bits:
      return name + ":" + std::to_string(bits_);
  }
  return name;
}

}  // namespace zring
