// The affine-code methods (quantization, signsgd), exact along the ring:
// every node first learns every rank's per-block statistics (in its
// summary), so all ranks encode on one shared grid per block; then the
// integer codes are summed exactly in uint32 and travel bit-packed in
// b + ceil(log2 W) bits (homomorphic, as in IntSGD / THC).
#include <algorithm>
#include <string>
#include <vector>

#include <zring/error.hpp>

#include "codec/vector_clones.hpp"
#include "collective/plan.hpp"

namespace zring::collective {
namespace {

// out[i] = offset + sums[i] * step in double, rounded once to float.
ZRING_VECTOR_CLONES void average_codes(const std::uint32_t* __restrict sums, std::size_t n,
                                       double offset, double step, float* __restrict out) noexcept {
  for (std::size_t i = 0; i < n; ++i)
    out[i] = static_cast<float>(offset + static_cast<double>(sums[i]) * step);
}

struct Block {
  std::size_t begin;
  std::size_t size;
};

class AffinePlan final : public MethodPlan {
 public:
  explicit AffinePlan(PlanInputs& in)
      : in_(in), owned_(codec::make_codec(in.input.method.base())),
        codec_(dynamic_cast<const codec::AffineCodec&>(*owned_)), spb_(codec_.stats_per_block()) {
    for (std::size_t t = 0; t < in.tensors(); ++t) {
      for (std::size_t b = in.offsets[t]; b < in.offsets[t + 1]; b += codec::kBlockElems)
        blocks_.push_back({b, std::min(codec::kBlockElems, in.offsets[t + 1] - b)});
    }
  }

  void prepare(NodeSummary& summary) override {
    summary.stats.assign(blocks_.size() * spb_, 0.0f);
    std::vector<float> one(spb_);
    for (std::size_t b = 0; b < blocks_.size(); ++b) {
      float* acc = summary.stats.data() + b * spb_;
      for (std::size_t l = 0; l < in_.x.size(); ++l) {
        float* target = l == 0 ? acc : one.data();
        codec_.block_stats(in_.x[l] + blocks_[b].begin, blocks_[b].size, target);
        if (l != 0) codec_.combine_stats(acc, one.data());
      }
    }
  }

  void execute(const std::vector<NodeSummary>& summaries, float* result) override {
    const std::vector<codec::AffineGrid> grids = shared_grids(summaries);
    const std::size_t n = in_.elements();
    std::uint32_t* codes = sized(in_.work.codes, n);
    encode_local(grids, codes);
    std::uint32_t* sums = sized(in_.work.code_sums, n);
    CodeLane lane;
    lane.bits = bits_for(static_cast<std::uint64_t>(codec_.max_code()) * in_.op.world_size);
    Decode decode(*this, grids, sums, result);
    ring_allreduce(in_.link, lane, codes, sums, n, in_.op.ring, in_.stats, &decode);
  }

 private:
  // Statistics combined over every node, in node order, then one grid per block.
  std::vector<codec::AffineGrid> shared_grids(const std::vector<NodeSummary>& summaries) const {
    const std::size_t expected = blocks_.size() * spb_;
    std::vector<float> combined;
    for (std::size_t node = 0; node < summaries.size(); ++node) {
      const std::vector<float>& stats = summaries[node].stats;
      if (stats.size() != expected) {
        throw Error(ErrorCode::malformed_message,
                    in_.link.describe(node) + " sent " + std::to_string(stats.size()) +
                        " block statistics where " + std::to_string(expected) + " were expected");
      }
      if (node == 0) {
        combined = stats;
        continue;
      }
      for (std::size_t b = 0; b < blocks_.size(); ++b)
        codec_.combine_stats(combined.data() + b * spb_, stats.data() + b * spb_);
    }
    std::vector<codec::AffineGrid> grids(blocks_.size());
    for (std::size_t b = 0; b < blocks_.size(); ++b)
      grids[b] = codec_.grid(combined.data() + b * spb_, blocks_[b].size, in_.op.world_size);
    return grids;
  }

  // codes = sum over local ranks of each rank's codes (the first rank's
  // written straight in); residuals updated.
  void encode_local(const std::vector<codec::AffineGrid>& grids, std::uint32_t* codes) {
    std::vector<std::uint32_t> codes_of_rank(codec::kBlockElems);
    float* decoded = in_.feedback() ? sized(in_.work.decoded, in_.elements()) : nullptr;
    for (std::size_t l = 0; l < in_.x.size(); ++l) {
      for (std::size_t b = 0; b < blocks_.size(); ++b) {
        const Block& block = blocks_[b];
        std::uint32_t* mine = l == 0 ? codes + block.begin : codes_of_rank.data();
        codec_.encode_codes(in_.x[l] + block.begin, block.size, grids[b], mine);
        if (l != 0)
          for (std::size_t i = 0; i < block.size; ++i) codes[block.begin + i] += mine[i];
        if (decoded) {
          for (std::size_t i = 0; i < block.size; ++i)
            decoded[block.begin + i] = codec::affine_value(grids[b], mine[i]);
        }
      }
      if (decoded) in_.update_feedback(l, decoded);
    }
  }

  // Each chunk of code sums becomes averages as soon as it is final, while
  // it is in cache: the average of W grid values whose codes sum to s is
  // offset + s * step / W.
  class Decode final : public ChunkDone {
   public:
    Decode(const AffinePlan& plan, const std::vector<codec::AffineGrid>& grids,
           const std::uint32_t* sums, float* result)
        : blocks_(plan.blocks_), grids_(grids), sums_(sums), result_(result),
          world_(static_cast<double>(plan.in_.op.world_size)) {}

    void operator()(std::size_t begin, std::size_t end) override {
      // The first block that ends after begin; blocks are in element order.
      auto it = std::upper_bound(blocks_.begin(), blocks_.end(), begin,
                                 [](std::size_t at, const Block& b) { return at < b.begin + b.size; });
      for (; it != blocks_.end() && it->begin < end; ++it) {
        const std::size_t b = static_cast<std::size_t>(it - blocks_.begin());
        const double offset = grids_[b].offset;
        const double step = static_cast<double>(grids_[b].step) / world_;
        const std::size_t from = std::max(begin, it->begin);
        const std::size_t to = std::min(end, it->begin + it->size);
        average_codes(sums_ + from, to - from, offset, step, result_ + from);
      }
    }

   private:
    const std::vector<Block>& blocks_;
    const std::vector<codec::AffineGrid>& grids_;
    const std::uint32_t* sums_;
    float* result_;
    double world_;
  };

  PlanInputs& in_;
  std::unique_ptr<codec::Codec> owned_;
  const codec::AffineCodec& codec_;
  std::size_t spb_;
  std::vector<Block> blocks_;
};

}  // namespace

std::unique_ptr<MethodPlan> make_affine_plan(PlanInputs& in) {
  return std::make_unique<AffinePlan>(in);
}

}  // namespace zring::collective
