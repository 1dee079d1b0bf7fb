// correction.hpp - the error-corrected values g + r, made in one pass
// (internal).
#pragma once

#include <cstddef>

namespace zring::codec {

// out[i] = x[i] + r[i] (out may be r, never x), and whether every sum is
// finite, in one pass: then a residual needs no pass of its own to be kept
// finite.
bool add_all_finite(const float* x, const float* r, std::size_t n, float* out) noexcept;

// The corrected values of n elements into out: x + r, or x itself when
// there is no residual (r null; then finiteness is not checked and the
// answer is false, "not known").
bool make_corrected(const float* x, const float* r, std::size_t n, float* out) noexcept;

}  // namespace zring::codec
