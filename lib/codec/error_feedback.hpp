// error_feedback.hpp - error feedback around any codec (internal).
//
// Keeps, per tensor name, the residual e = (g + e_prev) - D(C(g + e_prev)):
// what compression dropped last time is added back before compressing next
// time, so nothing is lost for good (Seide et al. 2014; Karimireddy et al. 2019).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "codec/codec.hpp"

namespace zring::codec {

class ErrorFeedback {
 public:
  // Called with each block of kBlockElems corrected values (the last one
  // shorter) right after it is made, while it is in the cache: the values
  // and how many.
  using CorrectedBlock = std::function<void(const float*, std::size_t)>;

  // out[i] = x[i] + residual[name][i]. A name seen for the first time, or
  // whose length changed, starts from a zero residual.
  void corrected(const std::string& name, const float* x, std::size_t n, float* out,
                 const CorrectedBlock& each_block = nullptr) const;

  // residual[name] = corrected - decoded. Entries that are not finite (the
  // input overflowed) are stored as 0, so one bad step cannot poison every
  // later one.
  void update(const std::string& name, const float* corrected, const float* decoded, std::size_t n);

  // For an op that may still fail: the next residual of name, computed
  // like update() (stage) or, for a sparse view, as corrected with the
  // view's entries taken off (stage_sparse: one pass, no dense decode),
  // kept aside until commit() makes every staged residual current, or
  // discard() drops them. Buffers are reused from op to op.
  void stage(const std::string& name, const float* corrected, const float* decoded, std::size_t n);
  // corrected() made in the buffer that stage() / stage_sparse() of name
  // will fill: pass the pointer back as their `corrected` and the residual
  // overwrites it in place (the corrected values are gone after that).
  [[nodiscard]] float* corrected_in_staging(const std::string& name, const float* x, std::size_t n,
                                            const CorrectedBlock& each_block = nullptr);
  // corrected_in_staging and codec.compress of the corrected values in one
  // (Codec::compress_corrected: top-k reads them as it makes them);
  // *corrected says where they are, for stage_sparse.
  [[nodiscard]] CompressedGradient compress_in_staging(const Codec& codec, const std::string& name,
                                                       const float* x, std::size_t n,
                                                       const CodecContext& ctx,
                                                       const float** corrected);
  void stage_sparse(const std::string& name, const float* corrected, std::size_t n,
                    const CompressedGradient& view);
  void commit();
  void discard();

  // corrected -> compress with codec -> update; returns what travels.
  [[nodiscard]] CompressedGradient compress(const Codec& codec, const std::string& name,
                                            const float* x, std::size_t n, const CodecContext& ctx);

  // The residual of name, or nullptr when there is none yet.
  [[nodiscard]] const std::vector<float>* residual(const std::string& name) const;
  void clear() noexcept {
    residuals_.clear();
    pending_.clear();
    spare_.clear();
    finite_staged_.clear();
  }
  [[nodiscard]] std::size_t size() const noexcept { return residuals_.size(); }

 private:
  std::vector<float>& staging(const std::string& name, std::size_t n);
  // The residual of name if it has n values, else nullptr (it starts from 0).
  [[nodiscard]] const float* residual_of_size(const std::string& name, std::size_t n) const;
  bool corrected_known_finite(const std::string& name, const float* x, std::size_t n, float* out,
                              const CorrectedBlock& each_block) const;

  std::unordered_map<std::string, std::vector<float>> residuals_;
  std::unordered_map<std::string, std::vector<float>> pending_;  // staged, not yet current
  std::unordered_map<std::string, std::vector<float>> spare_;    // buffers for the next stage
  // Per name, whether corrected_in_staging found every corrected value
  // finite (stage_sparse then leaves the entries off the view as they are).
  std::unordered_map<std::string, bool> finite_staged_;
};

}  // namespace zring::codec
