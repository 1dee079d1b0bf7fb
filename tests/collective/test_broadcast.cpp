// The broadcast plan over the in-process ring: every rank gets the root's
// values bit for bit (NaN payloads, -0.0, denormals, infinities), for every
// root of rings of 1 to 4 nodes with 1 and 2 local ranks; and the op fails
// the same way on every node when the manifests or the root are wrong.
#include <boost/test/unit_test.hpp>
#include <cstring>
#include <limits>

#include "ring_run.hpp"

using namespace zring;
using namespace zring::collective;
using namespace zring::collective::ring_test;

namespace {

float from_bits(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Rank r's tensors: ordinary values and every bit pattern a float can be
// that arithmetic would not keep (NaN payloads of both signs, -0.0,
// denormals, infinities), different on every rank.
std::vector<TensorMap> odd_inputs(std::size_t world, std::size_t size) {
  std::vector<TensorMap> inputs = make_inputs(world, 7, {size, 3});
  for (std::size_t r = 0; r < world; ++r) {
    std::vector<float>& v = inputs[r].begin()->second.data();
    const auto tag = static_cast<std::uint32_t>(r);
    const float specials[] = {from_bits(0x7fc00000u | (0x1234u + tag)),  // quiet NaN, payload
                              from_bits(0xff800001u + tag),              // signalling -NaN
                              -0.0f,
                              std::numeric_limits<float>::denorm_min() * static_cast<float>(r + 1),
                              -std::numeric_limits<float>::infinity(),
                              from_bits(0x7f800000u + 0x3fffffu - tag)};
    for (std::size_t i = 0; i < std::size(specials) && i < v.size(); ++i)
      v[(i * 37 + r) % v.size()] = specials[i];
  }
  return inputs;
}

// Sets every node's manifest to a broadcast from `root`.
std::function<void(std::size_t, OpInput&)> broadcast_from(std::size_t root) {
  return [root](std::size_t, OpInput& in) {
    in.manifest.kind = OpKind::broadcast;
    in.manifest.root = static_cast<std::uint32_t>(root);
  };
}

void check_bits_of_root(const RingRun& run, const TensorMap& root_input) {
  const std::vector<float> want = fuse(root_input);
  for (std::size_t n = 0; n < run.outputs.size(); ++n) {
    BOOST_TEST_INFO("node " << n << ": " << run.errors[n]);
    BOOST_REQUIRE(run.errors[n].empty());
    BOOST_REQUIRE_EQUAL(run.outputs[n].size(), want.size());
    if (want.empty()) continue;  // memcmp may not be handed the null data() of an empty vector
    BOOST_TEST(std::memcmp(run.outputs[n].data(), want.data(), want.size() * sizeof(float)) == 0,
               "node " << n << " got other bits than the root's");
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(broadcast)

BOOST_AUTO_TEST_CASE(every_rank_gets_the_roots_bits_for_every_root) {
  for (std::size_t nodes : {1, 2, 3, 4}) {
    for (std::size_t local : {1, 2}) {
      const std::size_t world = nodes * local;
      InprocRing ring(nodes);
      std::vector<std::vector<codec::ErrorFeedback>> residuals(
          nodes, std::vector<codec::ErrorFeedback>(local));
      const auto inputs = odd_inputs(world, 1000);
      for (std::size_t root = 0; root < world; ++root) {
        // 64-byte chunks: 63 of them, so the chain is many messages deep.
        for (std::size_t chunk_bytes : {std::size_t{64}, std::size_t{1} << 20}) {
          BOOST_TEST_CONTEXT(nodes << " nodes x " << local << ", root " << root << ", chunks of "
                                   << chunk_bytes << " bytes") {
            RingRun run;
            // The method is the objects' own: a broadcast compresses nothing.
            run_op(ring, local, CompressionMethod::parse("ef:quant:4"), inputs, root, residuals,
                   run, chunk_bytes, broadcast_from(root));
            check_bits_of_root(run, inputs[root]);
            if (nodes > 1 && chunk_bytes == 64) {
              // The root's node sends the values once, chunk by chunk.
              const std::size_t root_node = root / local;
              BOOST_TEST(run.stats[root_node].messages_sent >= 63u);
              BOOST_TEST(run.stats[root_node].dropped == 0u);
            }
          }
        }
      }
      for (const auto& node : residuals)
        for (const auto& r : node) BOOST_TEST(r.size() == 0u, "a broadcast left a residual");
    }
  }
}

BOOST_AUTO_TEST_CASE(an_empty_op_and_a_large_one) {
  InprocRing ring(3);
  std::vector<std::vector<codec::ErrorFeedback>> residuals(3, std::vector<codec::ErrorFeedback>(1));
  RingRun run;
  const std::vector<TensorMap> empty(3, TensorMap{{"e", Tensor(std::vector<float>{}, {0, 4})}});
  run_op(ring, 1, CompressionMethod::none(), empty, 0, residuals, run, 4096, broadcast_from(2));
  check_bits_of_root(run, empty[2]);
  const auto large = odd_inputs(3, 3'000'001);  // past the 16 MiB window of 1 MiB chunks
  run_op(ring, 1, CompressionMethod::none(), large, 1, residuals, run, std::size_t{1} << 20,
         broadcast_from(1));
  check_bits_of_root(run, large[1]);
}

BOOST_AUTO_TEST_CASE(duplicated_messages_are_dropped_not_written) {
  InprocRing ring(4);
  ring.set_filter([](std::size_t, const Message& m) { return std::vector<Message>{m, m}; });
  std::vector<std::vector<codec::ErrorFeedback>> residuals(4, std::vector<codec::ErrorFeedback>(1));
  const auto inputs = odd_inputs(4, 500);
  RingRun run;
  run_op(ring, 1, CompressionMethod::none(), inputs, 0, residuals, run, 64, broadcast_from(3));
  check_bits_of_root(run, inputs[3]);
  BOOST_TEST(run.stats[0].dropped > 0u);
  BOOST_TEST(run.stats[0].last_drop.find("broadcast") != std::string::npos, run.stats[0].last_drop);
}

BOOST_AUTO_TEST_CASE(stray_chunks_of_the_wrong_place_or_size_are_dropped) {
  InprocRing ring(3);
  // Node 2 (two hops after the root, node 0) gets, besides the real chunks,
  // one of the wrong size and ones of another segment and hop.
  ring.set_filter([](std::size_t from, const Message& m) {
    std::vector<Message> out{m};
    if (from == 1 && m.tag.phase == Phase::broadcast && m.tag.chunk == 0) {
      out.insert(out.begin(), Message{m.tag, Bytes::copy_of("xyz", 3)});
      out.push_back(Message{ChunkTag{Phase::broadcast, 1, 0, 2}, m.payload});
      out.push_back(Message{ChunkTag{Phase::broadcast, 0, 0, 1}, m.payload});
      out.push_back(Message{ChunkTag{Phase::broadcast, 0, 99, 2}, m.payload});
    }
    return out;
  });
  std::vector<std::vector<codec::ErrorFeedback>> residuals(3, std::vector<codec::ErrorFeedback>(1));
  const auto inputs = odd_inputs(3, 100);
  RingRun run;
  run_op(ring, 1, CompressionMethod::none(), inputs, 0, residuals, run, 64, broadcast_from(0));
  check_bits_of_root(run, inputs[0]);
  BOOST_TEST(run.stats[2].dropped == 4u);
}

BOOST_AUTO_TEST_CASE(a_root_beyond_the_ring_fails_on_every_node) {
  InprocRing ring(3);
  std::vector<std::vector<codec::ErrorFeedback>> residuals(3, std::vector<codec::ErrorFeedback>(2));
  const auto inputs = odd_inputs(6, 10);
  RingRun run;
  run_op(ring, 2, CompressionMethod::none(), inputs, 0, residuals, run, 4096, broadcast_from(6));
  for (std::size_t n = 0; n < 3; ++n) {
    BOOST_TEST((run.codes[n] == ErrorCode::invalid_argument), run.errors[n]);
    BOOST_TEST(run.errors[n] ==
               "op 0: broadcast from rank 6, but the ring of this op has 6 ranks (3 nodes x 2 "
               "local ranks): root must be below 6");
  }
  // The ring is still usable.
  run_op(ring, 2, CompressionMethod::none(), inputs, 1, residuals, run, 4096, broadcast_from(5));
  check_bits_of_root(run, inputs[5]);
}

BOOST_AUTO_TEST_CASE(ranks_that_disagree_get_a_manifest_mismatch) {
  InprocRing ring(3);
  std::vector<std::vector<codec::ErrorFeedback>> residuals(3, std::vector<codec::ErrorFeedback>(1));
  const auto inputs = odd_inputs(3, 10);
  RingRun run;
  // Node 2 names another root.
  run_op(ring, 1, CompressionMethod::none(), inputs, 0, residuals, run, 4096,
         [](std::size_t n, OpInput& in) {
           in.manifest.kind = OpKind::broadcast;
           in.manifest.root = n == 2 ? 1 : 0;
         });
  for (std::size_t n = 0; n < 3; ++n) {
    BOOST_TEST((run.codes[n] == ErrorCode::manifest_mismatch), run.errors[n]);
    BOOST_TEST(run.errors[n].find("a broadcast from rank 0 on rank 0 (node 0) but a broadcast "
                                  "from rank 1 on rank 2 (node 2)") != std::string::npos,
               run.errors[n]);
  }
  // Node 1 runs an all-reduce.
  run_op(ring, 1, CompressionMethod::none(), inputs, 1, residuals, run, 4096,
         [](std::size_t n, OpInput& in) {
           if (n != 1) in.manifest.kind = OpKind::broadcast;
         });
  for (std::size_t n = 0; n < 3; ++n)
    BOOST_TEST(run.errors[n].find("a broadcast from rank 0 on rank 0 (node 0) but an all-reduce "
                                  "on rank 1 (node 1)") != std::string::npos,
               run.errors[n]);
  // Node 0 has a tensor of another shape.
  auto other = inputs;
  other[0].begin()->second = Tensor(std::vector<float>(11, 1.0f));
  run_op(ring, 1, CompressionMethod::none(), other, 2, residuals, run, 4096, broadcast_from(0));
  for (std::size_t n = 0; n < 3; ++n)
    BOOST_TEST(run.errors[n].find("has shape [11] (11 elements) on rank 0") != std::string::npos,
               run.errors[n]);
}

BOOST_AUTO_TEST_CASE(a_silent_node_gives_a_timeout_naming_it) {
  InprocRing ring(3);
  ring.set_filter([](std::size_t from, const Message& m) {
    return from == 1 && m.tag.phase == Phase::broadcast ? std::vector<Message>{}
                                                        : std::vector<Message>{m};
  });
  std::vector<std::vector<codec::ErrorFeedback>> residuals(3, std::vector<codec::ErrorFeedback>(1));
  const auto inputs = odd_inputs(3, 10);
  RingRun run;
  run_op(ring, 1, CompressionMethod::none(), inputs, 0, residuals, run, 4096, broadcast_from(0),
         std::chrono::milliseconds(300));
  BOOST_TEST(run.errors[1].empty(), run.errors[1]);  // it got the values, and kept them
  for (std::size_t n : {0, 2}) {
    BOOST_TEST((run.codes[n] == ErrorCode::timeout), run.errors[n]);
    BOOST_TEST(run.errors[n].find("timed out waiting for node " + std::to_string((n + 2) % 3)) !=
                   std::string::npos,
               run.errors[n]);
  }
}

BOOST_AUTO_TEST_SUITE_END()
