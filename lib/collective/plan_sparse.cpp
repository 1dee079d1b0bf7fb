// topk and threshold: every rank's kept (index, value) pairs go to every
// node in an all-gather right behind the node's summary
// (ring_allgather_with_data), and every node sums all W contributions in
// rank order: exact, the same bits everywhere, at (N - 1) * C bytes per node.
//
// The pairs travel as framed data (ring_allgather.hpp). Frame f of a node
// holds, for each of its local ranks, the pairs whose index falls in the
// op's values [f R, (f + 1) R) (R: frame_elements), cut at tensor
// boundaries into pieces, each in the codec's sparse layout with indices
// counted from the piece's start. A node finishes frame f - sums every
// rank's pairs of it in rank order, divides, writes the averages - as soon
// as every node's frame f is here and the summaries agree, and frees it.
// The all-gather's window keeps every node within kFrameWindow frames of
// the others, so a node holds about kFrameWindow frames of each node,
// whatever the size of the op, not every node's whole payload. Each value
// is the same rank-order sum as over whole tensors: the same bits.
//
// Frames from the ring are untrusted input: each is decoded as it arrives
// (while others are still on the wire), by the codec's checking decoder;
// this node's own pairs are read where the codec left them.
#include <algorithm>
#include <deque>
#include <optional>
#include <string>
#include <vector>
#include <zring/error.hpp>

#include "codec/methods.hpp"
#include "codec/sparse.hpp"
#include "collective/float_sum.hpp"
#include "collective/plan.hpp"
#include "collective/ring_allgather.hpp"
#include "wire/wire.hpp"

namespace zring::collective {
namespace {

// A frame spans as many values as a chunk has bytes (at least 4096): at
// 1% a frame of one rank is some 5% of a chunk on the wire (5.3 bytes a
// kept pair), a dense one (every value kept) at most 9 chunks.
std::size_t frame_elements(const RingOptions& options) noexcept {
  return std::max<std::size_t>(options.chunk_bytes, 4096);
}

std::size_t frames_of(std::size_t elements, const RingOptions& options) noexcept {
  const std::size_t r = frame_elements(options);
  return (elements + r - 1) / r;
}

// A tensor's part of a frame: the op's values [begin, end) of tensor t.
struct Piece {
  std::size_t tensor, begin, end;
};

class SparsePlan final : public MethodPlan {
 public:
  explicit SparsePlan(PlanInputs& in)
      : in_(in),
        codec_(codec::make_codec(in.input.method.base())),
        frame_elems_(frame_elements(in.op.ring)),
        frames_(frames_of(in.elements(), in.op.ring)),
        held_(in.link.nodes()),
        failed_(in.link.nodes()) {}

  // prepare reads each tensor once, to compress it (PlanInputs::compress_tensor).
  bool reads_input_by_tensor() const override { return true; }

  void prepare(NodeSummary& summary) override {
    for (std::size_t l = 0; l < in_.x.size(); ++l) {
      for (std::size_t t = 0; t < in_.tensors(); ++t) {
        CompressedGradient g = in_.compress_tensor(l, t, *codec_);
        in_.update_feedback_sparse(l, t, g);
        g.payload = {};  // the frames are made from the pairs
        own_.push_back(std::move(g));
      }
    }
    std::vector<std::size_t> at(own_.size(), 0);
    std::size_t bytes = 0;
    for (std::size_t f = 0; f < frames_; ++f) bytes += own_frame(f, at, nullptr);
    summary.blob_bytes = bytes;
    at_.assign(own_.size(), 0);
  }

  Bytes frame(std::size_t f) override {
    auto list = std::make_shared<std::vector<std::uint8_t>>();
    Held& mine = own_sent_.emplace_back();
    own_frame(f, at_, list.get(), &mine.pairs);
    mine.bytes = list->size();
    return Bytes::take(std::move(list));
  }

