// workspace.hpp - buffers an op needs, kept from one op to the next.
//
// Fresh memory costs a page fault per 4 KiB on first touch: for a 64 MiB
// gradient that is more than the arithmetic of the whole op. A node keeps
// one Workspace for its life, so a steady stream of same-sized ops touches
// only memory it touched before.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace zring::collective {

struct Workspace {
  std::vector<std::vector<float>> corrected;  // per local rank: g + residual
  std::vector<float> decoded;                 // one rank's D(C(x))
  std::vector<float> sum;                     // the node's contribution
  std::vector<float> sampled;                 // randomk: the ring's sums of samples
  std::vector<std::uint32_t> codes;           // affine: the node's code sums
  std::vector<std::uint32_t> code_sums;       // affine: the ring's code sums
  std::vector<std::uint16_t> halves;          // fp16/bf16 round trips

  // A buffer for the op's result, at least n floats. The previous one is
  // reused unless someone (a client reply still being sent) holds it.
  std::shared_ptr<float[]> result(std::size_t n);

 private:
  std::shared_ptr<float[]> result_;
  std::size_t result_size_ = 0;
};

// v.resize(n) without keeping or zeroing old content beyond what resize does;
// returns v.data(). Capacity only grows, so memory is reused.
template <class T>
T* sized(std::vector<T>& v, std::size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

}  // namespace zring::collective
