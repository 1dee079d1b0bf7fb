// ring_run.hpp - one op on an in-process ring of threads, for the
// collective tests: inputs, fused outputs, errors and stats per node.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "collective/allreduce_op.hpp"
#include "collective/inproc_link.hpp"
#include "support/reference.hpp"

namespace zring::collective::ring_test {

struct RingRun {
  std::vector<TensorMap> inputs;            // per rank
  std::vector<std::vector<float>> outputs;  // per node, fused
  std::vector<std::string> errors;          // per node ("" = ok)
  std::vector<ErrorCode> codes;
  std::vector<RingStats> stats;
};

Manifest manifest_of(const TensorMap& grads, const CompressionMethod& method);
std::vector<float> fuse(const TensorMap& grads);
TensorMap unfuse(const std::vector<float>& fused, const TensorMap& like);

// Runs one op on a ring of `nodes` x `local` ranks; `residuals` persist per
// node. tweak may change a node's input; gather_bytes and direct_bytes are
// the ring's RingOptions (0, 0: every op round the ring).
void run_op(InprocRing& ring, std::size_t local, const CompressionMethod& method,
            const std::vector<TensorMap>& inputs, std::uint64_t op,
            std::vector<std::vector<codec::ErrorFeedback>>& residuals, RingRun& run,
            std::size_t chunk_bytes = 4096,
            std::function<void(std::size_t, OpInput&)> tweak = nullptr,
            std::chrono::milliseconds timeout = std::chrono::seconds(20),
            std::size_t gather_bytes = RingOptions{}.gather_bytes,
            std::size_t direct_bytes = RingOptions{}.direct_bytes);

std::vector<TensorMap> make_inputs(std::size_t world, std::uint64_t round,
                                   const std::vector<std::size_t>& sizes);

// Every node got the same bits as node 0 (and no error).
void check_same_bits(const RingRun& run);

// Every method the tests run.
extern const std::vector<std::string> kMethods;

}  // namespace zring::collective::ring_test
