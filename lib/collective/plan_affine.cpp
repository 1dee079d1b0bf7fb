// The affine-code methods (quantization, signsgd), exact along the ring:
// every node first learns every rank's per-block statistics (in its
// summary), so all ranks encode on one shared grid per block; then the
// integer codes are summed exactly in uint32 and travel bit-packed in as
// few bits as the sum so far needs: b on the first hop, b + ceil(log2 W)
// for the complete sum (homomorphic, as in IntSGD / THC).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <zring/error.hpp>

#include "codec/vector_clones.hpp"
#include "collective/float_sum.hpp"
#include "collective/gather_allreduce.hpp"
#include "collective/plan.hpp"
#include "collective/ring_allreduce.hpp"
#include "collective/staging.hpp"
#include "collective/stats_waves.hpp"

namespace zring::collective {
namespace {

// out[i] = offset + sums[i] * step in double, rounded once to float.
ZRING_VECTOR_CLONES void average_codes_plain(const std::uint32_t* __restrict sums, std::size_t n,
                                             double offset, double step,
                                             float* __restrict out) noexcept {
  for (std::size_t i = 0; i < n; ++i)
    out[i] = static_cast<float>(offset + static_cast<double>(sums[i]) * step);
}

#ifdef ZRING_AVX2_DISPATCH
// The same, eight at a time (a uint32 becomes a double exactly as the int32
// of its bits flipped at 2^31, plus 2^31; then one multiply, one add and one
// rounding, as above), with streaming stores when `stream`.
__attribute__((target("avx2"))) void average_codes_avx2(const std::uint32_t* sums, std::size_t n,
                                                        double offset, double step, float* out,
                                                        bool stream) noexcept {
  std::size_t i = 0;
  if (stream) {
    for (; i < n && reinterpret_cast<std::uintptr_t>(out + i) % 32 != 0; ++i)
      out[i] = static_cast<float>(offset + static_cast<double>(sums[i]) * step);
  }
  const __m256i flip = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  const __m256d half_range = _mm256_set1_pd(2147483648.0);
  const __m256d vstep = _mm256_set1_pd(step);
  const __m256d voffset = _mm256_set1_pd(offset);
  for (; i + 8 <= n; i += 8) {
    const __m256i s =
        _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sums + i)), flip);
    __m256d lo = _mm256_add_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(s)), half_range);
    __m256d hi = _mm256_add_pd(_mm256_cvtepi32_pd(_mm256_extracti128_si256(s, 1)), half_range);
    lo = _mm256_add_pd(voffset, _mm256_mul_pd(lo, vstep));
    hi = _mm256_add_pd(voffset, _mm256_mul_pd(hi, vstep));
    const __m256 r = _mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo));
    if (stream)
      _mm256_stream_ps(out + i, r);
    else
      _mm256_storeu_ps(out + i, r);
  }
  for (; i < n; ++i) out[i] = static_cast<float>(offset + static_cast<double>(sums[i]) * step);
  if (stream) _mm_sfence();
}
#endif

void average_codes(const std::uint32_t* sums, std::size_t n, double offset, double step, float* out,
                   bool stream) noexcept {
#ifdef ZRING_AVX2_DISPATCH
  if (codec::have_avx2()) {
    average_codes_avx2(sums, n, offset, step, out, stream);
    return;
  }
#endif
  average_codes_plain(sums, n, offset, step, out);
}

using Block = StatsWaves::Block;

