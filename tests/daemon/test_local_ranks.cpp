// test_local_ranks.cpp - a node's local ranks without sockets: ops are made
// of one submission per rank in order, a new process taking a rank refuses
// the old one's requests, only a rank's holder speaks for it, a late rank
// fails the op everywhere and owes that failure, a stale request fails its
// op on this node alone, clear() refuses everything pending, and an op
// whose ranks all answer on shared buffers tells the ring thread where.
#include <boost/test/unit_test.hpp>
#include <chrono>

#include "local_ranks.hpp"
#include "proc/process.hpp"

using namespace zring;
using namespace zring::daemon;
using namespace std::chrono_literals;

namespace {

RingConfig two_local_ranks() {
  RingConfig config;
  config.nodes = {NodeConfig{}};
  config.nodes[0].name = "b";
  config.self = "b";
  config.self_index = 0;
  config.local_ranks = 2;
  config.timeout = 1000ms;
  return config;
}

Request submission(const std::string& client, std::size_t local_rank, std::uint64_t id,
                   IpcClock::time_point at, std::size_t elements = 4) {
  Request r;
  r.client = client;
  r.id = id;
  r.local_rank = local_rank;
  r.manifest.method = "none";
  r.manifest.tensors = {collective::TensorSpec{"w", {elements}, elements}};
  r.method = CompressionMethod::parse("none");
  r.values = collective::Bytes::copy_of(std::vector<float>(elements, 1.0f).data(), elements * 4);
  r.at = at;
  return r;
}

// Both local ranks held, by clients "A" and "B".
struct Held {
  RingConfig config = two_local_ranks();
  LocalRanks ranks{config};
  IpcClock::time_point t = IpcClock::now();
  Held() {
    (void)ranks.hello("A", 0, true);
    (void)ranks.hello("B", 1, true);
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(local_ranks)

BOOST_AUTO_TEST_CASE(an_op_is_one_submission_of_every_rank_in_order) {
  const RingConfig config = two_local_ranks();
  LocalRanks ranks(config);
  BOOST_TEST(ranks.hello("A", 0, true).taken);
  BOOST_TEST(ranks.hello("B", 1, true).taken);
  const auto t = IpcClock::now();
  BOOST_TEST(!ranks.submit(submission("A", 0, 10, t)));
  BOOST_TEST(!ranks.submit(submission("A", 0, 11, t)));
  BOOST_TEST(ranks.assemble().jobs.empty());  // rank 1 has not submitted
  BOOST_TEST((ranks.stall_deadline() == t + 1000ms));
  BOOST_TEST(!ranks.submit(submission("B", 1, 20, t)));
  const std::vector<OpJob> jobs = ranks.assemble().jobs;
  BOOST_REQUIRE_EQUAL(jobs.size(), 1u);
  BOOST_TEST(!jobs[0].input.failure);
  BOOST_TEST(jobs[0].values.size() == 2u);
  const std::vector<Request> answered = ranks.finish(jobs[0].id);
  BOOST_REQUIRE_EQUAL(answered.size(), 2u);
  BOOST_TEST(answered[0].id == 10u);  // the older of rank 0's two
  BOOST_TEST(answered[1].id == 20u);
  BOOST_TEST(ranks.finish(jobs[0].id).empty());
  BOOST_TEST(ranks.pending().size() == 1u);  // request 11 waits for rank 1's next
}

BOOST_FIXTURE_TEST_CASE(ranks_whose_manifests_differ_make_a_failed_op_naming_them, Held) {
  (void)ranks.submit(submission("A", 0, 1, t, 4));
  (void)ranks.submit(submission("B", 1, 2, t, 5));
  const std::vector<OpJob> jobs = ranks.assemble().jobs;
  BOOST_REQUIRE_EQUAL(jobs.size(), 1u);
  BOOST_REQUIRE(jobs[0].input.failure);
  BOOST_TEST(jobs[0].input.failure->code == ErrorCode::manifest_mismatch);
  BOOST_TEST(
      jobs[0].input.failure->text.find("rank 1 (local rank 1 of node 'b')") != std::string::npos,
      jobs[0].input.failure->text);
}

BOOST_AUTO_TEST_CASE(only_the_holder_speaks_for_a_rank_and_a_new_process_takes_it_over) {
  const RingConfig config = two_local_ranks();
  LocalRanks ranks(config);
  const std::optional<Refusal> unknown = ranks.check_owner("A", 0, 5);
  BOOST_REQUIRE(unknown);
  BOOST_TEST(unknown->code == ErrorCode::connection_failed);
  BOOST_TEST(unknown->text.find("restarted since the process connected") != std::string::npos);
  (void)ranks.hello("A", 0, true);
  BOOST_TEST(!ranks.check_owner("A", 0, 5));
  const std::optional<Refusal> other = ranks.check_owner("X", 0, 6);
  BOOST_REQUIRE(other);
  BOOST_TEST(other->code == ErrorCode::invalid_argument);
  BOOST_TEST(other->text == "local rank 0 is held by another process");
  const std::optional<Refusal> outside = ranks.check_owner("X", 2, 7);
  BOOST_REQUIRE(outside);
  BOOST_TEST(outside->text == "local rank 2 is out of range for node 'b'");

  (void)ranks.submit(submission("A", 0, 8, IpcClock::now()));
  BOOST_TEST(!ranks.hello("A", 0, true).taken);  // the same process again: nothing changes
  BOOST_TEST(ranks.pending().size() == 1u);
  const LocalRanks::Hello taken = ranks.hello("Z", 0, false);
  BOOST_TEST(taken.taken);
  BOOST_REQUIRE_EQUAL(taken.refused.size(), 1u);
  BOOST_TEST(taken.refused[0].client == "A");
  BOOST_TEST(taken.refused[0].request == 8u);
  BOOST_TEST(taken.refused[0].code == ErrorCode::aborted);
  BOOST_TEST(taken.refused[0].text ==
             "another process connected as rank 0 (local rank 0 of node 'b')");
  BOOST_TEST(ranks.pending().empty());
  BOOST_TEST(!ranks.clock_shared(0));
}

BOOST_FIXTURE_TEST_CASE(a_late_rank_fails_the_op_everywhere_and_owes_that_failure, Held) {
  (void)ranks.submit(submission("A", 0, 1, t));
  BOOST_TEST(ranks.fail_late(t + 999ms).jobs.empty());  // not yet late
  const LocalRanks::Made made = ranks.fail_late(t + 1000ms);
  BOOST_TEST(made.stale.empty());
  BOOST_REQUIRE_EQUAL(made.jobs.size(), 1u);
  const OpJob* failed = &made.jobs[0];
  BOOST_REQUIRE(failed->input.failure);
  BOOST_TEST(failed->input.failure->code == ErrorCode::timeout);
  BOOST_TEST(failed->input.failure->text ==
             "rank 1 (local rank 1 of node 'b') did not submit the op within 1000 ms, while other "
             "ranks of the node did");
  BOOST_TEST((ranks.stall_deadline() == IpcClock::time_point::max()));
  BOOST_TEST(ranks.finish(failed->id).size() == 1u);
  // Rank 1's late submission is that op: it gets the same failure, once.
  const std::optional<Refusal> owed = ranks.submit(submission("B", 1, 2, t + 1500ms));
  BOOST_REQUIRE(owed);
  BOOST_TEST(owed->code == ErrorCode::aborted);
  BOOST_TEST(
      owed->text.rfind("op abandoned: rank 1 (local rank 1 of node 'b') did not submit", 0) == 0);
  BOOST_TEST(!ranks.submit(submission("B", 1, 3, t + 1600ms)));
}

BOOST_FIXTURE_TEST_CASE(a_request_its_client_gave_up_on_fails_its_op, Held) {
  Request gone = submission("A", 0, 1, IpcClock::now());
  gone.given_up = "rank 0's zringd read its request 5000 ms after it was sent";
  BOOST_TEST(!ranks.submit(std::move(gone)));
  (void)ranks.submit(submission("B", 1, 2, IpcClock::now()));
  const std::vector<OpJob> jobs = ranks.assemble().jobs;
  BOOST_REQUIRE_EQUAL(jobs.size(), 1u);
  BOOST_REQUIRE(jobs[0].input.failure);
  BOOST_TEST(jobs[0].input.failure->code == ErrorCode::aborted);
  BOOST_TEST(jobs[0].input.failure->text ==
             "rank 0's zringd read its request 5000 ms after it was sent");
}

// zringd read the request a whole timeout after it was sent: the other
// nodes are past its op, so it never reaches the ring; it fails for every
// local rank here, and the op after it is made as usual.
BOOST_FIXTURE_TEST_CASE(a_stale_request_fails_its_op_on_this_node_alone, Held) {
  Request old = submission("A", 0, 1, t);
  old.stale = "rank 0's zringd read its request 3000 ms after it was sent";
  BOOST_TEST(!ranks.submit(std::move(old)));
  (void)ranks.submit(submission("B", 1, 2, t));
  (void)ranks.submit(submission("A", 0, 3, t));
  (void)ranks.submit(submission("B", 1, 4, t));
  const LocalRanks::Made made = ranks.assemble();
  BOOST_REQUIRE_EQUAL(made.stale.size(), 1u);
  const LocalRanks::StaleOp& op = made.stale[0];
  BOOST_TEST(op.failure.code == ErrorCode::timeout);
  BOOST_TEST(op.failure.text == "rank 0's zringd read its request 3000 ms after it was sent");
  BOOST_REQUIRE_EQUAL(op.answers.size(), 2u);
  BOOST_TEST(op.answers[0].client == "A");
  BOOST_TEST(op.answers[0].request == 1u);
  BOOST_TEST(op.answers[1].client == "B");
  BOOST_TEST(op.answers[1].request == 2u);
  for (const Refusal& r : op.answers) {
    BOOST_TEST(r.code == ErrorCode::timeout);
    BOOST_TEST(r.text == op.failure.text);
  }
  BOOST_REQUIRE_EQUAL(made.jobs.size(), 1u);  // requests 3 and 4, as one op
  BOOST_TEST(!made.jobs[0].input.failure);
  const std::vector<Request> ran = ranks.finish(made.jobs[0].id);
  BOOST_REQUIRE_EQUAL(ran.size(), 2u);
  BOOST_TEST(ran[0].id == 3u);
  BOOST_TEST(ran[1].id == 4u);
}

// A stale request whose other local rank never comes: at the deadline the
// op fails here (not on the ring), and the late rank owes that failure.
BOOST_FIXTURE_TEST_CASE(a_stale_request_alone_at_the_deadline_fails_off_the_ring, Held) {
  Request old = submission("A", 0, 1, t);
  old.stale = "rank 0's zringd read its request 2500 ms after it was sent";
  (void)ranks.submit(std::move(old));
  const LocalRanks::Made made = ranks.fail_late(t + 1000ms);
  BOOST_TEST(made.jobs.empty());
  BOOST_REQUIRE_EQUAL(made.stale.size(), 1u);
  BOOST_REQUIRE_EQUAL(made.stale[0].answers.size(), 1u);
  BOOST_TEST(made.stale[0].answers[0].request == 1u);
  BOOST_TEST(ranks.pending().empty());
  const std::optional<Refusal> owed = ranks.submit(submission("B", 1, 2, t + 1200ms));
  BOOST_REQUIRE(owed);
  BOOST_TEST(owed->code == ErrorCode::timeout);
  BOOST_TEST(owed->text == "rank 0's zringd read its request 2500 ms after it was sent");
  BOOST_TEST(!ranks.submit(submission("B", 1, 3, t + 1300ms)));  // owed once
}

BOOST_FIXTURE_TEST_CASE(clear_refuses_every_waiting_and_running_request, Held) {
  (void)ranks.submit(submission("A", 0, 1, t));
  (void)ranks.submit(submission("B", 1, 2, t));
  BOOST_TEST(ranks.assemble().jobs.size() == 1u);  // 1 and 2 run
  (void)ranks.submit(submission("A", 0, 3, t));    // 3 waits
  const std::vector<Refusal> refused = ranks.clear(ErrorCode::aborted, "zringd is shutting down");
  BOOST_REQUIRE_EQUAL(refused.size(), 3u);
  for (const Refusal& r : refused) {
    BOOST_TEST(r.code == ErrorCode::aborted);
    BOOST_TEST(r.text == "zringd is shutting down");
  }
  BOOST_TEST(ranks.pending().empty());
}

BOOST_FIXTURE_TEST_CASE(an_op_whose_ranks_all_use_shared_buffers_names_each_board_to_answer, Held) {
  const proc::TempDir tmp;
  const std::string& dir = tmp.path();
  const auto a = transport::SharedRegion::create(dir + "/a", 16);
  const auto b = transport::SharedRegion::create(dir + "/b", 16);
  Request first = submission("A", 0, 7, t), second = submission("B", 1, 9, t);
  first.region = a;
  second.region = b;
  (void)ranks.submit(first);
  (void)ranks.submit(second);
  std::vector<OpJob> jobs = ranks.assemble().jobs;
  BOOST_REQUIRE_EQUAL(jobs.size(), 1u);
  BOOST_REQUIRE_EQUAL(jobs[0].board_answers.size(), 2u);  // per local rank
  BOOST_TEST((jobs[0].board_answers[0].region == a));
  BOOST_TEST(jobs[0].board_answers[0].request == 7u);
  BOOST_TEST((jobs[0].board_answers[1].region == b));
  BOOST_TEST(jobs[0].board_answers[1].request == 9u);
  BOOST_TEST(jobs[0].board_answers[1].local_rank == 1u);
  // One rank's answer goes as a message: the io thread answers them all.
  (void)ranks.submit(first);
  (void)ranks.submit(submission("B", 1, 10, t));
  jobs = ranks.assemble().jobs;
  BOOST_REQUIRE_EQUAL(jobs.size(), 1u);
  BOOST_TEST(jobs[0].board_answers.empty());
}

// An op whose one rank answers on its shared buffer and came with a key
// (the io thread gives one only then) is armed to be rung again on the bell:
// the job as the ring runs it, for that client; read without a key, or in
// a frame, it is not.
BOOST_AUTO_TEST_CASE(a_lone_rank_op_in_its_buffer_is_armed_to_be_rung_again) {
  RingConfig config = two_local_ranks();
  config.local_ranks = 1;
  LocalRanks ranks(config);
  (void)ranks.hello("A", 0, true);
  const proc::TempDir tmp;
  const auto region = transport::SharedRegion::create(tmp.path() + "/a", 64);
  Request r = submission("A", 0, 7, IpcClock::now());
  r.region = region;
  r.repeat_key = "the key";
  r.block_stats = {1.0f, 2.0f};  // this op's own: every ring brings as many
  (void)ranks.submit(r);
  LocalRanks::Made made = ranks.assemble();
  BOOST_REQUIRE_EQUAL(made.jobs.size(), 1u);
  BOOST_REQUIRE_EQUAL(made.repeats.size(), 1u);
  const RepeatOp& op = *made.repeats[0];
  BOOST_TEST(op.client == "A");
  BOOST_TEST(op.local_rank == 0u);
  BOOST_TEST(op.key == "the key");
  BOOST_TEST(op.clock_shared);
  BOOST_TEST(op.job.id == 0u);
  BOOST_TEST(op.stats == 2u);
  BOOST_TEST(op.job.input.given_stats.empty());
  BOOST_TEST(made.jobs[0].input.given_stats.size() == 2u);
  BOOST_TEST((op.job.input.manifest == made.jobs[0].input.manifest));
  BOOST_REQUIRE_EQUAL(op.job.board_answers.size(), 1u);
  BOOST_TEST((op.job.board_answers[0].region == region));
  r.repeat_key.clear();
  (void)ranks.submit(r);
  BOOST_TEST(ranks.assemble().repeats.empty());
  Request in_frame = submission("A", 0, 8, IpcClock::now());
  in_frame.repeat_key = "the key";  // no buffer to answer on
  (void)ranks.submit(in_frame);
  made = ranks.assemble();
  BOOST_TEST(made.jobs.size() == 1u);
  BOOST_TEST(made.repeats.empty());
}

BOOST_AUTO_TEST_CASE(block_statistics_must_match_the_blocks_of_the_op) {
  wire::Submit submit;
  submit.values = wire::ValuesIn::staged;
  submit.manifest.method = "quant:8";
  submit.manifest.tensors = {collective::TensorSpec{"w", {5000}, 5000}};
  const CompressionMethod quant = CompressionMethod::parse("quant:8");
  BOOST_TEST(!block_stats_refusal(submit, quant, 2));  // none: zringd takes them
  submit.block_stats.assign(4, 0.0f);                  // 2 blocks of 4096, min and max each
  BOOST_TEST(!block_stats_refusal(submit, quant, 2));
  submit.block_stats.assign(3, 0.0f);
  BOOST_TEST(block_stats_refusal(submit, quant, 2).value_or("") ==
             "a staged op of 5000 elements in 1 tensors with method quant:8 came with 3 block "
             "statistics, not 4");
  submit.manifest.method = "topk:1%";
  BOOST_TEST(block_stats_refusal(submit, CompressionMethod::parse("topk:1%"), 2).value_or("") ==
             "a staged op of 5000 elements in 1 tensors with method topk:1% came with 3 block "
             "statistics, not 0");
  // An op staged in waves (collective::staging_order): zringd takes its
  // statistics a wave at a time; alone on its ring file's one node, the client's.
  submit.manifest.method = "quant:8";
  submit.manifest.tensors = {
      collective::TensorSpec{"w", {collective::kWaveElems}, collective::kWaveElems}};
  submit.block_stats.assign(2 * collective::kWaveElems / 4096, 0.0f);
  BOOST_TEST(block_stats_refusal(submit, quant, 2).value_or("") ==
             "a staged op of 2097152 elements in 1 tensors with method quant:8 came with 1024 "
             "block statistics, not 0");
  BOOST_TEST(!block_stats_refusal(submit, quant, 1));
}

BOOST_AUTO_TEST_SUITE_END()
