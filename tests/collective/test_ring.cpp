// The ring schedules over the in-process transport: every method, a matrix
// of ring sizes, local ranks and lengths, checked against the reference.
#define BOOST_TEST_MODULE collective
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <cstring>
#include <future>
#include <thread>

#include "collective/geometry.hpp"
#include "ring_run.hpp"

using namespace zring;
using namespace zring::collective;
using namespace zring::collective::ring_test;
namespace bdata = boost::unit_test::data;

BOOST_AUTO_TEST_CASE(geometry_covers_every_element_once) {
  for (std::size_t elements : {0, 1, 7, 100, 4097}) {
    for (std::size_t segments : {1, 2, 3, 5}) {
      ChunkGeometry g(elements, segments, 16);
      std::vector<int> seen(elements, 0);
      std::size_t ids = 0;
      for (std::size_t s = 0; s < segments; ++s)
        for (std::size_t c = 0; c < g.chunks(s); ++c) {
          BOOST_TEST(g.chunk_id(s, c) == ids++);
          auto [b, e] = g.range(s, c);
          BOOST_TEST(e - b <= 16u);
          BOOST_TEST(e > b);
          for (std::size_t i = b; i < e; ++i) ++seen[i];
        }
      BOOST_TEST(ids == g.total_chunks());
      BOOST_TEST(std::all_of(seen.begin(), seen.end(), [](int x) { return x == 1; }));
    }
  }
}

namespace {

// Three ops in a row of `method` on `nodes` x `local` ranks, each checked
// against the reference: error feedback must carry residuals from op to op.
void three_ops_match_the_reference(const std::string& method_text, std::size_t nodes,
                                   std::size_t local, const std::vector<std::size_t>& sizes,
                                   std::size_t chunk_bytes) {
  const CompressionMethod method = CompressionMethod::parse(method_text);
  const std::size_t world = nodes * local;
  InprocRing ring(nodes);
  std::vector<std::vector<codec::ErrorFeedback>> residuals(
      nodes, std::vector<codec::ErrorFeedback>(local));
  std::vector<std::map<std::string, std::vector<float>>> ref_residuals(world);
  for (std::uint64_t op = 0; op < 3; ++op) {
    RingRun run;
    const auto inputs = make_inputs(world, op, sizes);
    run_op(ring, local, method, inputs, op, residuals, run, chunk_bytes);
    check_same_bits(run);
    const TensorMap result = unfuse(run.outputs[0], inputs[0]);
    if (method.kind() == CompressionKind::randomk) {
      if (!method.has_error_feedback() || op == 0) {
        const std::string problem = testing::check_randomk(method, result, inputs);
        BOOST_TEST(problem.empty(), problem);
      }
      continue;
    }
    const testing::Expected expected = testing::expected_average(method, inputs, &ref_residuals);
    const testing::Comparison cmp = testing::compare(result, expected);
    BOOST_TEST(cmp.ok(), method_text << " on " << nodes << "x" << local << ", op " << op << ": "
                                     << cmp.bad << " bad, " << cmp.at_boundary
                                     << " at a boundary of " << cmp.elements
                                     << "; first: " << cmp.first_bad);
  }
}

}  // namespace

BOOST_DATA_TEST_CASE(every_method_matches_the_reference,
                     bdata::make(kMethods) * bdata::make({1, 2, 3, 5}) * bdata::make({1, 2}),
                     method_text, nodes, local) {
  three_ops_match_the_reference(method_text, nodes, local, {1, 7, 1000, 5000, 0, 9000}, 4096);
}

// An op of one tensor with error feedback makes the corrected input in the
// residual's own buffer and (quant, sign) writes the next residual over it
// as it goes: the same averages and residuals as the reference, op after
// op, on the small and the large-op paths.
BOOST_TEST_DECORATOR(*boost::unit_test::label("large"))
BOOST_DATA_TEST_CASE(error_feedback_of_one_tensor_carries_the_residual_in_place,
                     bdata::make({"ef:topk:5%", "ef:sign", "ef:quant:4", "ef:fp16",
                                  "ef:randomk:10%"}) *
                         bdata::make({1, 3}) * bdata::make({1, 2}) * bdata::make({9000, 300000}),
                     method_text, nodes, local, elements) {
  three_ops_match_the_reference(method_text, nodes, local, {static_cast<std::size_t>(elements)},
                                1 << 16);
}

