// An affine op's statistics in waves (stats_waves.hpp): the staging order
// that cuts them, and ops whose statistics travel a wave at a time giving
// the bits of statistics taken whole.
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "collective/allreduce_op.hpp"
#include "collective/inproc_link.hpp"
#include "fed_staging.hpp"
#include "support/reference.hpp"

using namespace zring;
using namespace zring::collective;
using ring_test::FedStaging;

namespace {

// Where each element lands in the order, piece by piece.
std::vector<std::size_t> positions_of(const StagingOrder& order) {
  std::vector<std::size_t> at(order.elements(), std::numeric_limits<std::size_t>::max());
  std::size_t position = 0;
  for (std::size_t k = 0; k < order.pieces(); ++k) {
    const StagingOrder::Piece p = order.piece(k);
    for (std::size_t e = p.begin; e < p.end; ++e) at[e] = position++;
  }
  return at;
}

// Tensors of these sizes, in blocks of `block` elements each from its start.
struct Blocks {
  std::vector<std::size_t> offsets{0};
  std::size_t block;
  Blocks(const std::vector<std::size_t>& sizes, std::size_t block_elems) : block(block_elems) {
    for (const std::size_t n : sizes) offsets.push_back(offsets.back() + n);
  }
  std::size_t start(std::size_t i) const {
    const auto t = std::upper_bound(offsets.begin(), offsets.end(), i) - 1;
    return *t + (i - *t) / block * block;
  }
};

enum class Feed { whole, fed, lazy };

struct WaveRun {
  std::vector<std::vector<float>> outputs;
  std::vector<std::string> errors;
  std::vector<ErrorCode> codes;
  std::vector<RingStats> stats;
  std::size_t stats_messages = 0;  // Phase::stats messages sent
};

const std::vector<std::size_t> kSizes{kWaveElems / 2 + 1001, 3, kWaveElems / 2 + 12293};

// One op of `method` on `nodes` x `local` ranks, in place; its values
// whole or staged (fed by a thread, or each one as the op waits for it);
// gather_bytes as RingOptions (0: round the ring; large: the gather).
// `filter` may change the messages on their way.
WaveRun run(const std::string& method, std::size_t nodes, std::size_t local, Feed feed,
            std::size_t gather_bytes = 0, InprocRing::Filter filter = {},
            std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  const CompressionMethod parsed = CompressionMethod::parse(method);
  Manifest manifest{parsed.to_string(), {}};
  for (std::size_t t = 0; t < kSizes.size(); ++t)
    manifest.tensors.push_back({"t" + std::to_string(t), {kSizes[t]}, kSizes[t]});
  const std::size_t elements = manifest.elements();
  InprocRing ring(nodes);
  std::atomic<std::size_t> stats_messages{0};
  ring.set_filter([&](std::size_t from, const Message& m) {
    if (m.tag.phase == Phase::stats) ++stats_messages;
    return filter ? filter(from, m) : std::vector<Message>{m};
  });
  std::vector<std::vector<float>> sources, buffers;
  for (std::size_t r = 0; r < nodes * local; ++r) {
    sources.push_back(testing::make_values(70 + r, elements));
    buffers.push_back(feed == Feed::whole ? sources.back()
                                          : std::vector<float>(elements, std::nanf("")));
  }
  std::vector<std::unique_ptr<FedStaging>> stagings;
  for (std::size_t n = 0; n < nodes && feed != Feed::whole; ++n) {
    stagings.push_back(std::make_unique<FedStaging>(sources[n * local], buffers[n * local].data(),
                                                    staging_order(manifest, parsed, nodes, n)));
    if (feed == Feed::lazy) stagings.back()->set_lazy();
  }
  WaveRun out;
  out.outputs.assign(nodes, {});
  out.errors.assign(nodes, "");
  out.codes.assign(nodes, ErrorCode::internal);
  out.stats.assign(nodes, {});
  std::vector<std::thread> threads;
  for (std::size_t n = 0; n < nodes; ++n) {
    threads.emplace_back([&, n] {
      OpContext ctx;
      ctx.world_size = nodes * local;
      ctx.local_ranks = local;
      ctx.op_number = 1;
      ctx.ring.chunk_bytes = 64 << 10;
      ctx.ring.timeout = timeout;
      ctx.ring.gather_bytes = gather_bytes;
      ctx.ring.direct_bytes = 0;
      OpInput in;
      in.method = parsed;
      in.manifest = manifest;
      for (std::size_t l = 0; l < local; ++l) in.ranks.push_back(buffers[n * local + l].data());
      in.output = buffers[n * local].data();
      if (feed != Feed::whole) in.staging = stagings[n].get();
      std::vector<codec::ErrorFeedback> residuals(local);
      try {
        Workspace work;
        OpOutput result = run_allreduce(ring.link(n), ctx, in, residuals, work);
        out.outputs[n].assign(result.values.get(), result.values.get() + result.elements);
        out.stats[n] = result.stats;
      } catch (const Error& e) {
        out.errors[n] = e.what();
        out.codes[n] = e.code();
      }
    });
  }
  std::vector<std::thread> feeders;
  for (std::size_t n = 0; n < stagings.size() && feed == Feed::fed; ++n)
    feeders.emplace_back([&, n] { stagings[n]->feed(50000); });
  for (auto& t : feeders) t.join();
  for (auto& t : threads) t.join();
  out.stats_messages = stats_messages;
  return out;
}

// Under TSan, where each of these ops takes seconds, the threads of one
// case: values fed by a thread while the helper takes the statistics and
// the ring thread works; the rest checks values, which the plain and ASan
// builds do.
#if defined(__SANITIZE_THREAD__)
const std::vector<std::size_t> kWaveNodes{3};
const std::vector<const char*> kWaveMethods{"quant:8"};
const std::vector<Feed> kFeeds{Feed::fed};
constexpr bool kTwoLocalRanks = false;
#else
const std::vector<std::size_t> kWaveNodes{2, 3, 4};
const std::vector<const char*> kWaveMethods{"quant:8", "sign"};
const std::vector<Feed> kFeeds{Feed::whole, Feed::fed, Feed::lazy};
constexpr bool kTwoLocalRanks = true;
#endif

}  // namespace

