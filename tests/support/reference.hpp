// reference.hpp - what an all-reduce must return, computed the slow, obvious way.
//
// Tests compare zring's results with these functions, which share no code
// with the codecs or the ring (except random_indices: which indices randomk
// picks is the codec's business, tested on its own).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>
#include <zring/zring.hpp>

namespace zring::testing {

// Deterministic test gradients: values of varied magnitude and sign.
std::vector<float> make_values(std::uint64_t seed, std::size_t n);

// rank r's gradients for a test: tensors named t000, t001, ... with the
// given sizes, drawn from (seed, round, rank).
TensorMap make_gradients(std::uint64_t seed, std::uint64_t round, std::size_t rank,
                         const std::vector<std::size_t>& sizes);

// A result as the test clients write it (every tensor's floats, in name
// order) read back from bytes starting at `offset`, shaped like `like`.
// Values past the end of bytes are nan, so a short result never compares
// equal to anything.
TensorMap tensors_from_bytes(const std::string& bytes, std::size_t offset, const TensorMap& like);

// The average over ranks of D(C_r(g_r)) as the ring defines it: dense sums
// for none/fp16/bf16, one shared grid per block for quantization/signsgd,
// every rank's own top-k / threshold selection. randomk is not covered (its
// indices come from the ring's op seed): see check_randomk.
// With error feedback, `residuals` (one map per rank) is used and updated.
//
// Each element comes with how far zring's result may be from it: `tolerance`
// (float summation order; for fp16/bf16 the per-hop rounding bound) and,
// for quantization, `boundary` (one grid step / W) which a value at a
// rounding boundary may take when zring and this code round it differently;
// compare() allows that for a tiny fraction of elements only.
struct Expected {
  TensorMap mean;
  std::map<std::string, std::vector<double>> tolerance;
  std::map<std::string, std::vector<double>> boundary;
};
Expected expected_average(const CompressionMethod& method, const std::vector<TensorMap>& ranks,
                          std::vector<std::map<std::string, std::vector<float>>>* residuals);

struct Comparison {
  std::size_t elements = 0;
  std::size_t at_boundary = 0;  // within `boundary` but beyond `tolerance`
  std::size_t bad = 0;          // beyond both
  std::string first_bad;        // where and by how much
  [[nodiscard]] bool ok() const { return bad == 0 && at_boundary * 1000 <= elements + 1000; }
};
Comparison compare(const TensorMap& result, const Expected& expected);

// randomk: the result is zero except on a sample of kept_for(n) indices per
// tensor, where it is exactly the average of the ranks' values.
std::string check_randomk(const CompressionMethod& method, const TensorMap& result,
                          const std::vector<TensorMap>& ranks);

// The indices topk keeps of x, brute force: every index by key descending
// (|x| as a bit pattern, so nan above inf, +0 == -0 and nans by payload),
// then index ascending; the first k, in index order.
std::vector<std::uint32_t> topk_by_bits(const std::vector<float>& x, std::size_t k);

}  // namespace zring::testing