// Ops of 2^20 values or more take the large-op paths: compression on the
// helper thread while the ring thread forwards, top-k payloads in pieces,
// results written with streaming stores (dense ring, sparse average, affine
// averages). Two tensors, one of them large, so the paths meet tensor
// boundaries; the same bits everywhere and the reference average.
// Under TSan (which runs this case for its threads: compression on the
// helper thread while the ring thread forwards) a dense, an affine, a
// sparse and an error-feedback method, and no reference: the test's own
// reference takes TSan most of the case's minutes, and the values are
// checked by the plain and ASan builds.
#if defined(__SANITIZE_THREAD__)
const std::vector<const char*> kLargeMethods{"none", "quant:4", "ef:sign", "topk:1%"};
constexpr bool kLargeReference = false;
#else
const std::vector<const char*> kLargeMethods{"none",    "fp16",    "quant:4",
                                             "ef:sign", "topk:1%", "ef:threshold:2.5"};
constexpr bool kLargeReference = true;
#endif

BOOST_AUTO_TEST_CASE(large_ops_match_the_reference, *boost::unit_test::label("large")) {
  const std::vector<std::size_t> sizes = {1100003, 4099};
  for (const char* text : kLargeMethods) {
    const CompressionMethod method = CompressionMethod::parse(text);
    InprocRing ring(3);
    std::vector<std::vector<codec::ErrorFeedback>> residuals(3,
                                                             std::vector<codec::ErrorFeedback>(1));
    std::vector<std::map<std::string, std::vector<float>>> ref_residuals(3);
    for (std::uint64_t op = 0; op < 2; ++op) {
      RingRun run;
      const auto inputs = make_inputs(3, op, sizes);
      run_op(ring, 1, method, inputs, op, residuals, run);
      check_same_bits(run);
      if (!kLargeReference) continue;
      const testing::Comparison cmp =
          testing::compare(unfuse(run.outputs[0], inputs[0]),
                           testing::expected_average(method, inputs, &ref_residuals));
      BOOST_TEST(cmp.ok(),
                 text << " op " << op << ": " << cmp.bad << " bad; first: " << cmp.first_bad);
    }
  }
}

// A failed op leaves every residual as it was: a node that cannot take
// part (op 1), and a ring that breaks after the summaries were exchanged
// (op 2: no message of the data phases arrives). Op 3 then gets
// what it would have got had ops 1 and 2 never run.
BOOST_AUTO_TEST_CASE(failed_ops_leave_the_residuals_as_they_were) {
  for (const char* text : {"ef:topk:5%", "ef:quant:4", "ef:sign"}) {
    const CompressionMethod method = CompressionMethod::parse(text);
    const std::vector<std::size_t> sizes = {1000, 5000};
    InprocRing ring(3);
    std::vector<std::vector<codec::ErrorFeedback>> residuals(3,
                                                             std::vector<codec::ErrorFeedback>(1));
    std::vector<std::map<std::string, std::vector<float>>> ref_residuals(3);
    RingRun run;
    const auto first = make_inputs(3, 0, sizes);
    run_op(ring, 1, method, first, 0, residuals, run);
    check_same_bits(run);
    (void)testing::expected_average(method, first, &ref_residuals);

    run_op(ring, 1, method, make_inputs(3, 1, sizes), 1, residuals, run, 4096,
           [](std::size_t n, OpInput& in) {
             if (n == 1) {
               in.ranks.clear();
               in.failure = Status{ErrorCode::timeout, "local rank 0 was late"};
             }
           });
    for (std::size_t n = 0; n < 3; ++n) {
      BOOST_TEST((run.codes[n] == ErrorCode::timeout), text << " op 1 node " << n);
      BOOST_TEST(run.errors[n].find("local rank 0 was late") != std::string::npos,
                 text << " op 1 node " << n << ": " << run.errors[n]);
    }

    InprocRing broken(3);
    broken.set_filter([](std::size_t, const Message& m) {
      return m.tag.phase != Phase::manifest ? std::vector<Message>{} : std::vector<Message>{m};
    });
    run_op(broken, 1, method, make_inputs(3, 2, sizes), 2, residuals, run, 4096, nullptr,
           std::chrono::milliseconds(500));
    for (std::size_t n = 0; n < 3; ++n) {
      BOOST_TEST((run.codes[n] == ErrorCode::timeout), text << " op 2 node " << n);
      BOOST_TEST(run.errors[n].find("timed out waiting for node") != std::string::npos,
                 text << " op 2 node " << n << ": " << run.errors[n]);
    }

    const auto third = make_inputs(3, 3, sizes);
    run_op(ring, 1, method, third, 3, residuals, run);
    check_same_bits(run);
    const testing::Expected expected = testing::expected_average(method, third, &ref_residuals);
    const testing::Comparison cmp = testing::compare(unfuse(run.outputs[0], third[0]), expected);
    BOOST_TEST(cmp.ok(), text << ": " << cmp.bad << " bad; first: " << cmp.first_bad);
  }
}

