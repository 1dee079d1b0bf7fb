// time_scale.hpp - ZRING_TEST_TIME_SCALE: how much longer the tests allow
// on a slow machine.
//
// The tests' few wall-clock bounds (a product deadline plus a margin, a
// guard against a hang) are multiplied by ZRING_TEST_TIME_SCALE, a number
// from 1 to 100 (default 1). scripts/test.sh sets 2 for the sanitizer
// builds, whose daemons run several times slower. The daemons' own
// timeouts in the tests' ring files are not scaled: they are what the
// tests check.
#pragma once

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace zring::testing {

inline double time_scale() {
  static const double scale = [] {
    const char* text = std::getenv("ZRING_TEST_TIME_SCALE");
    if (text == nullptr || *text == '\0') return 1.0;
    char* end = nullptr;
    const double value = std::strtod(text, &end);
    if (end == text || *end != '\0' || !(value >= 1.0 && value <= 100.0))
      throw std::invalid_argument("ZRING_TEST_TIME_SCALE must be a number from 1 to 100, not '" +
                                  std::string(text) + "'");
    return value;
  }();
  return scale;
}

// A bound in seconds, stretched.
inline double scaled(double seconds) { return seconds * time_scale(); }

// A bound as a duration, stretched (to the millisecond).
template <class Rep, class Period>
std::chrono::milliseconds scaled(std::chrono::duration<Rep, Period> bound) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(bound);
  return std::chrono::milliseconds(
      static_cast<long long>(static_cast<double>(ms.count()) * time_scale()));
}

}  // namespace zring::testing
