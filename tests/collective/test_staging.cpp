// The ring with staged input: values that arrive while the op runs, and
// averages published segment by segment as they become final.
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "collective/allreduce_op.hpp"
#include "collective/float_sum.hpp"
#include "collective/inproc_link.hpp"
#include "collective/staging.hpp"
#include "fed_staging.hpp"

using namespace zring;
using namespace zring::collective;
using ring_test::FedStaging;

namespace {

std::vector<float> values_of(std::size_t n, std::size_t node) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<float>((i * 2654435761u + node * 40503u) % 1000) / 997.0f - 0.5f;
  return v;
}

// The two schedules of a dense op (ring_allreduce.hpp): RingOptions::direct_bytes.
const std::vector<std::size_t> kSchedules{0, std::size_t{1} << 30};
const char* schedule_name(std::size_t direct_bytes) { return direct_bytes ? "direct" : "ring"; }

// The ring sizes of the staged cases. Under TSan, where each op of these
// takes seconds, one node (the path without a ring) and four (both
// schedules, the most threads): the two- and three-node rings add value
// checks, which the plain and ASan builds run.
//
// The methods of the staged cases. Under TSan, one of each plan whose
// threads differ (none streams, quant waits for its statistics, topk for
// its whole input): fp16, quant:4, sign and randomk run those plans'
// threads again, and their values are checked by the plain and ASan builds.
#if defined(__SANITIZE_THREAD__)
const std::vector<std::size_t> kStagedNodes{1, 4};
const std::vector<std::string> kPublishingMethods{"none", "quant:8", "topk:1%"};
const std::vector<std::string> kWaitingMethods{"none", "quant:8", "topk:1%"};
const std::vector<std::string> kGivenStatsMethods{"quant:8"};
#else
const std::vector<std::size_t> kStagedNodes{1, 2, 3, 4};
const std::vector<std::string> kPublishingMethods{"none", "fp16", "quant:8", "topk:1%",
                                                  "randomk:1%"};
const std::vector<std::string> kWaitingMethods{"none", "quant:8", "quant:4",
                                               "sign", "topk:1%", "fp16"};
const std::vector<std::string> kGivenStatsMethods{"quant:8", "quant:4", "sign"};
#endif

// What a client hands over with a staged op (OpInput::given_stats).
enum class Given { nothing, stats, wider_stats };

// The block statistics of `values` as a client takes them; wider: every
// quantization block's range one wider at both ends.
std::vector<float> client_stats(const OpInput& in, const std::vector<float>& values, Given given,
                                std::size_t nodes) {
  std::vector<float> stats(client_block_stats(in.manifest, in.method, nodes));
  const auto codec = codec::make_codec(in.method.base());
  const auto& affine = dynamic_cast<const codec::AffineCodec&>(*codec);
  const std::size_t per_block = affine.stats_per_block();
  for (std::size_t b = 0, at = 0; b < values.size(); b += codec::kBlockElems, at += per_block) {
    affine.block_stats(values.data() + b, std::min(codec::kBlockElems, values.size() - b),
                       stats.data() + at);
    if (given == Given::wider_stats) {
      stats[at] -= 1.0f;
      stats[at + 1] += 1.0f;
    }
  }
  return stats;
}

// One op of `method` on every node; staged when `staged`. Returns the results.
// With `lazy`, no feeder: each value comes in when the ring waits for it.
// `given`: what each node's client hands over beside its values.
std::vector<std::vector<float>> run(const std::string& method, std::size_t nodes,
                                    std::size_t elements, bool staged,
                                    std::vector<std::unique_ptr<FedStaging>>* stagings, bool lazy,
                                    std::size_t direct_bytes, Given given = Given::nothing) {
  InprocRing ring(nodes);
  std::vector<std::vector<float>> sources, buffers(nodes, std::vector<float>(elements));
  for (std::size_t n = 0; n < nodes; ++n) sources.push_back(values_of(elements, n));
  if (stagings) stagings->clear();
  const CompressionMethod parsed = CompressionMethod::parse(method);
  const Manifest manifest{parsed.to_string(), {{"g", {elements}, elements}}};
  for (std::size_t n = 0; n < nodes && staged; ++n)
    stagings->push_back(std::make_unique<FedStaging>(sources[n], buffers[n].data(),
                                                     staging_order(manifest, parsed, nodes, n)));
  if (lazy)
    for (auto& staging : *stagings) staging->set_lazy();
  std::vector<std::string> errors(nodes);
  std::vector<std::thread> threads;
  for (std::size_t n = 0; n < nodes; ++n) {
    if (!staged) buffers[n] = sources[n];
    threads.emplace_back([&, n] {
      OpContext ctx;
      ctx.world_size = nodes;
      ctx.op_number = 1;
      ctx.ring.chunk_bytes = 4096;
      ctx.ring.direct_bytes = direct_bytes;
      OpInput in;
      in.method = CompressionMethod::parse(method);
      in.manifest.method = in.method.to_string();
      in.manifest.tensors.push_back({"g", {elements}, elements});
      in.ranks.push_back(buffers[n].data());
      in.output = buffers[n].data();  // in place, as zringd does with a shared buffer
      if (staged) in.staging = (*stagings)[n].get();
      if (given != Given::nothing) in.given_stats = client_stats(in, sources[n], given, nodes);
      std::vector<codec::ErrorFeedback> residuals(1);
      try {
        Workspace work;
        (void)run_allreduce(ring.link(n), ctx, in, residuals, work);
      } catch (const Error& e) {
        errors[n] = e.what();
      }
    });
  }
  std::vector<std::thread> feeders;
  for (std::size_t n = 0; n < nodes && staged && !lazy; ++n)
    feeders.emplace_back([&, n] { (*stagings)[n]->feed(3000); });
  for (auto& t : feeders) t.join();
  for (auto& t : threads) t.join();
  for (std::size_t n = 0; n < nodes; ++n)
    BOOST_TEST_REQUIRE(errors[n].empty(), "node " << n << ": " << errors[n]);
  return buffers;
}

}  // namespace