  void frame_arrived(std::size_t node, std::size_t f, const Bytes& data) override {
    if (failed_[node]) return;  // the first fault of a node is the one named
    Held frame;
    try {
      if (node == in_.link.node()) {
        frame = std::move(own_sent_.front());
        own_sent_.pop_front();
      } else {
        frame = decode_frame(node, f, data);
      }
    } catch (const Error& e) {
      failed_[node] = e;
    } catch (const std::exception& e) {
      failed_[node] = Error(ErrorCode::internal, e.what());
    }
    closed_ = closed_ || failed_[node].has_value();
    if (closed_) {
      drop_held();  // the op fails: nothing more is summed
      return;
    }
    held_bytes_ += frame.bytes;
    held_[node].push_back(std::move(frame));
    in_.stats.peak_held_bytes = std::max<std::uint64_t>(in_.stats.peak_held_bytes, held_bytes_);
    finish_ready();
  }

  void summaries_checked(float* result) override {
    result_ = result;
    closed_ = closed_ || result == nullptr;
    if (closed_) drop_held();
    finish_ready();
  }

  void execute(const std::vector<NodeSummary>&, float*) override {
    // The first node in ring order with a frame that does not check: every
    // node checked the same bytes, so all fail alike.
    for (const std::optional<Error>& e : failed_)
      if (e) throw *e;
    if (finished_ != frames_)
      throw Error(ErrorCode::internal, "sparse plan: a node's frames never arrived");
    if (in_.input.staging) in_.input.staging->publish_prefix(in_.elements());
  }

 private:
  // A rank's pairs of a piece, their indices counted from base: for this
  // node's own (in own_) where the piece starts in its tensor, 0 for pairs
  // decoded from a frame.
  struct Pairs {
    const std::uint32_t* indices = nullptr;
    const float* values = nullptr;
    std::size_t size = 0;
    std::uint32_t base = 0;
  };
  // A node's frame until it is summed.
  struct Held {
    std::size_t bytes = 0;                            // as it came on the wire
    std::vector<Pairs> pairs;                         // [l * pieces + p]
    std::vector<std::vector<std::uint32_t>> indices;  // what pairs points into, when decoded
    std::vector<std::vector<float>> values;
  };

  std::vector<Piece> pieces(std::size_t f) const {
    const std::size_t begin = f * frame_elems_;
    const std::size_t end = std::min(in_.elements(), begin + frame_elems_);
    std::vector<Piece> out;
    auto t = static_cast<std::size_t>(
        std::upper_bound(in_.offsets.begin(), in_.offsets.end(), begin) - in_.offsets.begin() - 1);
    for (; t < in_.tensors() && in_.offsets[t] < end; ++t)
      if (in_.offsets[t + 1] > begin)
        out.push_back({t, std::max(begin, in_.offsets[t]), std::min(end, in_.offsets[t + 1])});
    return out;
  }

  // This node's frame f: its size, and into list when given. at[v] is
  // where own_[v]'s pairs of frame f start; it moves past them.
  // pairs, when given, gets where each piece's pairs are in own_.
  std::size_t own_frame(std::size_t f, std::vector<std::size_t>& at,
                        std::vector<std::uint8_t>* list, std::vector<Pairs>* pairs = nullptr) {
    const std::vector<Piece> parts = pieces(f);
    std::vector<std::vector<std::uint8_t>> payloads;
    std::size_t bytes = 0;
    for (std::size_t l = 0; l < in_.x.size(); ++l) {
      for (const Piece& p : parts) {
        const std::size_t v = l * in_.tensors() + p.tensor;
        const std::vector<std::uint32_t>& idx = own_[v].indices;
        const auto base = static_cast<std::uint32_t>(p.begin - in_.offsets[p.tensor]);
        const std::size_t end = p.end - in_.offsets[p.tensor];
        std::size_t j = at[v];
        while (j < idx.size() && idx[j] < end) ++j;
        if (pairs)
          pairs->push_back({idx.data() + at[v], own_[v].values.data() + at[v], j - at[v], base});
        const std::size_t size = codec::detail::sparse_bytes(idx.data() + at[v], j - at[v], base);
        bytes += size;
        if (list) {
          payloads.emplace_back(size);
          codec::detail::encode_sparse_range(idx.data() + at[v], own_[v].values.data() + at[v],
                                             j - at[v], base, payloads.back().data());
        }
        at[v] = j;
      }
    }
    if (list) *list = wire::encode_payload_list(payloads);
    return wire::payload_list_bytes(in_.x.size() * parts.size(), bytes);
  }

