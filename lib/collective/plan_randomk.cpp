// randomk, exact at ring cost: the op seed gives every rank the same indices
// for a tensor, so only the k sampled values ride the ring, summed as
// float32. Non-finite values outside the sample travel in the summary, so
// an overflow on any rank still reaches every result.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>
#include <zring/error.hpp>

#include "collective/gather_allreduce.hpp"
#include "collective/plan.hpp"

namespace zring::collective {
namespace {

// More non-finite values than this on one node and the whole tensor is
// reported as overflowed (its result is nan), keeping summaries small.
constexpr std::size_t kMaxNonFinite = 1024;
constexpr std::uint32_t kWholeTensor = std::numeric_limits<std::uint32_t>::max();

class RandomkPlan final : public MethodPlan {
 public:
  explicit RandomkPlan(PlanInputs& in) : in_(in), gather_(false, 0) {
    const auto& specs = in.input.manifest.tensors;
    sample_offsets_.push_back(0);
    for (std::size_t t = 0; t < specs.size(); ++t) {
      const std::size_t n = in.offsets[t + 1] - in.offsets[t];
      const std::uint64_t seed = codec::tensor_seed(in.op.op_seed, specs[t].name);
      indices_.push_back(codec::random_indices(seed, n, in.input.method.kept_for(n)));
      sample_offsets_.push_back(sample_offsets_.back() + indices_.back().size());
    }
    gather_ =
        GatheredValues(gathers(sample_offsets_.back() * sizeof(float), in.link.nodes(), in.op.ring),
                       in.link.nodes());
  }

  void prepare(NodeSummary& summary) override {
    sums_.assign(sample_offsets_.back(), 0.0f);
    float* decoded = in_.feedback() ? sized(in_.work.decoded, in_.elements()) : nullptr;
    for (std::size_t l = 0; l < in_.x.size(); ++l) {
      if (decoded) std::fill(decoded, decoded + in_.elements(), 0.0f);
      for (std::size_t t = 0; t < indices_.size(); ++t) sample(l, t, summary, decoded);
      if (decoded) in_.update_feedback(l, decoded);
    }
    compact_nonfinite(summary);
    if (gather_.on())
      gather_.send(summary, Bytes::copy_of(sums_.data(), sums_.size() * sizeof(float)));
  }

  // A small sample rides behind the summary (gather_allreduce.hpp).
  Bytes data() override { return gather_.mine(); }
  void data_arrived(std::size_t node, const Bytes& data) override { gather_.arrived(node, data); }

  void execute(const std::vector<NodeSummary>& summaries, float* result) override {
    float* total = sized(in_.work.sampled, sums_.size());
    if (gather_.on()) {
      gather_.floats(in_.link, sums_.size(), in_.work.gathered);
      gather_allreduce(FloatLane{}, in_.link.nodes(), in_.work.gathered.data(), total,
                       sums_.size());
    } else {
      ring_allreduce(in_.link, FloatLane{}, sums_.data(), total, sums_.size(), in_.op.ring,
                     in_.stats);
    }
    std::fill(result, result + in_.elements(), 0.0f);
    const float world = static_cast<float>(in_.op.world_size);
    for (std::size_t t = 0; t < indices_.size(); ++t) {
      float* out = result + in_.offsets[t];
      const float* sums = total + sample_offsets_[t];
      for (std::size_t j = 0; j < indices_[t].size(); ++j) out[indices_[t][j]] = sums[j] / world;
    }
    for (std::size_t node = 0; node < summaries.size(); ++node)
      apply_nonfinite(node, summaries[node].nonfinite, result);
  }

 private:
  // decoded (with error feedback, else nullptr) receives D(C(x)) of the tensor.
  void sample(std::size_t l, std::size_t t, NodeSummary& summary, float* decoded) {
    const float* x = in_.x[l] + in_.offsets[t];
    const std::size_t n = in_.offsets[t + 1] - in_.offsets[t];
    const std::vector<std::uint32_t>& idx = indices_[t];
    float* sums = sums_.data() + sample_offsets_[t];
    for (std::size_t j = 0; j < idx.size(); ++j) sums[j] += x[idx[j]];
    if (decoded)
      for (std::uint32_t i : idx) decoded[in_.offsets[t] + i] = x[i];
    // The non-finite values outside the sample travel in the summary.
    for (std::uint32_t i : codec::unsampled_nonfinite(x, n, idx)) {
      summary.nonfinite.push_back({static_cast<std::uint32_t>(t), i, x[i]});
      if (decoded) decoded[in_.offsets[t] + i] = x[i];
    }
  }

  // Too many entries for one tensor: one whole-tensor entry instead.
  static void compact_nonfinite(NodeSummary& summary) {
    if (summary.nonfinite.size() <= kMaxNonFinite) return;
    std::vector<NonFinite> compact;
    for (const NonFinite& e : summary.nonfinite) {
      if (compact.empty() || compact.back().tensor != e.tensor)
        compact.push_back({e.tensor, kWholeTensor, std::numeric_limits<float>::quiet_NaN()});
    }
    summary.nonfinite = std::move(compact);
  }

  void apply_nonfinite(std::size_t node, const std::vector<NonFinite>& entries,
                       float* result) const {
    const float world = static_cast<float>(in_.op.world_size);
    for (const NonFinite& e : entries) {
      const bool known = e.tensor < indices_.size();
      const std::size_t n = known ? in_.offsets[e.tensor + 1] - in_.offsets[e.tensor] : 0;
      if (!known || (e.index != kWholeTensor && e.index >= n) || std::isfinite(e.value)) {
        throw Error(ErrorCode::malformed_message,
                    in_.link.describe(node) + " sent an invalid non-finite entry (tensor " +
                        std::to_string(e.tensor) + ", index " + std::to_string(e.index) + ")");
      }
      float* out = result + in_.offsets[e.tensor];
      if (e.index == kWholeTensor)
        std::fill(out, out + n, e.value);
      else
        out[e.index] += e.value / world;
    }
  }

  PlanInputs& in_;
  std::vector<std::vector<std::uint32_t>> indices_;  // per tensor, shared by all ranks
  std::vector<std::size_t> sample_offsets_;          // tensor t's values in sums_
  std::vector<float> sums_;                          // this node's sampled sums
  GatheredValues gather_;                            // a small sample: one round
};

}  // namespace

std::unique_ptr<MethodPlan> make_randomk_plan(PlanInputs& in) {
  return std::make_unique<RandomkPlan>(in);
}

}  // namespace zring::collective