class AffinePlan final : public MethodPlan {
 public:
  explicit AffinePlan(PlanInputs& in)
      : in_(in),
        owned_(codec::make_codec(in.input.method.base())),
        codec_(dynamic_cast<const codec::AffineCodec&>(*owned_)),
        spb_(codec_.stats_per_block()),
        order_(staging_order(in.input.manifest, in.input.method, in.link.nodes(), in.link.node())) {
    for (std::size_t t = 0; t < in.tensors(); ++t) {
      for (std::size_t b = in.offsets[t]; b < in.offsets[t + 1]; b += codec::kBlockElems)
        blocks_.push_back({b, std::min(codec::kBlockElems, in.offsets[t + 1] - b)});
    }
    gather_ = GatheredValues(
        gathers(in.op.local_ranks * in.elements() * sizeof(float), in.link.nodes(), in.op.ring),
        in.link.nodes());
    // Statistics in waves where the values are staged in waves and the
    // ring's schedule runs (not the small op's gather, nor the direct
    // schedule, which take every node's values or codes at once).
    if (order_.waves() > 1 && !gather_.on() && !in.feedback() &&
        !takes_direct_schedule(code_lane(in.op.local_ranks).carrying(in.link.nodes()),
                               in.elements(), in.link.nodes(), in.op.ring)) {
      const bool streamed = in.input.staging && streams_input();
      waves_.emplace(in, codec_, blocks_, order_, streamed);
    }
  }

  // The lane of `ranks` local ranks' code sums (ring_allreduce's CodeLane).
  CodeLane code_lane(std::size_t ranks) const {
    CodeLane lane;
    lane.node_max = static_cast<std::uint64_t>(codec_.max_code()) * ranks;
    lane.bits = bits_for(lane.node_max * in_.link.nodes());
    return lane;
  }

  // A small op: the codes need the grid, which needs every node's
  // statistics, so what rides behind the summary is every local rank's
  // values, and every node makes every rank's codes itself (integer sums:
  // the same bits as the ring's). One round instead of three.
  Bytes data() override { return gather_.mine(); }
  void data_arrived(std::size_t node, const Bytes& data) override { gather_.arrived(node, data); }

  // One rank without feedback: the statistics are taken block by block as
  // the staged values arrive (staged_stats), so the pass over the values
  // overlaps the client's copy instead of following it.
  bool streams_input() const override {
    return !gather_.on() && in_.input.ranks.size() == 1 && !in_.feedback();
  }

  void prepare(NodeSummary& summary) override {
    if (waves_) {  // the summary carries wave 0; the others follow (StatsWaves::poll)
      waves_->own_stats(0, summary.stats);
      return;
    }
    summary.stats.assign(blocks_.size() * spb_, 0.0f);
    // The client's own (the daemon checked their count): the summary goes
    // before the first value is staged.
    if (streams_input() && in_.input.given_stats.size() == summary.stats.size() &&
        !summary.stats.empty()) {
      summary.stats = in_.input.given_stats;
      return;
    }
    if (streams_input() && in_.input.staging) {
      staged_stats(*in_.input.staging, summary.stats.data());
      return;
    }
    std::vector<float> one(spb_);
    const bool taken = corrected_stats_taken();
    for (std::size_t b = 0; b < blocks_.size(); ++b) {
      combine_ranks(codec_, in_.x.size(), summary.stats.data() + b * spb_, one.data(),
                    [&](std::size_t l, float* target) {
                      if (taken)
                        std::copy_n(corrected_stats_[l].data() + b * spb_, spb_, target);
                      else
                        codec_.block_stats(in_.x[l] + blocks_[b].begin, blocks_[b].size, target);
                    });
    }
    if (!gather_.on()) return;
    const std::size_t n = in_.elements();
    auto values = std::make_shared<std::vector<std::uint8_t>>(in_.x.size() * n * sizeof(float));
    for (std::size_t l = 0; l < in_.x.size(); ++l)
      if (n != 0) std::memcpy(values->data() + l * n * sizeof(float), in_.x[l], n * sizeof(float));
    gather_.send(summary, Bytes::take(std::move(values)));
  }

  // With error feedback, each rank's block statistics are taken as its
  // corrected values are made (correct_inputs), block after block in the
  // op's order, instead of in a pass of their own over them afterwards.
  bool reads_corrected_blocks() const override { return true; }
  void corrected_block(std::size_t l, const float* values, std::size_t n) override {
    if (corrected_stats_.empty()) {
      corrected_stats_.resize(in_.input.ranks.size());
      stats_taken_.assign(in_.input.ranks.size(), 0);
    }
    std::vector<float>& stats = corrected_stats_.at(l);
    if (stats.empty()) stats.resize(blocks_.size() * spb_);
    const std::size_t b = stats_taken_[l]++;
    if (b >= blocks_.size() || blocks_[b].size != n)
      throw Error(ErrorCode::internal, "affine plan: a corrected block out of the op's blocks");
    codec_.block_stats(values, n, stats.data() + b * spb_);
  }

