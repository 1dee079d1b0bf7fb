// method_text.hpp - helpers of the compression methods' text form (internal).
#pragma once

#include <string>

namespace zring::codec::detail {

// Appended to every error about a method's text or parameters.
inline constexpr const char* kAcceptedMethods =
    "accepted: none | fp16 | bf16 | topk:K | topk:R% | randomk:K | randomk:R% | "
    "threshold:T | quant:B with B in 1..16 | sign | ef:<one of these>";

// Shortest text that reads back as exactly v.
std::string format_double(double v);
std::string format_float(float v);

}  // namespace zring::codec::detail
