// The sparse plan (topk, threshold) to the bit: every node's result is the
// rank-order sum of what each rank's codec kept, divided by the world size,
// exactly; the reference comparisons of test_ring allow for summation order,
// this one does not. The inputs are checked to make the order matter: the
// same sum taken in reverse rank order has other bits somewhere.
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <cstring>

#include "codec/codec.hpp"
#include "collective/ring_allgather.hpp"
#include "ring_run.hpp"

using namespace zring;
using namespace zring::collective;
using namespace zring::collective::ring_test;
namespace bdata = boost::unit_test::data;

namespace {

// Each rank's kept values of the fused tensors, as dense float vectors.
std::vector<std::vector<float>> kept_by_rank(const CompressionMethod& method,
                                             const std::vector<TensorMap>& inputs) {
  const std::unique_ptr<codec::Codec> codec = codec::make_codec(method);
  std::vector<std::vector<float>> kept;
  for (const TensorMap& rank : inputs) {
    std::vector<float> dense;
    for (const auto& [name, tensor] : rank) {
      const std::size_t at = dense.size();
      dense.resize(at + tensor.numel(), 0.0f);
      const CompressedGradient g = codec->compress(tensor.data().data(), tensor.numel(), {});
      for (std::size_t j = 0; j < g.indices.size(); ++j) dense[at + g.indices[j]] = g.values[j];
    }
    kept.push_back(std::move(dense));
  }
  return kept;
}

// sum over ranks in the given order, then / ranks, float32 all the way.
std::vector<float> average_in_order(const std::vector<std::vector<float>>& kept, bool reverse) {
  const std::size_t ranks = kept.size();
  std::vector<float> sum(kept[0].size(), 0.0f);
  for (std::size_t k = 0; k < ranks; ++k) {
    const std::vector<float>& v = kept[reverse ? ranks - 1 - k : k];
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += v[i];
  }
  for (float& s : sum) s /= static_cast<float>(ranks);
  return sum;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(sparse, *boost::unit_test::label("large"))

// Small ops and ops of 2^20 values or more (the streamed average), with
// payloads cut into many pieces on the way (4 KiB chunks) or few.
BOOST_DATA_TEST_CASE(results_are_the_rank_order_sum_to_the_bit,
                     bdata::make({"topk:30%", "topk:1%", "threshold:1.5"}) * bdata::make({1, 3}) *
                         bdata::make({1, 2}) * bdata::make({0, 1}),
                     method_text, nodes, local, large) {
  const CompressionMethod method = CompressionMethod::parse(method_text);
  const std::vector<std::size_t> sizes = large ? std::vector<std::size_t>{1100003, 4099, 7}
                                               : std::vector<std::size_t>{1000, 0, 5000, 9000};
  const std::size_t world = static_cast<std::size_t>(nodes * local);
  InprocRing ring(static_cast<std::size_t>(nodes));
  std::vector<std::vector<codec::ErrorFeedback>> residuals(
      static_cast<std::size_t>(nodes),
      std::vector<codec::ErrorFeedback>(static_cast<std::size_t>(local)));
  const auto inputs = make_inputs(world, 0, sizes);
  RingRun run;
  run_op(ring, static_cast<std::size_t>(local), method, inputs, 0, residuals, run,
         large ? std::size_t{1} << 20 : 4096);
  check_same_bits(run);
  const auto kept = kept_by_rank(method, inputs);
  const std::vector<float> expected = average_in_order(kept, false);
  BOOST_TEST(same_bits(run.outputs[0], expected), method_text << " on " << nodes << "x" << local);
  // (Three ranks keeping 1% of a few thousand values rarely share one.)
  if (world > 2 && (large || method_text != std::string("topk:1%")))
    BOOST_TEST(!same_bits(expected, average_in_order(kept, true)), "order never mattered");
}

// A node holds a window of frames, not every node's payload: with frames
// of 4096 values (4 KiB chunks), an op of 2^21 values has 512 frames per
// node, and what a node ever held at once (its own frames and the others',
// in wire bytes) stays within kFrameWindow + 1 frames of each node,
// whatever the scheduling. Frames of these inputs are all about the same size: half as
// large again as the mean is a safe margin.
BOOST_AUTO_TEST_CASE(a_node_holds_a_window_of_frames_not_every_payload) {
  const CompressionMethod method = CompressionMethod::parse("topk:10%");
  constexpr std::size_t kNodes = 3, kLocal = 2, kElements = std::size_t{1} << 21, kChunk = 4096;
  constexpr std::size_t kFrames = kElements / kChunk;
  InprocRing ring(kNodes);
  std::vector<std::vector<codec::ErrorFeedback>> residuals(
      kNodes, std::vector<codec::ErrorFeedback>(kLocal));
  const auto inputs = make_inputs(kNodes * kLocal, 0, {kElements});
  RingRun run;
  run_op(ring, kLocal, method, inputs, 0, residuals, run, kChunk);
  check_same_bits(run);
  BOOST_TEST(same_bits(run.outputs[0], average_in_order(kept_by_rank(method, inputs), false)));
  // Each node's frames cross N - 1 links.
  double sent = 0;
  for (const RingStats& s : run.stats) sent += static_cast<double>(s.bytes_sent);
  const double payloads = sent / (kNodes - 1);
  const double window = 1.5 * (kFrameWindow + 1) * payloads / kFrames;
  for (std::size_t n = 0; n < kNodes; ++n) {
    const auto held = static_cast<double>(run.stats[n].peak_held_bytes);
    BOOST_TEST_INFO("node " << n << " held " << held << " bytes of " << payloads);
    BOOST_TEST(held > 0);
    BOOST_TEST(held <= window);
    BOOST_TEST(held <= payloads / 8);
  }
}

BOOST_AUTO_TEST_SUITE_END()
