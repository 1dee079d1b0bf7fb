// error_feedback.cpp - the per-tensor residual kept around any codec.
#include "codec/error_feedback.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "codec/correction.hpp"
#include "codec/view.hpp"

namespace zring::codec {
namespace {

// A residual entry that is not finite would poison every later step.
inline float keepable(float r) noexcept { return std::isfinite(r) ? r : 0.0f; }

// r = what compression dropped: corrected - decoded, kept finite.
void store_difference(std::vector<float>& r, const float* corrected, const float* decoded,
                      std::size_t n) {
  r.resize(n);
  for (std::size_t i = 0; i < n; ++i) r[i] = keepable(corrected[i] - decoded[i]);
}

}  // namespace

void ErrorFeedback::corrected(const std::string& name, const float* x, std::size_t n, float* out,
                              const CorrectedBlock& each_block) const {
  (void)corrected_known_finite(name, x, n, out, each_block);
}

// corrected(), and whether every value is known to be finite (not known
// without a residual: x is copied unread).
bool ErrorFeedback::corrected_known_finite(const std::string& name, const float* x, std::size_t n,
                                           float* out, const CorrectedBlock& each_block) const {
  const float* r = residual_of_size(name, n);
  if (!each_block) return make_corrected(x, r, n, out);
  CorrectedBlocks blocks(x, r, out);
  for (std::size_t begin = 0; begin < n; begin += kBlockElems) {
    const std::size_t len = std::min(kBlockElems, n - begin);
    each_block(blocks(begin, begin + len), len);
  }
  return blocks.finite();
}

const float* ErrorFeedback::residual_of_size(const std::string& name, std::size_t n) const {
  const std::vector<float>* r = residual(name);
  return r == nullptr || r->size() != n ? nullptr : r->data();
}

void ErrorFeedback::update(const std::string& name, const float* corrected, const float* decoded,
                           std::size_t n) {
  store_difference(residuals_[name], corrected, decoded, n);
}

std::vector<float>& ErrorFeedback::staging(const std::string& name, std::size_t n) {
  std::vector<float>& v = pending_[name];
  if (v.empty()) {
    if (auto it = spare_.find(name); it != spare_.end()) {
      v.swap(it->second);
      spare_.erase(it);
    }
  }
  v.resize(n);
  return v;
}

float* ErrorFeedback::corrected_in_staging(const std::string& name, const float* x, std::size_t n,
                                           const CorrectedBlock& each_block) {
  float* out = staging(name, n).data();
  finite_staged_[name] = corrected_known_finite(name, x, n, out, each_block);
  return out;
}

CompressedGradient ErrorFeedback::compress_in_staging(const Codec& codec, const std::string& name,
                                                      const float* x, std::size_t n,
                                                      const CodecContext& ctx,
                                                      const float** corrected) {
  float* out = staging(name, n).data();
  finite_staged_.erase(name);
  bool finite = false;
  CompressedGradient g =
      codec.compress_corrected(x, residual_of_size(name, n), n, out, ctx, finite);
  finite_staged_[name] = finite;
  *corrected = out;
  return g;
}

void ErrorFeedback::stage(const std::string& name, const float* corrected, const float* decoded,
                          std::size_t n) {
  finite_staged_.erase(name);
  store_difference(staging(name, n), corrected, decoded, n);
}

void ErrorFeedback::stage_sparse(const std::string& name, const float* corrected, std::size_t n,
                                 const CompressedGradient& view) {
  std::vector<float>& r = staging(name, n);
  // Corrected in this very buffer by corrected_in_staging, every value
  // finite: outside the view's entries it already is the residual.
  const auto finite = finite_staged_.find(name);
  const bool in_place_and_finite =
      finite != finite_staged_.end() && finite->second && corrected == r.data();
  if (finite != finite_staged_.end()) finite_staged_.erase(finite);
  // What a dense decode would hold: 0 + value at the view's entries (0 + v
  // is v but for -0, which it makes +0), 0 elsewhere; c - 0 is c.
  if (detail::is_dense_view(view)) {
    for (std::size_t i = 0; i < n; ++i) r[i] = keepable(corrected[i] - (0.0f + view.values[i]));
    return;
  }
  if (!in_place_and_finite)
    for (std::size_t i = 0; i < n; ++i) r[i] = keepable(corrected[i]);
  for (std::size_t j = 0; j < view.indices.size(); ++j) {
    const std::uint32_t i = view.indices[j];
    r[i] = keepable(corrected[i] - (0.0f + view.values[j]));
  }
}

void ErrorFeedback::commit() {
  finite_staged_.clear();
  for (auto& [name, next] : pending_) {
    residuals_[name].swap(next);
    spare_[name].swap(next);  // the old residual: the next stage's buffer
  }
  pending_.clear();
}

void ErrorFeedback::discard() {
  finite_staged_.clear();
  for (auto& [name, next] : pending_) spare_[name].swap(next);
  pending_.clear();
}

CompressedGradient ErrorFeedback::compress(const Codec& codec, const std::string& name,
                                           const float* x, std::size_t n, const CodecContext& ctx) {
  // The residual buffer itself becomes the corrected gradient and then the
  // new residual c - D(C(c)): no per-step allocation of a tensor-sized
  // buffer, and a sparse view costs one pass over its entries.
  std::vector<float>& r = residuals_[name];
  if (r.size() != n) r.assign(n, 0.0f);
  bool finite = false;
  CompressedGradient g;
  try {
    g = codec.compress_corrected(x, r.data(), n, r.data(), ctx, finite);
  } catch (...) {
    residuals_.erase(name);  // r holds neither the old nor a new residual
    throw;
  }
  if (detail::is_dense_view(g)) {
    for (std::size_t i = 0; i < n; ++i) r[i] = keepable(r[i] - g.values[i]);
  } else {
    if (finite) {  // only the view's entries can have left the finite range
      for (std::size_t j = 0; j < g.indices.size(); ++j)
        r[g.indices[j]] = keepable(r[g.indices[j]] - g.values[j]);
    } else {
      for (std::size_t j = 0; j < g.indices.size(); ++j) r[g.indices[j]] -= g.values[j];
      for (float& v : r) v = keepable(v);
    }
  }
  return g;
}

const std::vector<float>* ErrorFeedback::residual(const std::string& name) const {
  const auto it = residuals_.find(name);
  return it == residuals_.end() ? nullptr : &it->second;
}

}  // namespace zring::codec