  void execute(const std::vector<NodeSummary>& summaries, float* result) override {
    std::vector<codec::AffineGrid> whole;
    if (waves_)
      waves_->first_grids(summaries);
    else
      whole = shared_grids(summaries);
    const std::vector<codec::AffineGrid>& grids = waves_ ? waves_->grids() : whole;
    const CodeLane lane = code_lane(in_.x.size());
    Codes codes(*this, grids, result);
    if (gather_.on())
      sum_gathered(codes, grids);
    else
      ring_allreduce(in_.link, lane, codes, in_.elements(), in_.op.ring, in_.stats,
                     in_.input.staging);
    for (std::size_t l = 0; l < codes.decoded.size(); ++l) in_.update_feedback(l, codes.decoded[l]);
  }

 private:
  class Codes;

  // This node's codes as the ring would make them (with their residuals),
  // plus every other node's made from its ranks' values, into the averages.
  void sum_gathered(Codes& codes, const std::vector<codec::AffineGrid>& grids) {
    const std::size_t n = in_.elements(), ranks = in_.op.local_ranks;
    std::vector<float>& all = in_.work.gathered;
    gather_.floats(in_.link, ranks * n, all);
    std::vector<std::uint32_t> sums(n), one(codec::kBlockElems);
    codes.local(0, n, sums.data());
    for (std::size_t node = 0; node < in_.link.nodes(); ++node) {
      if (node == in_.link.node()) continue;
      for (std::size_t l = 0; l < ranks; ++l) {
        const float* x = all.data() + (node * ranks + l) * n;
        for (std::size_t b = 0; b < blocks_.size(); ++b) {
          const Block& block = blocks_[b];
          codec_.encode_codes(x + block.begin, block.size, grids[b], one.data());
          for (std::size_t i = 0; i < block.size; ++i) sums[block.begin + i] += one[i];
        }
      }
    }
    codes.result(0, n, sums.data());
    if (in_.input.staging) in_.input.staging->publish_prefix(n);
  }

  // Rank 0's statistics, each block's once its values are in place: blocks
  // in the order the client stages them (its node's ring segments, this
  // node's own first: StagingOrder), a block that spans two segments once
  // both parts are there (staging only moves forward, so the part staged
  // last is the one to wait for). The statistics are the same whatever the
  // order.
  void staged_stats(LocalStaging& staging, float* stats) const {
    const std::size_t nodes = in_.link.nodes();
    const StagingOrder& order = order_;
    struct Ready {
      std::size_t position = 0;  // in staging order, by which the block is in place
      std::size_t segment = 0, upto = 0;
      std::size_t block = 0;
    };
    std::vector<Ready> ready(blocks_.size());
    for (std::size_t b = 0; b < blocks_.size(); ++b) {
      ready[b].block = b;
      const std::size_t last = blocks_[b].begin + blocks_[b].size;  // one past
      for (std::size_t s = 0; s < nodes; ++s) {
        const std::size_t lo = std::max(order.begin(s), blocks_[b].begin);
        const std::size_t hi = std::min(order.end(s), last);
        const std::size_t upto = hi - order.begin(s);
        if (lo < hi && order.position(s, upto) >= ready[b].position)
          ready[b] = {order.position(s, upto), s, upto, b};
      }
    }
    std::sort(ready.begin(), ready.end(), [](const Ready& a, const Ready& b) {
      return a.position != b.position ? a.position < b.position : a.block < b.block;
    });
    for (const Ready& r : ready) {
      staging.wait_staged(r.segment, r.upto);
      codec_.block_stats(in_.x[0] + blocks_[r.block].begin, blocks_[r.block].size,
                         stats + r.block * spb_);
    }
  }

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

