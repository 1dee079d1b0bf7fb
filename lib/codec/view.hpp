// view.hpp - checks on the decoded view of a CompressedGradient (internal).
#pragma once

#include <zring/compression.hpp>

namespace zring::codec::detail {

// True when g's view is dense (no indices, original_size values), false when
// it is sparse (one value per index, every index below original_size).
// Throws Error(invalid_argument) when it is neither.
bool is_dense_view(const CompressedGradient& g);

}  // namespace zring::codec::detail
