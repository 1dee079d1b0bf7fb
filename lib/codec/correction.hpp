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

// Error feedback's corrected values made a block at a time for a codec
// that reads each block right after it is made (Codec::compress_corrected):
// (*this)(begin, end) makes [begin, end) into out as make_corrected does
// and says where value begin is; value_of(i) is value i's bits before it
// is made; finite() is make_corrected's answer once every block is made.
class CorrectedBlocks {
 public:
  CorrectedBlocks(const float* x, const float* r, float* out) noexcept : x_(x), r_(r), out_(out) {}
  float* operator()(std::size_t begin, std::size_t end) noexcept {
    all_finite_ &=
        make_corrected(x_ + begin, r_ == nullptr ? nullptr : r_ + begin, end - begin, out_ + begin);
    return out_ + begin;
  }
  [[nodiscard]] float value_of(std::size_t i) const noexcept {
    return r_ == nullptr ? x_[i] : x_[i] + r_[i];
  }
  [[nodiscard]] bool finite() const noexcept { return r_ != nullptr && all_finite_; }

 private:
  const float* x_;
  const float* r_;
  float* out_;
  bool all_finite_ = true;
};

}  // namespace zring::codec