// The order in waves, brute force on small blocks: every element once,
// pieces cut on block starts, wave after wave, own segment first in each;
// position(s, upto) is exactly one past the last of those elements to be
// copied in, and wave_end(w) one past the last element of wave w.
BOOST_AUTO_TEST_CASE(staging_in_waves_takes_every_element_once_and_never_splits_a_block) {
  for (const auto& sizes : std::vector<std::vector<std::size_t>>{{1000}, {333, 0, 501, 7}, {64}})
    for (const std::size_t nodes : {2, 3, 4})
      for (const std::size_t node : {std::size_t{0}, nodes - 1}) {
        const Blocks blocks(sizes, 16);
        const std::size_t elements = blocks.offsets.back();
        const StagingOrder order(elements, nodes, node, 4,
                                 [&](std::size_t i) { return blocks.start(i); });
        BOOST_TEST_INFO(sizes.size() << " tensors, node " << node << " of " << nodes);
        BOOST_TEST(order.waves() == 4u);
        const std::vector<std::size_t> at = positions_of(order);
        std::vector<std::size_t> sorted = at;
        std::sort(sorted.begin(), sorted.end());
        for (std::size_t e = 0; e < elements; ++e) BOOST_TEST_REQUIRE(sorted[e] == e);
        std::size_t wave_last = 0;
        for (std::size_t k = 0; k < order.pieces(); ++k) {
          const StagingOrder::Piece p = order.piece(k);
          BOOST_TEST(p.wave == k / nodes);
          BOOST_TEST(p.segment == (node + nodes - k % nodes) % nodes);
          if (p.begin < p.end) {
            BOOST_TEST(blocks.start(p.begin) == p.begin, "piece " << k << " splits a block");
            wave_last = std::max(wave_last, at[p.end - 1] + 1);
          }
          if (k % nodes == nodes - 1) BOOST_TEST(order.wave_end(p.wave) == wave_last);
        }
        for (std::size_t s = 0; s < nodes; ++s)
          for (std::size_t upto = 1; upto <= order.end(s) - order.begin(s); ++upto) {
            std::size_t last = 0;
            for (std::size_t e = order.begin(s); e < order.begin(s) + upto; ++e)
              last = std::max(last, at[e] + 1);
            BOOST_TEST_REQUIRE(order.position(s, upto) == last,
                               "segment " << s << " upto " << upto);
          }
      }
}