BOOST_AUTO_TEST_CASE(large_buffer_is_cut_into_many_chunks) {
  const CompressionMethod method = CompressionMethod::parse("quant:8");
  InprocRing ring(4);
  std::vector<std::vector<codec::ErrorFeedback>> residuals(4, std::vector<codec::ErrorFeedback>(1));
  const auto inputs = make_inputs(4, 0, {1000003});
  RingRun run;
  run_op(ring, 1, method, inputs, 0, residuals, run, 64 * 1024);
  check_same_bits(run);
  BOOST_TEST(run.stats[0].messages_sent > 20u);
  // Each node sends a quarter of the 1000003 codes on each of 6 hops: the
  // partial sums of 1, 2 and 3 nodes in 8, 9 and 10 bits, the complete
  // sums (of 4) 3 times in 10 bits; plus the summary.
  const double ring_bytes = 1000003 / 4.0 * (8 + 9 + 10 + 3 * 10) / 8;
  BOOST_TEST(run.stats[0].bytes_sent > ring_bytes * 0.95);
  BOOST_TEST(run.stats[0].bytes_sent < ring_bytes * 1.05 + 200000);
  const auto expected = testing::expected_average(method, inputs, nullptr);
  const auto cmp = testing::compare(unfuse(run.outputs[0], inputs[0]), expected);
  BOOST_TEST(cmp.ok(), cmp.first_bad);
}

BOOST_AUTO_TEST_CASE(duplicated_messages_are_dropped_not_summed) {
  InprocRing ring(3);
  ring.set_filter([](std::size_t, const Message& m) { return std::vector<Message>{m, m}; });
  std::vector<std::vector<codec::ErrorFeedback>> residuals(3, std::vector<codec::ErrorFeedback>(1));
  const auto inputs = make_inputs(3, 0, {777, 5});
  for (const char* text : {"none", "quant:8", "topk:10%"}) {
    RingRun run;
    const auto method = CompressionMethod::parse(text);
    run_op(ring, 1, method, inputs, 0, residuals, run);
    check_same_bits(run);
    const auto cmp = testing::compare(unfuse(run.outputs[0], inputs[0]),
                                      testing::expected_average(method, inputs, nullptr));
    BOOST_TEST(cmp.ok(), text << ": " << cmp.first_bad);
  }
}

BOOST_AUTO_TEST_CASE(stray_messages_of_wrong_size_or_place_are_dropped) {
  InprocRing ring(2);
  // Before the op: garbage for node 1 in every phase.
  for (Phase phase :
       {Phase::manifest, Phase::reduce, Phase::gather, Phase::blobs, Phase::broadcast})
    ring.inject(1, Message{ChunkTag{phase, 7, 3, 1}, Bytes::copy_of("xyz", 3)});
  std::vector<std::vector<codec::ErrorFeedback>> residuals(2, std::vector<codec::ErrorFeedback>(1));
  const auto inputs = make_inputs(2, 0, {100});
  RingRun run;
  run_op(ring, 1, CompressionMethod::none(), inputs, 0, residuals, run);
  check_same_bits(run);
  BOOST_TEST(run.stats[1].dropped >= 1u);
}

