// The summary exchange that begins every op (ring_allgather.hpp): each node
// sends its summary, and the data behind it, straight to every other node
// (hop 0), except top-k frames of more than the window, which go round the
// ring with their summary; and a node still waiting for a summary keeps the
// next phase's messages its predecessor already sends.
#include <boost/test/unit_test.hpp>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>

#include "collective/geometry.hpp"
#include "ring_run.hpp"
#include "support/time_scale.hpp"

using namespace zring;
using namespace zring::collective;
using namespace zring::collective::ring_test;

namespace {

// Every message a node sent, as the ring's filter saw it.
struct SentMessage {
  std::size_t from;
  ChunkTag tag;
};

std::vector<SentMessage> exchange_messages(const std::vector<SentMessage>& all) {
  std::vector<SentMessage> out;
  for (const SentMessage& s : all)
    if (s.tag.phase == Phase::manifest || s.tag.phase == Phase::blobs) out.push_back(s);
  return out;
}

// One op of `method` on 4 nodes, recording what each node sent.
std::vector<SentMessage> run_recorded(const char* method, std::size_t elements,
                                      std::size_t chunk_bytes, RingRun& run) {
  InprocRing ring(4);
  std::vector<SentMessage> sent;  // the filter runs under the ring's lock
  ring.set_filter([&](std::size_t from, const Message& m) {
    sent.push_back({from, m.tag});
    return std::vector<Message>{m};
  });
  std::vector<std::vector<codec::ErrorFeedback>> residuals(4, std::vector<codec::ErrorFeedback>(1));
  run_op(ring, 1, CompressionMethod::parse(method), make_inputs(4, 0, {elements}), 0, residuals,
         run, chunk_bytes, nullptr, std::chrono::seconds(20), 0);
  check_same_bits(run);
  return sent;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(summary_exchange)

BOOST_AUTO_TEST_CASE(each_node_sends_its_summary_straight_to_every_other) {
  for (const char* method : {"none", "quant:8", "randomk:10%", "topk:10%"}) {
    BOOST_TEST_CONTEXT(method) {
      RingRun run;
      const std::vector<SentMessage> sent =
          exchange_messages(run_recorded(method, 5000, 4096, run));
      std::map<std::size_t, std::size_t> summaries;  // per node
      for (const SentMessage& s : sent) {
        BOOST_TEST(s.tag.hop == 0u, "node " << s.from << " passed on a message of node "
                                            << s.tag.segment << " (hop " << s.tag.hop << ")");
        BOOST_TEST(s.tag.segment == s.from);
        if (s.tag.phase == Phase::manifest) ++summaries[s.from];
      }
      for (std::size_t n = 0; n < 4; ++n) BOOST_TEST(summaries[n] == 3u, "node " << n);
    }
  }
}

// 40 frames of 4096 values each: more than the window of 32, so the frames
// and the summary in front of them go round the ring, every node passing
// the others' on, hop by hop, as far as the node before their origin.
BOOST_AUTO_TEST_CASE(top_k_frames_beyond_the_window_go_round_the_ring_with_their_summary) {
  RingRun run;
  const std::vector<SentMessage> sent =
      exchange_messages(run_recorded("topk:10%", 40 * 4096, 4096, run));
  std::map<std::pair<std::size_t, std::uint32_t>, std::size_t> summaries;  // (node, hop)
  std::size_t frames = 0;
  for (const SentMessage& s : sent) {
    BOOST_TEST(s.tag.hop >= 1u);
    BOOST_TEST(s.tag.hop <= 3u);
    BOOST_TEST(s.tag.segment == (s.from + 4 - (s.tag.hop - 1)) % 4, "from " << s.from);
    if (s.tag.phase == Phase::manifest)
      ++summaries[{s.from, s.tag.hop}];
    else
      ++frames;
  }
  for (std::size_t n = 0; n < 4; ++n)
    for (std::uint32_t hop = 1; hop <= 3; ++hop)
      BOOST_TEST(summaries[std::make_pair(n, hop)] == 1u, "node " << n << " hop " << hop);
  BOOST_TEST(frames == 4u * 40u * 3u);
}

// Node 3's summary reaches node 1 only after node 0's first data message
// for node 1 (node 0 sends it right behind its own summary, and in the
// test it is held until node 3's summary is made): node 1 must take node
// 0's data message once its own exchange is over, not drop it. On the ring
// that is node 0's partial sum for its successor; in the direct schedule
// node 0's values of segment 2, which node 1 owns.
BOOST_AUTO_TEST_CASE(the_next_phase_from_the_predecessor_waits_for_the_last_summary) {
  for (const bool direct : {false, true}) {
    BOOST_TEST_INFO((direct ? "direct" : "ring"));
    InprocRing ring(4);
    std::mutex mutex;
    std::optional<Message> held;     // node 3's summary, for node 1
    std::optional<Message> pending;  // node 0's first data message for node 1
    bool released = false;
    const auto copy = [](const Message& m) {
      return Message{m.tag, Bytes::copy_of(m.payload.data(), m.payload.size())};
    };
    ring.set_filter([&](std::size_t from, const Message& m) -> std::vector<Message> {
      std::lock_guard lock(mutex);
      if (from == 3 && m.tag.phase == Phase::manifest) {
        // The same message goes to nodes 0, 1 and 2: deliver it to 0 and 2 now.
        if (!held) {
          held = copy(m);
          for (const std::size_t to : {0u, 2u}) ring.inject(to, copy(m));
          if (pending) {  // to node 1, in this order
            ring.inject(1, *pending);
            ring.inject(1, *held);
            released = true;
          }
        }
        return {};
      }
      const bool for_node_1 = direct ? m.tag.phase == Phase::to_owner && m.tag.segment == 2
                                     : m.tag.phase == Phase::reduce;
      if (from == 0 && for_node_1 && !released && !pending) {
        if (!held) {
          pending = copy(m);
          return {};
        }
        released = true;
        return {m, *held};  // to node 1, in this order
      }
      return {m};
    });
    std::vector<std::vector<codec::ErrorFeedback>> residuals(4,
                                                             std::vector<codec::ErrorFeedback>(1));
    const auto inputs = make_inputs(4, 0, {1000});
    RingRun run;
    run_op(ring, 1, CompressionMethod::none(), inputs, 0, residuals, run, 4096, nullptr,
           std::chrono::seconds(20), 0, direct ? std::size_t{1} << 30 : 0);
    BOOST_TEST(released);
    check_same_bits(run);
    std::vector<std::map<std::string, std::vector<float>>> no_residuals(4);
    const testing::Comparison cmp = testing::compare(
        unfuse(run.outputs[1], inputs[0]),
        testing::expected_average(CompressionMethod::none(), inputs, &no_residuals));
    BOOST_TEST(cmp.ok(), cmp.bad << " bad; first: " << cmp.first_bad);
  }
}

// Round the ring, a node's first chunks of its own segment (hop 1) go right
// behind its summary, before it knows the others': for fp16 and bf16 too,
// and for float32 sums of two local ranks. With node 3's summary lost,
// nodes 0-2 never learn every summary, yet each has sent hop 1 of every
// chunk of its own segment (once) and no other message of the reduce, and
// times out waiting for node 3.
BOOST_AUTO_TEST_CASE(own_chunks_go_right_behind_the_summary_for_every_dense_method) {
  const std::size_t nodes = 4, elements = 20000, chunk_bytes = 4096;
  struct Case {
    const char* method;
    std::size_t local_ranks;
    std::size_t bytes_per_value;
  };
  for (const Case& c : {Case{"fp16", 1, 2}, Case{"bf16", 1, 2}, Case{"none", 2, 4}}) {
    BOOST_TEST_CONTEXT(c.method << ", " << c.local_ranks << " local ranks") {
      InprocRing ring(nodes);
      std::mutex mutex;
      std::vector<SentMessage> sent;
      ring.set_filter([&](std::size_t from, const Message& m) {
        {
          std::lock_guard lock(mutex);
          sent.push_back({from, m.tag});
        }
        return from == 3 && m.tag.phase == Phase::manifest ? std::vector<Message>{}
                                                           : std::vector<Message>{m};
      });
      std::vector<std::vector<codec::ErrorFeedback>> residuals(
          nodes, std::vector<codec::ErrorFeedback>(c.local_ranks));
      RingRun run;
      // direct_bytes 0: float32 sums go round the ring too.
      run_op(ring, c.local_ranks, CompressionMethod::parse(c.method),
             make_inputs(nodes * c.local_ranks, 0, {elements}), 0, residuals, run, chunk_bytes,
             nullptr, zring::testing::scaled(std::chrono::milliseconds(500)), 0, 0);
      const ChunkGeometry geometry(elements, nodes, chunk_bytes / c.bytes_per_value);
      for (const std::size_t n : {0u, 1u, 2u}) {
        std::size_t own_hop1 = 0, other = 0;
        for (const SentMessage& s : sent) {
          if (s.from != n || s.tag.phase == Phase::manifest || s.tag.phase == Phase::blobs)
            continue;
          const bool own = s.tag.phase == Phase::reduce && s.tag.hop == 1 && s.tag.segment == n;
          (own ? own_hop1 : other) += 1;
        }
        BOOST_TEST_INFO("node " << n);
        BOOST_TEST(own_hop1 == geometry.chunks(n));
        BOOST_TEST(other == 0u);
        BOOST_TEST(run.codes[n] == ErrorCode::timeout);
        BOOST_TEST(run.errors[n].find("timed out waiting for node 3") != std::string::npos,
                   run.errors[n]);
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
