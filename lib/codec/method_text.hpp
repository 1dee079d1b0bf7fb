// method_text.hpp - helpers of the compression methods' text form (internal).
#pragma once

#include <string>

namespace zring::codec::detail {

// Shortest text that reads back as exactly v.
std::string format_double(double v);
std::string format_float(float v);

}  // namespace zring::codec::detail
