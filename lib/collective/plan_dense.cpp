// The dense methods: none (float32 sums) and fp16 / bf16 (16-bit partial
// sums, rounded at every hop: the one documented exception to exactness).
// Which is which, and the 16-bit words, come from the method's row in the
// table of methods (codec/methods.cpp): Summation::dense_float or
// rounded_half.
#include <memory>
#include <vector>

#include "codec/methods.hpp"
#include "collective/gather_allreduce.hpp"
#include "collective/plan.hpp"

namespace zring::collective {
namespace {

class DensePlan final : public MethodPlan {
 public:
  explicit DensePlan(PlanInputs& in)
      : in_(in),
        floats_(codec::method_row(in.input.method.kind()).summation ==
                codec::Summation::dense_float),
        words_(codec::method_row(in.input.method.kind()).words),
        gather_(gathers(in.elements() * sizeof(float), in.link.nodes(), in.op.ring),
                in.link.nodes()) {}

  // A small op's contribution rides behind the summary (gather_allreduce.hpp).
  // A larger one's is made here too (on the helper, for a large op), so that
  // its first messages can go with the summary (send_ahead); one rank's is
  // its own buffer, read as its values arrive (streams_input).
  void prepare(NodeSummary& summary) override {
    const std::size_t n = in_.elements();
    if (!gather_.on()) {
      // One rank streamed is read where it is (a 16-bit one rounded as
      // the ring adds it: HalfLane::round_local).
      local_ = streams_input() ? in_.x[0] : local_sum(n);
      return;
    }
    // A copy: the result may be written over the input while ZeroMQ still
    // holds this node's message (the others' arriving says nothing of it).
    gather_.send(summary, Bytes::copy_of(local_sum(n), n * sizeof(float)));
  }
  Bytes data() override { return gather_.mine(); }
  void data_arrived(std::size_t node, const Bytes& data) override { gather_.arrived(node, data); }

  // The schedule's first messages go with the summary: its values to each
  // chunk's owner on the direct schedule, the first chunks of its own
  // segment round the ring.
  void send_ahead() override {
    if (gather_.on()) return;
    const std::size_t n = in_.elements();
    if (floats_) {
      sent_ahead_ = ring_allreduce_send_ahead(in_.link, FloatLane{}, local_, n, in_.op.ring,
                                              in_.stats, local_owner(), in_.input.staging);
    } else {
      sent_ahead_ = ring_allreduce_send_ahead(in_.link, half_lane(), local_, n, in_.op.ring,
                                              in_.stats, nullptr, in_.input.staging);
    }
  }

  // One rank without feedback is summed where it arrives (a 16-bit one
  // rounded on the way).
  bool streams_input() const override {
    return !gather_.on() && in_.input.ranks.size() == 1 && !in_.feedback();
  }

  // One float32 rank returns its input as the node's sum after staging.
  bool input_unread_after_feedback() const override { return !floats_; }

  void execute(const std::vector<NodeSummary>&, float* result) override {
    const std::size_t n = in_.elements();
    const std::size_t world = in_.op.world_size;
    if (gather_.on()) {
      std::vector<float>& all = in_.work.gathered;
      gather_.floats(in_.link, n, all);
      if (floats_) {
        gather_allreduce(FloatLane{}, in_.link.nodes(), all.data(), result, n, world);
      } else {
        gather_allreduce(HalfLane{words_, false}, in_.link.nodes(), all.data(), result, n, world);
      }
      if (in_.input.staging) in_.input.staging->publish_prefix(n);
      return;
    }
    if (floats_) {
      ring_allreduce(in_.link, FloatLane{}, local_, result, n, in_.op.ring, in_.stats, world,
                     local_owner(), in_.input.staging, sent_ahead_);
    } else {
      ring_allreduce(in_.link, half_lane(), local_, result, n, in_.op.ring, in_.stats, world,
                     nullptr, in_.input.staging, sent_ahead_);
    }
  }

 private:
  HalfLane half_lane() const { return HalfLane{words_, streams_input()}; }

  // Values straight from rank 0's buffer are sent from there (streamed: each
  // range once it is there).
  std::shared_ptr<const void> local_owner() const {
    const bool own = !in_.input.ranks.empty() && local_ == in_.input.ranks[0];
    return own ? in_.input.rank0_owner : nullptr;
  }

  // The node's contribution: the sum over local ranks of D(C(x)). One
  // uncompressed rank is used in place, without a copy.
  const float* local_sum(std::size_t n) {
    const std::size_t ranks = in_.x.size();
    if (ranks == 1 && floats_) {
      if (in_.feedback()) in_.update_feedback(0, in_.x[0]);  // nothing is dropped
      return in_.x[0];
    }
    float* sum = sized(in_.work.sum, n);
    float* decoded = sized(in_.work.decoded, n);
    for (std::size_t l = 0; l < ranks; ++l) {
      round_trip(in_.x[l], n, decoded);
      if (l == 0)
        std::copy(decoded, decoded + n, sum);
      else
        for (std::size_t i = 0; i < n; ++i) sum[i] += decoded[i];
      in_.update_feedback(l, decoded);
    }
    return sum;
  }

  void round_trip(const float* x, std::size_t n, float* out) {
    if (floats_) {
      std::copy(x, x + n, out);
      return;
    }
    std::uint16_t* h = sized(in_.work.halves, n);
    words_.encode(x, n, h);
    words_.decode(h, n, out);
  }

  PlanInputs& in_;
  bool floats_;                    // none: float32 values and sums
  codec::SixteenBitFormat words_;  // fp16 / bf16: the 16-bit words
  GatheredValues gather_;          // a small op: one round (gather_allreduce.hpp)
  std::size_t sent_ahead_ = 0;     // messages send_ahead sent
  const float* local_ = nullptr;   // the node's contribution (prepare)
};

}  // namespace

std::unique_ptr<MethodPlan> make_dense_plan(PlanInputs& in) {
  return std::make_unique<DensePlan>(in);
}

}  // namespace zring::collective