  // The ring's view of the op: each node's codes are made a block at a
  // time just before they are sent or summed (on the shared grid of their
  // block), and each block of complete code sums becomes averages while it
  // is in cache, so neither codes nor sums ever fill a buffer of their own.
  class Codes final : public BlockIo<std::uint32_t> {
   public:
    Codes(AffinePlan& plan, const std::vector<codec::AffineGrid>& grids, float* result)
        : plan_(plan),
          grids_(grids),
          result_(result),
          world_(static_cast<double>(plan.in_.op.world_size)),
          stream_(plan.in_.elements() >= kStreamElems) {
      // With error feedback, what each rank's codes decode to, for its
      // next residual; or, where x is the residual's own buffer, the
      // residual written over x as each block is encoded.
      if (plan.in_.feedback() && !plan.in_.x_is_staged_residual) {
        plan.extra_decoded_.resize(plan.in_.x.size() - 1);
        for (std::size_t l = 0; l < plan.in_.x.size(); ++l)
          decoded.push_back(sized(l == 0 ? plan.in_.work.decoded : plan.extra_decoded_[l - 1],
                                  plan.in_.elements()));
      }
    }

    // out = the sum over local ranks of each rank's codes.
    void local(std::size_t begin, std::size_t n, std::uint32_t* out) override {
      const PlanInputs& in = plan_.in_;
      const std::size_t end = begin + n;
      for (auto it = first_block(begin); it != plan_.blocks_.end() && it->begin < end; ++it) {
        const codec::AffineGrid& grid =
            grids_[static_cast<std::size_t>(it - plan_.blocks_.begin())];
        const std::size_t from = std::max(begin, it->begin);
        const std::size_t to = std::min(end, it->begin + it->size);
        std::uint32_t* sum = out + (from - begin);
        for (std::size_t l = 0; l < in.x.size(); ++l) {
          std::uint32_t* mine = l == 0 ? sum : rank_codes_;
          plan_.codec_.encode_codes(in.x[l] + from, to - from, grid, mine);
          if (l != 0)
            for (std::size_t i = 0; i < to - from; ++i) sum[i] += mine[i];
          if (!decoded.empty()) {
            float* d = decoded[l] + from;
            for (std::size_t i = 0; i < to - from; ++i) d[i] = codec::affine_value(grid, mine[i]);
          } else if (in.feedback()) {  // each element is encoded once: now it is a residual
            float* r = const_cast<float*>(in.x[l]) + from;
            for (std::size_t i = 0; i < to - from; ++i) {
              const float left = r[i] - codec::affine_value(grid, mine[i]);
              r[i] = std::isfinite(left) ? left : 0.0f;  // as ErrorFeedback keeps them
            }
          }
        }
      }
    }

    // The average of W grid values whose codes sum to s is offset + s * step / W.
    void result(std::size_t begin, std::size_t n, const std::uint32_t* sums) override {
      const std::size_t end = begin + n;
      for (auto it = first_block(begin); it != plan_.blocks_.end() && it->begin < end; ++it) {
        const codec::AffineGrid& grid =
            grids_[static_cast<std::size_t>(it - plan_.blocks_.begin())];
        const std::size_t from = std::max(begin, it->begin);
        const std::size_t to = std::min(end, it->begin + it->size);
        average_codes(sums + (from - begin), to - from, grid.offset,
                      static_cast<double>(grid.step) / world_, result_ + from, stream_);
      }
    }

    // Statistics in waves (StatsWaves): the ring waits for the grids.
    bool ready(std::size_t begin, std::size_t end) override {
      return !plan_.waves_ || plan_.waves_->ready(begin, end);
    }
    bool take(const Message& msg) override { return plan_.waves_ && plan_.waves_->take(msg); }
    bool pending() const override { return plan_.waves_ && plan_.waves_->pending(); }
    bool poll(bool wait) override { return plan_.waves_ && plan_.waves_->poll(wait); }