  Held decode_frame(std::size_t node, std::size_t f, const Bytes& data) const {
    const std::vector<Piece> parts = pieces(f);
    std::vector<wire::Span> spans;
    try {
      spans =
          wire::decode_payload_list(data.data(), data.size(), in_.op.local_ranks * parts.size());
    } catch (const Error& e) {
      throw Error(ErrorCode::malformed_message, in_.link.describe(node) + " sent a frame " +
                                                    std::to_string(f) +
                                                    " that does not decode: " + e.what());
    }
    Held frame;
    frame.bytes = data.size();
    frame.indices.resize(spans.size());
    frame.values.resize(spans.size());
    for (std::size_t s = 0; s < spans.size(); ++s) {
      const Piece& p = parts[s % parts.size()];
      try {
        codec::detail::decode_sparse_pairs(in_.input.method.base(), spans[s].data, spans[s].size,
                                           p.end - p.begin, frame.indices[s], frame.values[s]);
      } catch (const Error& e) {
        throw Error(ErrorCode::malformed_message,
                    ranks_of(in_.link, node, in_.op.local_ranks) + ": tensor '" +
                        in_.input.manifest.tensors[p.tensor].name + "', values from " +
                        std::to_string(p.begin - in_.offsets[p.tensor]) + ": " + e.what());
      }
      frame.pairs.push_back(
          {frame.indices[s].data(), frame.values[s].data(), frame.indices[s].size(), 0});
    }
    return frame;
  }

  void drop_held() {
    for (std::deque<Held>& node : held_) node.clear();
    held_bytes_ = 0;
  }

  // Every frame that every node's is here for, in order, once the
  // summaries agree (and while every frame checked).
  void finish_ready() {
    if (!result_ || closed_) return;
    while (finished_ < frames_ &&
           std::all_of(held_.begin(), held_.end(),
                       [](const std::deque<Held>& n) { return !n.empty(); })) {
      const std::vector<Piece> parts = pieces(finished_);
      for (std::size_t p = 0; p < parts.size(); ++p) {
        views_.clear();
        for (const std::deque<Held>& node :
             held_)  // rank order: node by node, local ranks in order
          for (std::size_t l = 0; l < in_.op.local_ranks; ++l)
            views_.push_back(node.front().pairs[l * parts.size() + p]);
        average(parts[p].end - parts[p].begin, result_ + parts[p].begin, parts[p].begin);
      }
      for (std::deque<Held>& node : held_) {
        held_bytes_ -= node.front().bytes;
        node.pop_front();
      }
      if (++finished_ == frames_) own_ = {};
      if (in_.input.staging)
        in_.input.staging->publish_prefix(std::min(in_.elements(), finished_ * frame_elems_));
    }
  }

