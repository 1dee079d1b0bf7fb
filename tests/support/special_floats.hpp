// special_floats.hpp - the non-finite floats the codec tests feed in, named
// once (a unity build puts several test files in one translation unit).
#pragma once

#include <limits>

namespace zring::testing {

inline constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
inline constexpr float kInf = std::numeric_limits<float>::infinity();

}  // namespace zring::testing