BOOST_AUTO_TEST_CASE(manifest_mismatch_fails_every_node_with_the_tensor_and_ranks) {
  InprocRing ring(3);
  std::vector<std::vector<codec::ErrorFeedback>> residuals(3, std::vector<codec::ErrorFeedback>(2));
  const auto inputs = make_inputs(6, 0, {10, 20});
  RingRun run;
  run_op(ring, 2, CompressionMethod::none(), inputs, 0, residuals, run, 4096,
         [](std::size_t node, OpInput& in) {
           if (node == 2) in.manifest.tensors[1].numel = 19, in.manifest.tensors[1].shape = {19};
         });
  for (std::size_t n = 0; n < 3; ++n) {
    BOOST_TEST(run.codes[n] == ErrorCode::manifest_mismatch);
    BOOST_TEST(run.errors[n].find("'t001'") != std::string::npos, run.errors[n]);
    BOOST_TEST(run.errors[n].find("ranks 4-5") != std::string::npos, run.errors[n]);
    BOOST_TEST(run.errors[n].find("ranks 0-1") != std::string::npos, run.errors[n]);
  }
}

BOOST_AUTO_TEST_CASE(method_mismatch_is_named) {
  InprocRing ring(2);
  std::vector<std::vector<codec::ErrorFeedback>> residuals(2, std::vector<codec::ErrorFeedback>(1));
  const auto inputs = make_inputs(2, 0, {10});
  RingRun run;
  run_op(ring, 1, CompressionMethod::none(), inputs, 0, residuals, run, 4096,
         [](std::size_t node, OpInput& in) {
           if (node == 1) in.method = CompressionMethod::fp16(), in.manifest.method = "fp16";
         });
  for (std::size_t n = 0; n < 2; ++n) {
    BOOST_TEST(run.codes[n] == ErrorCode::manifest_mismatch);
    BOOST_TEST(run.errors[n].find("'fp16'") != std::string::npos, run.errors[n]);
  }
}

BOOST_AUTO_TEST_CASE(a_node_that_cannot_take_part_fails_the_op_everywhere) {
  InprocRing ring(3);
  std::vector<std::vector<codec::ErrorFeedback>> residuals(3, std::vector<codec::ErrorFeedback>(1));
  const auto inputs = make_inputs(3, 0, {10});
  RingRun run;
  run_op(ring, 1, CompressionMethod::none(), inputs, 0, residuals, run, 4096,
         [](std::size_t node, OpInput& in) {
           if (node == 1) {
             in.ranks.clear();
             in.failure = Status{ErrorCode::timeout, "local rank 0 was late"};
           }
         });
  for (std::size_t n = 0; n < 3; ++n) {
    BOOST_TEST(run.codes[n] == ErrorCode::timeout);
    BOOST_TEST(run.errors[n].find("local rank 0 was late") != std::string::npos, run.errors[n]);
    BOOST_TEST(run.errors[n].find("rank 1 (node 1)") != std::string::npos, run.errors[n]);
  }
}

BOOST_AUTO_TEST_CASE(a_silent_predecessor_gives_a_timeout_naming_it) {
  InprocRing ring(3);
  ring.set_filter([](std::size_t from, const Message& m) {
    return from == 1 ? std::vector<Message>{} : std::vector<Message>{m};
  });
  std::vector<std::vector<codec::ErrorFeedback>> residuals(3, std::vector<codec::ErrorFeedback>(1));
  const auto inputs = make_inputs(3, 0, {10});
  std::vector<std::string> errors(3);
  std::vector<std::thread> threads;
  for (std::size_t n = 0; n < 3; ++n)
    threads.emplace_back([&, n] {
      OpContext ctx;
      ctx.world_size = 3;
      ctx.ring.timeout = std::chrono::milliseconds(300);
      OpInput in;
      in.manifest = manifest_of(inputs[n], CompressionMethod::none());
      in.method = CompressionMethod::none();
      const auto values = fuse(inputs[n]);
      in.ranks = {values.data()};
      try {
        Workspace work;
        (void)run_allreduce(ring.link(n), ctx, in, residuals[n], work);
      } catch (const Error& e) {
        errors[n] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  BOOST_TEST(errors[2].find("timed out waiting for node 1") != std::string::npos, errors[2]);
}