BOOST_AUTO_TEST_CASE(staging_order_counts_every_element_once_own_segment_first) {
  for (std::size_t elements : {0, 1, 7, 100, 4097}) {
    for (std::size_t nodes : {1, 2, 3, 5}) {
      for (std::size_t node = 0; node < nodes; ++node) {
        const StagingOrder order(elements, nodes, node);
        BOOST_TEST(order.segment_at(0) == node);
        std::size_t position = 0;
        std::vector<int> seen(nodes, 0);
        for (std::size_t k = 0; k < nodes; ++k) {
          const std::size_t s = order.segment_at(k);
          ++seen[s];
          BOOST_TEST(order.position(s, 0) == position, "segment " << s << " of " << nodes);
          position += order.end(s) - order.begin(s);
          BOOST_TEST(order.position(s, order.end(s) - order.begin(s)) == position);
        }
        BOOST_TEST(position == elements);
        BOOST_TEST(std::all_of(seen.begin(), seen.end(), [](int x) { return x == 1; }));
      }
    }
  }
}

// none streams its input range by range; the others wait for all of it,
// and publish as their ring (fp16, quant) or their average (topk) goes.
BOOST_AUTO_TEST_CASE(staged_ops_give_the_bits_of_whole_inputs_and_publish_only_final_values,
                     *boost::unit_test::label("staged")) {
  for (const std::string& method : kPublishingMethods)
    for (const std::size_t nodes : kStagedNodes)
      for (const std::size_t direct : kSchedules) {
        const std::size_t elements = 300007;  // past the sparse plan's publishing step
        const auto whole = run(method, nodes, elements, false, nullptr, false, direct);
        std::vector<std::unique_ptr<FedStaging>> stagings;
        const auto staged = run(method, nodes, elements, true, &stagings, false, direct);
        for (std::size_t n = 0; n < nodes; ++n) {
          BOOST_TEST_INFO(method << ", node " << n << " of " << nodes << ", "
                                 << schedule_name(direct));
          BOOST_TEST(std::memcmp(staged[n].data(), whole[0].data(), elements * sizeof(float)) == 0);
          const FedStaging& s = *stagings[n];
          BOOST_TEST(!s.backwards_);
          BOOST_TEST(s.max_needed_ == elements);
          for (std::size_t seg = 0; seg < nodes; ++seg) {
            const std::size_t length = s.order().end(seg) - s.order().begin(seg);
            // Published all, or (one node's ring, randomk) nothing: the answer
            // then says all is done.
            const bool none_published = nodes == 1 || method.rfind("randomk", 0) == 0;
            if (!none_published || s.published_[seg] != 0)
              BOOST_TEST(s.published_[seg] == length, "segment " << seg);
            // What was published was already final when it was published.
            if (!s.snapshots_[seg].empty())
              BOOST_TEST(std::memcmp(s.snapshots_[seg].data(),
                                     whole[0].data() + s.order().begin(seg),
                                     s.snapshots_[seg].size() * sizeof(float)) == 0);
          }
        }
      }
}

