// plan.hpp - the per-method half of an op (internal): an all-reduce's
// schedule for its method, or the broadcast.
//
// A plan prepares what the other nodes must learn before the data moves
// (statistics, sizes) and then moves the data with the schedule that keeps
// the aggregation contract for its method.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "codec/codec.hpp"
#include "collective/allreduce_op.hpp"

namespace zring::collective {

// What every plan works from.
struct PlanInputs {
  RingLink& link;
  const OpContext& op;
  const OpInput& input;
  std::vector<codec::ErrorFeedback>& residuals;
  RingStats& stats;
  Workspace& work;
  std::vector<std::size_t> offsets;  // tensor t spans [offsets[t], offsets[t+1])
  std::vector<const float*> x;       // per local rank: the values to compress
                                     // (error-corrected when the method has feedback)
  // x[l] is the buffer of rank l's staged residual (correct_inputs made it
  // there): a plan may write the next residual over it as it goes instead
  // of calling update_feedback.
  bool x_is_staged_residual = false;
  // Per local rank and tensor, when each tensor's corrected values are
  // made in its own staged residual (a plan that reads its input tensor by
  // tensor, through compress_tensor): x then holds nulls, and x_of says
  // where tensor t of rank l is once compress_tensor made it.
  std::vector<std::vector<const float*>> x_by_tensor;
  [[nodiscard]] const float* x_of(std::size_t l, std::size_t t) const {
    return x_by_tensor.empty() ? x[l] + offsets[t] : x_by_tensor[l][t];
  }

  [[nodiscard]] std::size_t elements() const noexcept { return offsets.back(); }
  [[nodiscard]] std::size_t tensors() const noexcept { return offsets.size() - 1; }
  // Error feedback applies to all-reduces only: a broadcast copies values.
  [[nodiscard]] bool feedback() const noexcept {
    return input.manifest.kind == OpKind::all_reduce && input.method.has_error_feedback();
  }
  // With error feedback: the next residual of local rank l = x[l] - decoded,
  // per tensor, staged until the op succeeds (run_allreduce commits it).
  void update_feedback(std::size_t l, const float* decoded);
  // The same for tensor t from its sparse (or dense) view, without a
  // dense decode.
  void update_feedback_sparse(std::size_t l, std::size_t t, const CompressedGradient& view);
  // Tensor t of local rank l compressed by codec, for a plan that reads its
  // input tensor by tensor: with error feedback its corrected values are
  // made in its staged residual as the codec reads them
  // (ErrorFeedback::compress_in_staging), and x_of says where they are.
  [[nodiscard]] CompressedGradient compress_tensor(std::size_t l, std::size_t t,
                                                   const codec::Codec& codec);
};

class MethodPlan {
 public:
  virtual ~MethodPlan() = default;
  // Before the summaries are exchanged: what this node tells the others.
  virtual void prepare(NodeSummary& summary) = 0;
  // Data that travels right behind the summary, before the nodes have
  // agreed on anything (its size in summary.blob_bytes): the sparse
  // methods' payloads. None by default.
  virtual Bytes data() { return {}; }
  // Right after this node's summary and data went out, on the link's
  // thread: messages of the schedule that need nothing from the other
  // nodes and write nothing, sent ahead so that they travel with the
  // summaries (the dense direct schedule's values, ring_allreduce.hpp).
  // execute does not send them again. Must not throw but for the link's
  // errors. None by default.
  virtual void send_ahead() {}
  // A node's data (this node's own too), as soon as all of it is here,
  // while the exchange goes on. Must not throw: a payload that is no good
  // fails the op in execute.
  virtual void data_arrived(std::size_t /*node*/, const Bytes& /*data*/) {}
  // Framed data instead (ring_allgather.hpp; the sparse methods): this
  // node's frame f, made when it may go, and every node's frames (this
  // node's own too) in order as they arrive. Neither may throw: a frame
  // that is no good fails the op in execute.
  virtual Bytes frame(std::size_t /*f*/) { return {}; }
  virtual void frame_arrived(std::size_t /*node*/, std::size_t /*f*/, const Bytes& /*data*/) {}
  // Once every summary is here, while the data still moves: where the
  // averages go when the summaries agree, or nullptr when they do not (the
  // op then fails after the exchange). Must not throw.
  virtual void summaries_checked(float* /*result*/) {}
  // Whether execute reads the local values range by range as they arrive
  // (OpInput::staging): otherwise the op waits for all of them first.
  [[nodiscard]] virtual bool streams_input() const { return false; }
  // Whether the plan is done reading a rank's (corrected) input once it
  // has staged that rank's next residual: then, with error feedback, the
  // corrected input can be made in the residual's own buffer, which the
  // residual then overwrites (one whole-tensor copy fewer).
  [[nodiscard]] virtual bool input_unread_after_feedback() const { return true; }
  // Whether the plan reads its input only tensor by tensor, through
  // PlanInputs::compress_tensor and then x_of (never x[l] as one buffer):
  // then, with error feedback, each tensor's corrected input is made in its
  // own residual's buffer while the codec reads it, instead of before (and
  // for an op of several tensors, in one buffer of the op's size that the
  // residuals are copied out of afterwards).
  [[nodiscard]] virtual bool reads_input_by_tensor() const { return false; }
  // With error feedback: whether the plan takes each block of kBlockElems
  // corrected values as correct_inputs makes them (corrected_block), every
  // rank's in the op's order, tensor by tensor: the affine methods' block
  // statistics, taken while the values are in the cache.
  [[nodiscard]] virtual bool reads_corrected_blocks() const { return false; }
  virtual void corrected_block(std::size_t /*l*/, const float* /*values*/, std::size_t /*n*/) {}
  // After every summary agrees: the average into result (elements() floats).
  virtual void execute(const std::vector<NodeSummary>& summaries, float* result) = 0;
};

std::unique_ptr<MethodPlan> make_dense_plan(PlanInputs& in);    // none, fp16, bf16
std::unique_ptr<MethodPlan> make_affine_plan(PlanInputs& in);   // quantization, signsgd
std::unique_ptr<MethodPlan> make_randomk_plan(PlanInputs& in);  // randomk
std::unique_ptr<MethodPlan> make_sparse_plan(PlanInputs& in);   // topk, threshold
// A broadcast (manifest.kind), whatever the method: the root's values, exact.
std::unique_ptr<MethodPlan> make_broadcast_plan(PlanInputs& in);

// The frames a node sends its sparse payloads in (framed data), from its
// summary: one per frame of the op's values (plan_sparse.cpp); 0 when its
// method is not topk or threshold, or it cannot take part.
[[nodiscard]] std::size_t sparse_frames(const NodeSummary& summary,
                                        const RingOptions& options) noexcept;

}  // namespace zring::collective