  // out = the average of views_ (sum in rank order, then / world size),
  // n values, a block at a time that stays in cache: zero it, add each
  // view's entries that fall in it (rank order), divide it into out. out is
  // written in one pass and never read. A large op accumulates in a scratch
  // block and streams the averages out; the scratch stays zero between
  // blocks (only the entries a block touched are reset), so it is not
  // cleared 16384 values at a time. The same bits as zeroing all of out,
  // accumulating view after view and dividing.
  // With staging, what is done is published every kPublishEvery values
  // (first: where out starts in the op's result).
  void average(std::size_t n, float* out, std::size_t first) {
    constexpr std::size_t kBlock = 16384;  // 64 KiB of floats
    constexpr std::size_t kPublishEvery = 16 * kBlock;
    const bool stream = in_.elements() >= kStreamElems;
    float* scratch = stream ? sized(block_, kBlock) : nullptr;  // all zero
    at_view_.assign(views_.size(), 0);
    from_.assign(views_.size(), 0);
    for (std::size_t begin = 0; begin < n; begin += kBlock) {
      if (in_.input.staging && begin % kPublishEvery == 0 && begin > 0)
        in_.input.staging->publish_prefix(first + begin);
      const std::size_t len = std::min(kBlock, n - begin);
      float* acc = stream ? scratch : out + begin;  // acc[i - begin] for i in [begin, begin + len)
      if (!stream) std::fill(acc, acc + len, 0.0f);
      for (std::size_t r = 0; r < views_.size(); ++r) {
        const Pairs& v = views_[r];
        const std::size_t end = begin + len + v.base;  // in v's own counting
        std::size_t j = from_[r] = at_view_[r];
        for (; j < v.size && v.indices[j] < end; ++j)
          acc[v.indices[j] - v.base - begin] += v.values[j];
        at_view_[r] = j;
      }
      if (!stream) {
        divide(out + begin, len, in_.op.world_size);
        continue;
      }
      average_from_wire_streamed(reinterpret_cast<const std::uint8_t*>(scratch), out + begin, len,
                                 in_.op.world_size);
      for (std::size_t r = 0; r < views_.size(); ++r) {
        const Pairs& v = views_[r];
        for (std::size_t j = from_[r]; j < at_view_[r]; ++j)
          scratch[v.indices[j] - v.base - begin] = 0.0f;
      }
    }
  }

  PlanInputs& in_;
  std::unique_ptr<codec::Codec> codec_;
  std::size_t frame_elems_;
  std::size_t frames_;
  std::vector<CompressedGradient> own_;  // [l * tensors + t]: this node's pairs, until summed
  std::vector<std::size_t> at_;          // where own_'s next frame starts
  std::vector<std::deque<Held>> held_;   // per node: its frames not yet summed, in order
  std::uint64_t held_bytes_ = 0;
  std::vector<std::optional<Error>> failed_;  // per node: why its frame did not check
  float* result_ = nullptr;                   // once the summaries agree
  bool closed_ = false;                       // they do not, or a frame failed: nothing is summed
  std::size_t finished_ = 0;                  // frames summed into result_
  std::deque<Held> own_sent_;                 // this node's frames sent, not yet handed back
  std::vector<Pairs> views_;                  // every rank's pairs of a piece, in rank order
  std::vector<std::size_t> at_view_, from_;   // average: where each view is, where its block began
  std::vector<float> block_;                  // a large op's accumulator
};

}  // namespace

std::unique_ptr<MethodPlan> make_sparse_plan(PlanInputs& in) {
  return std::make_unique<SparsePlan>(in);
}

namespace {

// Whether a method's text names one whose sums are sparse; a text that does
// not parse is not. The ring thread asks it of every summary, whose method
// is nearly always the one before: that one answer is kept, per thread.
bool sums_sparsely(const std::string& method) noexcept {
  thread_local std::string last;
  thread_local bool last_sparse = false;
  if (method == last && !last.empty()) return last_sparse;
  bool sparse = false;
  try {
    const CompressionKind kind = CompressionMethod::parse(method).kind();
    sparse = codec::method_row(kind).summation == codec::Summation::sparse;
    last = method;
    last_sparse = sparse;
  } catch (const std::exception&) {
    // Not kept: what does not parse stays rare.
  }
  return sparse;
}

}  // namespace

std::size_t sparse_frames(const NodeSummary& summary, const RingOptions& options) noexcept {
  if (summary.failure || !sums_sparsely(summary.manifest.method)) return 0;
  return frames_of(static_cast<std::size_t>(summary.manifest.elements()), options);
}

}  // namespace zring::collective
