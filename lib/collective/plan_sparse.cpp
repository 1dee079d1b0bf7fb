// topk and threshold: each rank's payload (k (index, value) pairs, the
// indices delta-coded) goes to every node in an all-gather (right behind
// the node's summary: ring_allgather_with_data), and every node
// sums all W contributions in rank order: exact, the same bits everywhere,
// at (N - 1) * C bytes per node. Payloads from the ring are decoded by the
// validating codec decoder: they are untrusted input.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <zring/error.hpp>

#include "collective/float_sum.hpp"
#include "collective/plan.hpp"
#include "collective/ring_allgather.hpp"
#include "wire/wire.hpp"

namespace zring::collective {
namespace {

class SparsePlan final : public MethodPlan {
 public:
  explicit SparsePlan(PlanInputs& in)
      : in_(in), codec_(codec::make_codec(in.input.method.base())), of_node_(in.link.nodes()),
        failed_(in.link.nodes()) {}

  void prepare(NodeSummary& summary) override {
    std::vector<std::vector<std::uint8_t>> payloads;
    // This node's own views are kept as compressed, not decoded again.
    std::vector<CompressedGradient>& own = of_node_[in_.link.node()];
    for (std::size_t l = 0; l < in_.x.size(); ++l) {
      for (std::size_t t = 0; t < in_.tensors(); ++t) {
        const std::size_t off = in_.offsets[t];
        CompressedGradient g = codec_->compress(in_.x[l] + off, in_.offsets[t + 1] - off, {});
        in_.update_feedback_sparse(l, t, g);
        payloads.push_back(std::move(g.payload));
        g.payload = {};
        own.push_back(std::move(g));
      }
    }
    blob_ = std::make_shared<std::vector<std::uint8_t>>(wire::encode_payload_list(payloads));
    summary.blob_bytes = blob_->size();
  }

  // The payloads travel behind the summary (ring_allgather_with_data), so
  // a node that compressed early puts them on the wire while others still
  // compress; each node's are decoded as soon as they are all here (on the
  // ring thread, maybe while this node still compresses on the helper).
  Bytes data() override { return Bytes::take(blob_); }

  void data_arrived(std::size_t node, const Bytes& blob) override {
    if (node == in_.link.node()) return;  // kept by prepare
    try {
      decode_node(node, blob, of_node_[node]);
    } catch (const Error& e) {
      failed_[node] = e;
    } catch (const std::exception& e) {
      failed_[node] = Error(ErrorCode::internal, e.what());
    }
  }

  void execute(const std::vector<NodeSummary>&, float* result) override {
    // The first node in ring order whose payload did not decode: every
    // node decoded the same bytes, so all fail alike.
    for (const std::optional<Error>& e : failed_)
      if (e) throw *e;
    // Every rank's view of every tensor, in rank order.
    const std::size_t tensors = in_.tensors();
    std::vector<CompressedGradient> views;
    views.reserve(of_node_.size() * in_.op.local_ranks * tensors);
    for (std::vector<CompressedGradient>& node : of_node_)
      for (CompressedGradient& g : node) views.push_back(std::move(g));
    if (views.size() != of_node_.size() * in_.op.local_ranks * tensors)
      throw Error(ErrorCode::internal, "sparse plan: a node's payloads never arrived");
    const std::size_t ranks = views.size() / std::max<std::size_t>(tensors, 1);
    std::vector<const CompressedGradient*> of_tensor(ranks);
    for (std::size_t t = 0; t < tensors; ++t) {
      for (std::size_t r = 0; r < ranks; ++r) of_tensor[r] = &views[r * tensors + t];
      average(of_tensor, in_.offsets[t + 1] - in_.offsets[t], result + in_.offsets[t], in_.offsets[t]);
      if (in_.input.staging) in_.input.staging->publish_prefix(in_.offsets[t + 1]);
    }
  }

