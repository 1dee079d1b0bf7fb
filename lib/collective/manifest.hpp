// manifest.hpp - what an op reduces, and what each node tells the others first.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wire/messages.hpp"

namespace zring::collective {

// The op types wire messages carry, under the names collective code uses.
using wire::Manifest;
using wire::NodeSummary;
using wire::NonFinite;
using wire::OpKind;
using wire::TensorSpec;

// A tensor's shape for messages: "[512x64]", "[]" for a scalar.
std::string shape_text(const std::vector<std::uint64_t>& shape);

// The first difference between two manifests as a sentence (what the op
// is, the method, then the tensors), or "" when they are equal. a_who / b_who name the submitters
// ("ranks 0-1 (node a)").
std::string manifest_difference(const Manifest& a, const std::string& a_who, const Manifest& b,
                                const std::string& b_who);

}  // namespace zring::collective