    std::vector<float*> decoded;  // per local rank, with error feedback

   private:
    // The first block that ends after at; blocks are in element order.
    std::vector<Block>::const_iterator first_block(std::size_t at) const {
      return std::upper_bound(plan_.blocks_.begin(), plan_.blocks_.end(), at,
                              [](std::size_t a, const Block& b) { return a < b.begin + b.size; });
    }

    AffinePlan& plan_;
    const std::vector<codec::AffineGrid>& grids_;
    float* result_;
    double world_;
    bool stream_;
    std::uint32_t rank_codes_[codec::kBlockElems];  // another local rank's codes of a block
  };

  PlanInputs& in_;
  std::unique_ptr<codec::Codec> owned_;
  const codec::AffineCodec& codec_;
  std::size_t spb_;
  std::vector<Block> blocks_;
  StagingOrder order_;                               // how this node's values are staged
  std::optional<StatsWaves> waves_;                  // when the statistics go in waves
  std::vector<std::vector<float>> extra_decoded_{};  // ranks 1.. with error feedback
  GatheredValues gather_{false, 0};                  // a small op: one round
  // Per local rank, with error feedback: its block statistics as
  // correct_inputs made its blocks (corrected_block), and how many it took.
  std::vector<std::vector<float>> corrected_stats_{};
  std::vector<std::size_t> stats_taken_{};

  // Whether every rank's statistics of every block were taken that way.
  bool corrected_stats_taken() const {
    return !stats_taken_.empty() &&
           std::all_of(stats_taken_.begin(), stats_taken_.end(),
                       [this](std::size_t taken) { return taken == blocks_.size(); });
  }
};

}  // namespace

std::unique_ptr<MethodPlan> make_affine_plan(PlanInputs& in) {
  return std::make_unique<AffinePlan>(in);
}

std::size_t block_stats_count(const Manifest& manifest, const CompressionMethod& method) {
  if (manifest.kind != wire::OpKind::all_reduce || method.has_error_feedback()) return 0;
  const std::unique_ptr<codec::Codec> codec = codec::make_codec(method.base());
  const auto* affine = dynamic_cast<const codec::AffineCodec*>(codec.get());
  if (!affine) return 0;
  std::size_t blocks = 0;
  for (const TensorSpec& t : manifest.tensors)
    blocks += (t.numel + codec::kBlockElems - 1) / codec::kBlockElems;
  return blocks * affine->stats_per_block();
}

namespace {

// How many waves an op stages in, given its block_stats_count (non-zero:
// an affine all-reduce without error feedback).
std::size_t staging_waves(const Manifest& manifest, std::size_t stats_count, std::size_t nodes) {
  const bool waves = stats_count != 0 && nodes >= 2 && manifest.elements() >= kWaveElems;
  return waves ? kStagingWaves : 1;
}

}  // namespace

std::size_t client_block_stats(const Manifest& manifest, const CompressionMethod& method,
                               std::size_t nodes) {
  const std::size_t count = block_stats_count(manifest, method);
  return staging_waves(manifest, count, nodes) > 1 ? 0 : count;
}

StagingOrder staging_order(const Manifest& manifest, const CompressionMethod& method,
                           std::size_t nodes, std::size_t node) {
  const std::size_t elements = manifest.elements();
  const std::size_t waves = staging_waves(manifest, block_stats_count(manifest, method), nodes);
  if (waves == 1) return StagingOrder(elements, nodes, node);
  std::vector<std::size_t> offsets{0};
  for (const TensorSpec& t : manifest.tensors) offsets.push_back(offsets.back() + t.numel);
  // The start of the block (of its tensor) that holds element i.
  const auto block_start = [&offsets](std::size_t i) {
    const auto t = std::upper_bound(offsets.begin(), offsets.end(), i) - 1;
    return *t + (i - *t) / codec::kBlockElems * codec::kBlockElems;
  };
  return StagingOrder(elements, nodes, node, waves, block_start);
}

}  // namespace zring::collective