BOOST_AUTO_TEST_CASE(only_a_large_affine_all_reduce_is_staged_in_waves) {
  const Manifest large{"quant:8", {{"a", {kWaveElems}, kWaveElems}}};
  const Manifest small{"quant:8", {{"a", {kWaveElems - 1}, kWaveElems - 1}}};
  const auto waves = [](const Manifest& m, const char* method, std::size_t nodes) {
    return staging_order(m, CompressionMethod::parse(method), nodes, 0).waves();
  };
  BOOST_TEST(waves(large, "quant:8", 2) == kStagingWaves);
  BOOST_TEST(waves(large, "sign", 4) == kStagingWaves);
  BOOST_TEST(waves(small, "quant:8", 2) == 1u);
  BOOST_TEST(waves(large, "quant:8", 1) == 1u);
  for (const char* other : {"ef:quant:8", "none", "fp16", "topk:1%"})
    BOOST_TEST(waves(large, other, 4) == 1u, other);
  Manifest broadcast = large;
  broadcast.kind = OpKind::broadcast;
  BOOST_TEST(waves(broadcast, "quant:8", 4) == 1u);
}

// The same bits as the gather, which takes every node's statistics whole
// (and sums the same integer codes): values whole, staged by a feeder, and
// staged only as the op waits for them (a block read before its wait
// would be NaN); two local ranks combine their statistics per wave.
BOOST_AUTO_TEST_CASE(statistics_in_waves_give_the_bits_of_statistics_taken_whole,
                     *boost::unit_test::label("staged")) {
  for (const char* method : kWaveMethods)
    for (const std::size_t nodes : kWaveNodes) {
      const WaveRun whole = run(method, nodes, 1, Feed::whole, std::numeric_limits<int>::max());
      BOOST_TEST_REQUIRE(whole.errors[0] == "");
      BOOST_TEST(whole.stats_messages == 0u);
      for (const Feed feed : kFeeds) {
        const WaveRun waves = run(method, nodes, 1, feed);
        BOOST_TEST_INFO(method << " on " << nodes << " nodes, feed " << static_cast<int>(feed));
        BOOST_TEST(waves.stats_messages == nodes * (nodes - 1) * (kStagingWaves - 1));
        for (std::size_t n = 0; n < nodes; ++n) {
          BOOST_TEST_REQUIRE(waves.errors[n] == "", "node " << n << ": " << waves.errors[n]);
          BOOST_TEST(waves.outputs[n] == whole.outputs[0], "node " << n);
        }
      }
      if (!kTwoLocalRanks) continue;
      const WaveRun two_whole = run(method, nodes, 2, Feed::whole, std::numeric_limits<int>::max());
      const WaveRun two = run(method, nodes, 2, Feed::whole);
      BOOST_TEST(two.stats_messages == nodes * (nodes - 1) * (kStagingWaves - 1));
      BOOST_TEST_REQUIRE(two.errors[0] == "");
      BOOST_TEST(two.outputs[0] == two_whole.outputs[0], method << ", two local ranks");
    }
}

// A wave of statistics of the wrong size fails the op on the node that
// receives it, naming the sender; one that comes twice is dropped.
BOOST_AUTO_TEST_CASE(a_wave_of_the_wrong_size_fails_the_op_and_a_repeated_one_is_dropped,
                     *boost::unit_test::label("staged")) {
  const auto short_from_1 = [](std::size_t from, const Message& m) {
    if (m.tag.phase != Phase::stats || from != 1) return std::vector<Message>{m};
    return std::vector<Message>{{m.tag, Bytes::copy_of(m.payload.data(), m.payload.size() - 4)}};
  };
  const WaveRun bad = run("quant:8", 3, 1, Feed::fed, 0, short_from_1, std::chrono::seconds(2));
  for (const std::size_t n : {0, 2}) {
    BOOST_TEST(bad.codes[n] == ErrorCode::malformed_message, "node " << n << ": " << bad.errors[n]);
    BOOST_TEST(bad.errors[n].rfind("node 1 sent ", 0) == 0u, bad.errors[n]);
    BOOST_TEST(
        bad.errors[n].find(" bytes of block statistics for wave 1 where ") != std::string::npos,
        bad.errors[n]);
  }
  const auto twice = [](std::size_t, const Message& m) {
    return m.tag.phase == Phase::stats ? std::vector<Message>{m, m} : std::vector<Message>{m};
  };
  const WaveRun again = run("quant:8", 3, 1, Feed::fed, 0, twice);
  const WaveRun whole = run("quant:8", 3, 1, Feed::whole, std::numeric_limits<int>::max());
  for (std::size_t n = 0; n < 3; ++n) {
    BOOST_TEST_REQUIRE(again.errors[n] == "", "node " << n);
    BOOST_TEST(again.outputs[n] == whole.outputs[0]);
    BOOST_TEST(again.stats[n].dropped == 2 * (kStagingWaves - 1), "node " << n);
    BOOST_TEST(
        again.stats[n].last_drop.rfind("unexpected or duplicate statistics (origin ", 0) == 0u,
        again.stats[n].last_drop);
  }
}