 private:
  // out = the average of the views (sum in rank order, then / world size),
  // n values, a block at a time that stays in cache: zero it, add each
  // view's entries that fall in it (rank order), divide it into out. out is
  // written in one pass and never read. A large op accumulates in a scratch
  // block and streams the averages out; the scratch stays zero between
  // blocks (only the entries a block touched are reset), so it is not
  // cleared 16384 values at a time. The same bits as zeroing all of out,
  // accumulating view after view and dividing.
  // With staging, what is done is published every kPublishEvery values
  // (first: where out starts in the op's result).
  void average(const std::vector<const CompressedGradient*>& views, std::size_t n, float* out,
               std::size_t first) {
    constexpr std::size_t kBlock = 16384;  // 64 KiB of floats
    constexpr std::size_t kPublishEvery = 16 * kBlock;
    const bool stream = in_.elements() >= kStreamElems;
    float* scratch = stream ? sized(block_, kBlock) : nullptr;  // all zero
    std::vector<std::size_t> at(views.size(), 0), from(views.size(), 0);
    for (std::size_t begin = 0; begin < n; begin += kBlock) {
      if (in_.input.staging && begin % kPublishEvery == 0 && begin > 0)
        in_.input.staging->publish_prefix(first + begin);
      const std::size_t len = std::min(kBlock, n - begin);
      float* acc = stream ? scratch : out + begin;  // acc[i - begin] for i in [begin, begin + len)
      if (!stream) std::fill(acc, acc + len, 0.0f);
      bool dense = false;
      for (std::size_t r = 0; r < views.size(); ++r) {
        const CompressedGradient& g = *views[r];
        from[r] = at[r];
        if (g.indices.empty()) {  // dense (or empty) view
          for (std::size_t i = begin; i < std::min(begin + len, g.values.size()); ++i) {
            acc[i - begin] += g.values[i];
            dense = true;
          }
          continue;
        }
        std::size_t j = at[r];
        for (; j < g.indices.size() && g.indices[j] < begin + len; ++j) acc[g.indices[j] - begin] += g.values[j];
        at[r] = j;
      }
      if (!stream) {
        divide(out + begin, len, in_.op.world_size);
        continue;
      }
      average_from_wire_streamed(reinterpret_cast<const std::uint8_t*>(scratch), out + begin, len,
                                 in_.op.world_size);
      if (dense) {
        std::fill(scratch, scratch + len, 0.0f);
        continue;
      }
      for (std::size_t r = 0; r < views.size(); ++r) {
        const CompressedGradient& g = *views[r];
        for (std::size_t j = from[r]; j < at[r]; ++j) scratch[g.indices[j] - begin] = 0.0f;
      }
    }
  }

  void decode_node(std::size_t node, const Bytes& blob, std::vector<CompressedGradient>& views) const {
    const std::size_t tensors = in_.tensors();
    std::vector<wire::Span> spans;
    try {
      spans = wire::decode_payload_list(blob.data(), blob.size(), in_.op.local_ranks * tensors);
    } catch (const Error& e) {
      throw Error(ErrorCode::malformed_message,
                  in_.link.describe(node) + " sent a payload list that does not decode: " + e.what());
    }
    for (std::size_t l = 0; l < in_.op.local_ranks; ++l) {
      for (std::size_t t = 0; t < tensors; ++t) {
        const wire::Span& span = spans[l * tensors + t];
        CompressedGradient g;
        g.method = in_.input.method.base();
        g.original_size = in_.offsets[t + 1] - in_.offsets[t];
        g.payload.assign(span.data, span.data + span.size);
        try {
          codec_->decode(g);
        } catch (const Error& e) {
          throw Error(ErrorCode::malformed_message,
                      ranks_of(in_.link, node, in_.op.local_ranks) + ": tensor '" +
                          in_.input.manifest.tensors[t].name + "': " + e.what());
        }
        views.push_back(std::move(g));
      }
    }
  }

  PlanInputs& in_;
  std::unique_ptr<codec::Codec> codec_;
  std::shared_ptr<std::vector<std::uint8_t>> blob_;
  std::vector<float> block_;  // a large op's accumulator
  std::vector<std::vector<CompressedGradient>> of_node_;  // each node's decoded payloads
  std::vector<std::optional<Error>> failed_;              // why a node's did not decode
};

}  // namespace

std::unique_ptr<MethodPlan> make_sparse_plan(PlanInputs& in) {
  return std::make_unique<SparsePlan>(in);
}

}  // namespace zring::collective
