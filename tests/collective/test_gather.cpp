// Small ops in one round (gather_allreduce.hpp): every method that can
// gather gets the same bits gathered as round the ring, op after op (error
// feedback carries the same residuals), and a gathered op really is one
// round: each node sends its summary and its values, nothing else.
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <cstring>

#include "ring_run.hpp"

using namespace zring;
using namespace zring::collective;
using namespace zring::collective::ring_test;
namespace bdata = boost::unit_test::data;

namespace {

constexpr std::size_t kAlwaysGather = std::size_t{1} << 30;
constexpr std::size_t kNeverGather = 0;

struct Rings {
  RingRun gathered, ringed;
};

// Three ops of `method_text`, each run twice on rings of their own (each
// with its own residuals): once gathered, once round the ring.
void three_ops_both_ways(const std::string& method_text, std::size_t nodes, std::size_t local,
                         const std::vector<std::size_t>& sizes,
                         const std::function<void(const Rings&)>& check) {
  const CompressionMethod method = CompressionMethod::parse(method_text);
  InprocRing gather_ring(nodes), ring_ring(nodes);
  std::vector<std::vector<codec::ErrorFeedback>> gather_residuals(
      nodes, std::vector<codec::ErrorFeedback>(local));
  auto ring_residuals = gather_residuals;
  for (std::uint64_t op = 0; op < 3; ++op) {
    const auto inputs = make_inputs(nodes * local, op, sizes);
    Rings runs;
    run_op(gather_ring, local, method, inputs, op, gather_residuals, runs.gathered, 1 << 20,
           nullptr, std::chrono::seconds(20), kAlwaysGather);
    run_op(ring_ring, local, method, inputs, op, ring_residuals, runs.ringed, 1 << 20, nullptr,
           std::chrono::seconds(20), kNeverGather, 0);
    check_same_bits(runs.gathered);
    check_same_bits(runs.ringed);
    BOOST_TEST_INFO(method_text << " on " << nodes << "x" << local << ", op " << op);
    BOOST_REQUIRE_EQUAL(runs.gathered.outputs[0].size(), runs.ringed.outputs[0].size());
    BOOST_TEST(std::memcmp(runs.gathered.outputs[0].data(), runs.ringed.outputs[0].data(),
                           runs.ringed.outputs[0].size() * sizeof(float)) == 0,
               "gathered and ringed results differ");
    check(runs);
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gather)

BOOST_DATA_TEST_CASE(gathered_ops_get_the_bits_of_the_ring,
                     bdata::make({"none", "fp16", "bf16", "quant:8", "quant:3", "quant:16", "sign",
                                  "randomk:10%", "randomk:2", "ef:quant:4", "ef:sign", "ef:fp16",
                                  "ef:randomk:10%"}) *
                         bdata::make({2, 3, 5}) * bdata::make({1, 2}),
                     method_text, nodes, local) {
  // 8008 floats: what a node gathers, even with two local ranks' values
  // (quant, sign), is one piece (at most 64 KiB).
  const auto sizes = std::vector<std::size_t>{1, 7, 1000, 5000, 0, 2000};
  const auto ring_size = static_cast<std::size_t>(nodes);
  three_ops_both_ways(
      method_text, ring_size, static_cast<std::size_t>(local), sizes, [&](const Rings& runs) {
        // One round: a summary and one piece of values per origin, forwarded to
        // every other node; the ring sends more.
        for (std::size_t n = 0; n < ring_size; ++n) {
          BOOST_TEST(
              runs.gathered.stats[n].messages_sent == 2 * (ring_size - 1),
              "node " << n << " sent " << runs.gathered.stats[n].messages_sent << " messages");
          BOOST_TEST(runs.ringed.stats[n].messages_sent > runs.gathered.stats[n].messages_sent);
        }
      });
}

// By default a one-float op is gathered: each of four nodes sends the
// summaries and the values of the three others and its own, one message
// each, and the average is exact.
BOOST_AUTO_TEST_CASE(a_one_float_op_is_one_round_by_default) {
  InprocRing ring(4);
  std::vector<std::vector<codec::ErrorFeedback>> residuals(4, std::vector<codec::ErrorFeedback>(1));
  std::vector<TensorMap> inputs;
  for (float v : {1.0f, 2.0f, 4.0f, 9.0f}) inputs.push_back({{"loss", Tensor({v}, {1})}});
  RingRun run;
  run_op(ring, 1, CompressionMethod::parse("none"), inputs, 0, residuals, run);
  check_same_bits(run);
  BOOST_TEST(run.outputs[0] == std::vector<float>{4.0f}, boost::test_tools::per_element());
  for (std::size_t n = 0; n < 4; ++n) BOOST_TEST(run.stats[n].messages_sent == 6u);
}

// Large ops still go round the ring: over gather_bytes a node would send
// (N - 1) x its values.
BOOST_AUTO_TEST_CASE(ops_over_the_bound_go_round_the_ring) {
  InprocRing ring(3);
  std::vector<std::vector<codec::ErrorFeedback>> residuals(3, std::vector<codec::ErrorFeedback>(1));
  // 2 x 25,000 floats = 200,000 bytes > 192 KiB: the ring (a summary, a
  // partial and a complete sum to each neighbour); 16,000: gathered (a
  // summary and one piece of values per origin).
  for (const std::size_t elements : {std::size_t{25000}, std::size_t{16000}}) {
    RingRun run;
    run_op(ring, 1, CompressionMethod::parse("none"), make_inputs(3, 0, {elements}), 0, residuals,
           run, 1 << 20);
    check_same_bits(run);
    for (std::size_t n = 0; n < 3; ++n)
      BOOST_TEST(run.stats[n].messages_sent == (elements == 16000 ? 4u : 6u), "at " << elements);
  }
}

BOOST_AUTO_TEST_SUITE_END()
