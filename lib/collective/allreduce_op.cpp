#include "collective/allreduce_op.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <zring/error.hpp>

#include "codec/methods.hpp"
#include "collective/plan.hpp"
#include "collective/ring_allgather.hpp"
#include "wire/wire.hpp"

namespace zring::collective {
namespace {

// Ops at least this large (elements, 2 MiB of floats) prepare on the
// helper thread. The hand-over (a wake-up each way) cost 0.1-0.3 ms on a
// busy 2-core machine: more than a 1 MiB op's prepare of any method, which
// was as fast or faster on the ring thread (docs/benchmarks.md).
constexpr std::size_t kPrepareBesideElems = std::size_t{1} << 19;

// The schedule follows from how the method sums: the Summation of its row
// in the table of methods (codec/methods.cpp), so a new method needs only
// its row and its codec.
std::unique_ptr<MethodPlan> make_plan(PlanInputs& in) {
  if (in.input.manifest.kind == OpKind::broadcast) return make_broadcast_plan(in);
  switch (codec::method_row(in.input.method.kind()).summation) {
    case codec::Summation::dense_float:
    case codec::Summation::rounded_half:
      return make_dense_plan(in);
    case codec::Summation::affine_codes:
      return make_affine_plan(in);
    case codec::Summation::shared_indices:
      return make_randomk_plan(in);
    case codec::Summation::sparse:
      return make_sparse_plan(in);
  }
  throw Error(ErrorCode::internal, "no plan for method " + in.input.method.to_string());
}

std::vector<std::size_t> offsets_of(const Manifest& manifest) {
  std::vector<std::size_t> offsets{0};
  for (const TensorSpec& t : manifest.tensors) offsets.push_back(offsets.back() + t.numel);
  return offsets;
}

// With error feedback, what is compressed is g + residual. When the plan
// reads its input tensor by tensor (top-k, threshold: a DDP bucket's
// parameters), each tensor's is made later, in the buffer of the residual
// the op stages, as the codec reads it (PlanInputs::compress_tensor). For
// an op of one tensor whose plan allows it, made now in that buffer
// (ErrorFeedback::corrected_in_staging), not in a copy of its own.
void correct_inputs(PlanInputs& in, MethodPlan& plan) {
  if (!in.feedback()) {
    in.x = in.input.ranks;
    return;
  }
  const auto& tensors = in.input.manifest.tensors;
  // The plan's look at each block of local rank l's as it is made.
  auto blocks_of = [&plan](std::size_t l) -> codec::ErrorFeedback::CorrectedBlock {
    if (!plan.reads_corrected_blocks()) return nullptr;
    return [&plan, l](const float* values, std::size_t n) { plan.corrected_block(l, values, n); };
  };
  if (plan.input_unread_after_feedback() && plan.reads_input_by_tensor()) {
    in.x.assign(in.input.ranks.size(), nullptr);
    in.x_by_tensor.assign(in.input.ranks.size(), std::vector<const float*>(tensors.size()));
    return;
  }
  if (tensors.size() == 1 && plan.input_unread_after_feedback()) {
    for (std::size_t l = 0; l < in.input.ranks.size(); ++l)
      in.x.push_back(in.residuals[l].corrected_in_staging(tensors[0].name, in.input.ranks[l],
                                                          in.elements(), blocks_of(l)));
    in.x_is_staged_residual = true;
    return;
  }
  in.work.corrected.resize(std::max(in.work.corrected.size(), in.input.ranks.size()));
  for (std::size_t l = 0; l < in.input.ranks.size(); ++l) {
    float* c = sized(in.work.corrected[l], in.elements());
    const codec::ErrorFeedback::CorrectedBlock each_block = blocks_of(l);
    for (std::size_t t = 0; t < tensors.size(); ++t) {
      const std::size_t off = in.offsets[t];
      in.residuals[l].corrected(tensors[t].name, in.input.ranks[l] + off, in.offsets[t + 1] - off,
                                c + off, each_block);
    }
    in.x.push_back(c);
  }
}

// The most data bytes a node can need for its manifest: every element of
// every local rank kept, 4 bytes of value and 5 of index each, plus counts;
// and never more than 64 GiB, so that what a node announces cannot make
// the others set up more than a million pieces for it. (Each node bounds
// another's data by that node's own manifest, so all decide alike even
// when the manifests differ.)
constexpr long double kMostData = 68719476736.0L;  // 64 GiB
std::uint64_t max_data_bytes(const NodeSummary& summary, std::size_t local_ranks) {
  long double per_rank = 0;
  for (const TensorSpec& t : summary.manifest.tensors)
    per_rank += 9.0L * static_cast<long double>(t.numel) + 16.0L;
  const long double most = static_cast<long double>(local_ranks) * (per_rank + 16.0L) + 64.0L;
  return static_cast<std::uint64_t>(std::min(most, kMostData));
}

// Every node reaches the same verdict from the same summaries.
void check_summaries(const RingLink& link, const OpContext& context,
                     const std::vector<NodeSummary>& summaries) {
  const std::string op = "op " + std::to_string(context.op_number) + ": ";
  for (std::size_t n = 0; n < summaries.size(); ++n) {
    if (const std::optional<Status>& failure = summaries[n].failure) {
      throw AgreedFailure(failure->code, op + ranks_of(link, n, context.local_ranks) +
                                             " could not take part: " + failure->text);
    }
  }
  for (std::size_t n = 1; n < summaries.size(); ++n) {
    if (summaries[n].manifest == summaries[0].manifest) continue;  // the names cost strings
    const std::string diff =
        manifest_difference(summaries[0].manifest, ranks_of(link, 0, context.local_ranks),
                            summaries[n].manifest, ranks_of(link, n, context.local_ranks));
    if (!diff.empty())
      throw AgreedFailure(ErrorCode::manifest_mismatch, op + "manifest mismatch: " + diff);
  }
}

// Every node's summary and the data behind it (MethodPlan::data). Each
// summary is decoded as it arrives, to learn how much data follows it; a
// summary that does not decode, or announces more data than its manifest
// can need, fails the op once the exchange is over: every node sees the
// same bytes, so every node names the same first bad node.
std::vector<NodeSummary> exchange_summaries(RingLink& link, const OpContext& context,
                                            const Mine& mine, MethodPlan* plan, float* result,
                                            RingStats& stats) {
  const std::size_t nodes = link.nodes();
  std::vector<NodeSummary> summaries(nodes);
  std::vector<std::string> bad(nodes);
  std::size_t known = 0;
  // Once all are here, the plan learns whether they agree (check_summaries,
  // which the op runs again once the exchange is over).
  const auto checked = [&] {
    if (++known < nodes || !plan) return;
    link.summaries_known();  // the plan may write results from here on
    bool agree =
        std::all_of(bad.begin(), bad.end(), [](const std::string& b) { return b.empty(); });
    if (agree) {
      try {
        check_summaries(link, context, summaries);
      } catch (const std::exception&) {
        agree = false;
      }
    }
    plan->summaries_checked(agree ? result : nullptr);
  };
  const DataSize data_size = [&](std::size_t n, const Bytes& blob) -> std::optional<DataSpec> {
    try {
      summaries[n] = wire::decode_summary(blob.data(), blob.size());
    } catch (const std::exception& e) {
      bad[n] = link.describe(n) + " sent a summary that does not decode: " + e.what();
      checked();
      return std::nullopt;
    }
    const std::uint64_t announced = summaries[n].blob_bytes;
    if (announced > max_data_bytes(summaries[n], context.local_ranks)) {
      bad[n] = link.describe(n) + " announced a payload of " + std::to_string(announced) +
               " bytes, more than its ranks could need for this op";
      checked();
      return std::nullopt;
    }
    checked();
    return DataSpec{static_cast<std::size_t>(announced), sparse_frames(summaries[n], context.ring)};
  };
  const Arrived arrived = [&](std::size_t n, const Bytes& data) {
    if (plan) plan->data_arrived(n, data);
  };
  const FrameArrived frame_arrived = [&](std::size_t n, std::size_t f, const Bytes& data) {
    if (plan) plan->frame_arrived(n, f, data);
  };
  ring_allgather_with_data(link, mine, data_size, context.ring, stats, arrived, frame_arrived);
  for (std::size_t n = 0; n < nodes; ++n) {
    if (!bad[n].empty())
      throw Error(ErrorCode::malformed_message,
                  "op " + std::to_string(context.op_number) + ": " + bad[n]);
  }
  return summaries;
}

}  // namespace

std::string ranks_of(const RingLink& link, std::size_t node, std::size_t local_ranks) {
  const std::size_t first = node * local_ranks;
  const std::string ranks = local_ranks == 1 ? "rank " + std::to_string(first)
                                             : "ranks " + std::to_string(first) + "-" +
                                                   std::to_string(first + local_ranks - 1);
  return ranks + " (" + link.describe(node) + ")";
}

void PlanInputs::update_feedback(std::size_t l, const float* decoded) {
  if (!feedback()) return;
  const auto& specs = input.manifest.tensors;
  for (std::size_t t = 0; t < specs.size(); ++t) {
    const std::size_t off = offsets[t];
    residuals[l].stage(specs[t].name, x[l] + off, decoded + off, offsets[t + 1] - off);
  }
}

void PlanInputs::update_feedback_sparse(std::size_t l, std::size_t t,
                                        const CompressedGradient& view) {
  if (!feedback()) return;
  residuals[l].stage_sparse(input.manifest.tensors[t].name, x_of(l, t), offsets[t + 1] - offsets[t],
                            view);
}

CompressedGradient PlanInputs::compress_tensor(std::size_t l, std::size_t t,
                                               const codec::Codec& codec) {
  const std::size_t n = offsets[t + 1] - offsets[t];
  if (x_by_tensor.empty()) return codec.compress(x_of(l, t), n, {});
  return residuals[l].compress_in_staging(codec, input.manifest.tensors[t].name,
                                          input.ranks[l] + offsets[t], n, {}, &x_by_tensor[l][t]);
}

OpOutput run_allreduce(RingLink& link, const OpContext& context, const OpInput& input,
                       std::vector<codec::ErrorFeedback>& residuals, Workspace& workspace) {
  OpOutput out;
  out.phases.began = Clock::now();
  PlanInputs in{link, context, input, residuals, out.stats, workspace, offsets_of(input.manifest),
                {},   false,   {}};
  NodeSummary mine;
  mine.manifest = input.manifest;
  mine.failure = input.failure;
  std::unique_ptr<MethodPlan> plan;
  if (!input.failure) {
    if (input.ranks.size() != context.local_ranks || residuals.size() != context.local_ranks)
      throw Error(ErrorCode::internal, "run_allreduce: one contribution per local rank expected");
    for (codec::ErrorFeedback& r : residuals) r.discard();  // what a failed op staged
    plan = make_plan(in);
  }
  const auto prepare = [&] {
    if (plan) {
      if (input.staging && !plan->streams_input()) input.staging->wait_all();
      correct_inputs(in, *plan);
      plan->prepare(mine);
    }
    out.phases.prepared = Clock::now();
  };
  // A large op prepares (compresses) on the helper thread, while this one
  // already forwards the summaries and data of the nodes that are ready.
  // The guard waits for the helper before anything it uses goes away.
  const bool beside = plan && link.nodes() > 1 && in.elements() >= kPrepareBesideElems;
  struct Join {
    Helper* helper;
    ~Join() {
      if (helper) helper->wait_quietly();
    }
  } join{beside ? &workspace.helper : nullptr};
  if (beside)
    workspace.helper.start(prepare, [&link] { link.wake(); });
  else
    prepare();
  const Mine own{
      [&] { return !beside || workspace.helper.done(); },
      [&]() -> std::pair<Bytes, Bytes> {
        if (beside) {
          join.helper = nullptr;
          workspace.helper.wait();  // rethrows what prepare threw
        }
        const std::vector<std::uint8_t> encoded = wire::encode_summary(mine);
        return {Bytes::copy_of(encoded.data(), encoded.size()), plan ? plan->data() : Bytes{}};
      },
      [&](std::size_t f) { return plan->frame(f); },
      [&] {
        if (plan) plan->send_ahead();
      }};
  // Where the averages go is known before the data moves: a plan may write
  // them while it does (summaries_checked).
  out.elements = in.elements();
  if (plan)
    out.values = input.output ? std::shared_ptr<float[]>(input.output_owner, input.output)
                              : workspace.result(out.elements);
  const std::vector<NodeSummary> summaries =
      exchange_summaries(link, context, own, plan.get(), out.values.get(), out.stats);
  out.phases.summarized = Clock::now();
  link.summaries_known();
  check_summaries(link, context, summaries);
  plan->execute(summaries, out.values.get());
  out.phases.finished = Clock::now();
  // The op went through: what the plan staged becomes the residuals. An op
  // that fails anywhere before leaves them as they were.
  if (in.feedback())
    for (codec::ErrorFeedback& r : residuals) r.commit();
  return out;
}

}  // namespace zring::collective