// Every value is read only after a wait for it: fed only on demand, the
// staged op still gives the bits of whole inputs. The plans of none, of
// fp16 (rounded as the ring adds it) and of the affine codes (quant, sign)
// read their input range by range as it comes, statistics included: their
// first wait is for less than all of it.
BOOST_AUTO_TEST_CASE(staged_values_are_read_only_once_waited_for_and_affine_stats_stream,
                     *boost::unit_test::label("staged")) {
  for (const std::string& method : kWaitingMethods)
    for (const std::size_t nodes : kStagedNodes)
      for (const std::size_t direct : kSchedules) {
        const std::size_t elements = 300007;
        const auto whole = run(method, nodes, elements, false, nullptr, false, direct);
        std::vector<std::unique_ptr<FedStaging>> stagings;
        const auto staged = run(method, nodes, elements, true, &stagings, true, direct);
        // (One node's none or fp16 returns its input once all of it is there.)
        const bool streams = ((method == "none" || method == "fp16") && nodes > 1) ||
                             method.rfind("quant", 0) == 0 || method == "sign";
        for (std::size_t n = 0; n < nodes; ++n) {
          BOOST_TEST_INFO(method << ", node " << n << " of " << nodes << ", "
                                 << schedule_name(direct));
          BOOST_TEST(std::memcmp(staged[n].data(), whole[0].data(), elements * sizeof(float)) == 0);
          BOOST_TEST(stagings[n]->max_needed_ == elements);
          if (streams)
            BOOST_TEST(stagings[n]->first_needed() < elements / nodes);
          else
            BOOST_TEST(stagings[n]->first_needed() == elements);
        }
      }
}

// Statistics the client took before staging (wire::Submit::block_stats)
// stand in for the plan's own pass: the same bits as whole inputs.
// Statistics that are not the values' make other grids (and bits): they
// are used, not taken again.
BOOST_AUTO_TEST_CASE(block_statistics_from_the_client_give_the_same_bits_without_a_pass,
                     *boost::unit_test::label("staged")) {
  for (const std::string& method : kGivenStatsMethods)
    for (const std::size_t nodes : kStagedNodes) {
      const std::size_t elements = 300007;
      const auto whole = run(method, nodes, elements, false, nullptr, false, 0);
      std::vector<std::unique_ptr<FedStaging>> stagings;
      const auto staged = run(method, nodes, elements, true, &stagings, true, 0, Given::stats);
      for (std::size_t n = 0; n < nodes; ++n) {
        BOOST_TEST_INFO(method << ", node " << n << " of " << nodes);
        BOOST_TEST(std::memcmp(staged[n].data(), whole[0].data(), elements * sizeof(float)) == 0);
        BOOST_TEST(stagings[n]->max_needed_ == elements);
      }
      if (method == "sign") continue;
      const auto wider = run(method, nodes, elements, true, &stagings, true, 0, Given::wider_stats);
      BOOST_TEST(std::memcmp(wider[0].data(), whole[0].data(), elements * sizeof(float)) != 0,
                 method << " on " << nodes << " nodes ignored the client's statistics");
    }
  BOOST_TEST(
      client_block_stats({"quant:8", {{"a", {5000}, 5000}, {"b", {0}, 0}, {"c", {4096}, 4096}}},
                         CompressionMethod::parse("quant:8"), 2) == 6u);
  BOOST_TEST(client_block_stats({"sign", {{"a", {5000}, 5000}}}, CompressionMethod::parse("sign"),
                                2) == 2u);
  for (const char* other : {"ef:quant:8", "none", "topk:1%", "fp16"})
    BOOST_TEST(client_block_stats({other, {{"a", {5000}, 5000}}}, CompressionMethod::parse(other),
                                  2) == 0u,
               other);
  // Staged in waves, zringd takes them itself (a wave at a time); on one node, the client.
  const Manifest large{"quant:8", {{"a", {kWaveElems}, kWaveElems}}};
  BOOST_TEST(client_block_stats(large, CompressionMethod::parse("quant:8"), 2) == 0u);
  BOOST_TEST(client_block_stats(large, CompressionMethod::parse("quant:8"), 1) ==
             2 * kWaveElems / codec::kBlockElems);
}

// The streamed copy of staged values: every bit, NaN payloads and -0.0
// included, at every alignment of source and destination and every length
// around a vector's width; nothing written outside the n values.
BOOST_AUTO_TEST_CASE(copy_streamed_copies_every_bit_at_any_alignment_and_writes_nothing_else) {
  std::vector<std::uint32_t> bits(300);
  for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = 0x7fc00001u + 977u * i;  // NaNs
  bits[3] = 0x80000000u;                                                           // -0.0
  bits[4] = 0x7f800001u;  // a signalling NaN
  for (std::size_t from = 0; from < 8; ++from)
    for (std::size_t to = 0; to < 8; ++to)
      for (const std::size_t n : {0, 1, 7, 8, 9, 15, 16, 17, 33, 255}) {
        alignas(32) float in[300];
        alignas(32) float out[300];
        std::memcpy(in, bits.data(), sizeof(in));
        std::memset(out, 0x5a, sizeof(out));
        zring::collective::copy_streamed(out + to, in + from, n);
        BOOST_TEST_CONTEXT("from " << from << " to " << to << " n " << n) {
          BOOST_TEST(std::memcmp(out + to, in + from, n * sizeof(float)) == 0);
          std::uint32_t word;
          for (std::size_t i = 0; i < 300; ++i) {
            if (i >= to && i < to + n) continue;
            std::memcpy(&word, out + i, 4);
            BOOST_TEST_REQUIRE(word == 0x5a5a5a5au, "out[" << i << "] written");
          }
        }
      }
}
