// test_ring_worker.cpp - zringd's ring thread: it sees no signals, and if it
// ever stops by itself every op it holds, and every op submitted after, is
// answered with why (so no client waits on keepalives for an op that will
// never run), and the daemon is told; and it answers an op's ranks on their
// shared buffers' boards itself when they all wait there.
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <condition_variable>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include <zring/config.hpp>

#include "proc/process.hpp"
#include "ring_worker.hpp"
#include "transport/staging_board.hpp"

using namespace zring;
using daemon::OpDone;
using daemon::OpJob;
using daemon::RingWorker;
using zring::Status;

namespace {

// A ring of `nodes` on 127.0.0.1 as node "n0" sees it (the others never start).
RingConfig ring_of(std::size_t nodes, std::size_t local_ranks = 1) {
  const std::vector<int> ports = proc::free_ports(nodes);
  std::string yaml =
      "timeout_ms: 2000\nheartbeat_ms: 200\nlocal_ranks: " + std::to_string(local_ranks) +
      "\nnodes:\n";
  for (std::size_t n = 0; n < nodes; ++n)
    yaml += "  - {name: n" + std::to_string(n) +
            ", address: tcp://127.0.0.1:" + std::to_string(ports[n]) +
            ", ipc: ipc:///tmp/zring-test-unused-" + std::to_string(n) + ".sock}\n";
  return parse_config(yaml, "test_ring_worker", std::string("n0"));
}

// What the worker reported, waited for with a guard (not a timing).
struct Reports {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<OpDone> done;
  std::optional<Status> died;

  template <typename Ready>
  bool wait_for(Ready ready) {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, std::chrono::seconds(30), ready);
  }
};

OpJob op(std::uint64_t id) {
  OpJob job;
  job.id = id;
  job.input.manifest.method = "none";
  return job;
}

// The signal mask of this process's thread named `name`, from /proc (the
// thread names itself as it starts: look again until it has).
std::optional<std::uint64_t> blocked_signals_of(const std::string& name) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (; std::chrono::steady_clock::now() < give_up;
       std::this_thread::sleep_for(std::chrono::milliseconds(5)))
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
      std::ifstream comm(task.path() / "comm");
      std::string got;
      std::getline(comm, got);
      if (got != name) continue;
      std::ifstream status(task.path() / "status");
      for (std::string line; std::getline(status, line);)
        if (line.rfind("SigBlk:", 0) == 0) return std::stoull(line.substr(7), nullptr, 16);
    }
  return std::nullopt;
}

bool has(std::uint64_t mask, int signal) { return (mask >> (signal - 1)) & 1; }

}  // namespace

BOOST_AUTO_TEST_SUITE(ring_worker)

BOOST_AUTO_TEST_CASE(the_ring_thread_blocks_every_signal_but_faults) {
  zmq::context_t context(1);
  const RingConfig config = ring_of(1);
  RingWorker worker(
      context, config, [](OpDone) {}, [](daemon::RingState) {}, [](Status) {});
  worker.start();
  const auto mask = blocked_signals_of("zringd-ring");
  worker.stop();
  BOOST_TEST_REQUIRE(mask.has_value(), "no thread named zringd-ring");
  for (const int s : {SIGHUP, SIGINT, SIGTERM, SIGALRM, SIGUSR1, SIGCHLD, SIGPROF})
    BOOST_TEST(has(*mask, s), "signal " << s << " reaches the ring thread");
  for (const int s : {SIGSEGV, SIGBUS, SIGFPE, SIGABRT})
    BOOST_TEST(!has(*mask, s), "fault signal " << s << " is blocked");
}

BOOST_AUTO_TEST_CASE(a_ring_thread_that_dies_answers_every_op_and_tells_the_daemon) {
  zmq::context_t context(1);
  const RingConfig config = ring_of(1);
  Reports reports;
  const auto on_done = [&](OpDone done) {
    std::lock_guard lock(reports.mutex);
    reports.done.push_back(std::move(done));
    reports.changed.notify_all();
  };
  const auto on_died = [&](Status failure) {
    std::lock_guard lock(reports.mutex);
    reports.died = std::move(failure);
    reports.changed.notify_all();
  };
  RingWorker worker(
      context, config, on_done, [](daemon::RingState) {}, on_died);
  worker.start();
  // A reset for a local rank the node does not have breaks an invariant the
  // IPC side keeps: the thread's loop throws outside any op.
  OpJob broken;
  broken.reset_rank = 7;
  worker.submit(std::move(broken));
  BOOST_TEST_REQUIRE(reports.wait_for([&] { return reports.died.has_value(); }),
                     "the worker never said its thread died");
  BOOST_TEST(reports.died->code == ErrorCode::internal);
  BOOST_TEST(reports.died->text.find("zringd's ring thread stopped: ") == 0u, reports.died->text);
  // An op submitted now is answered at once, with the same failure.
  worker.submit(op(42));
  BOOST_TEST_REQUIRE(reports.wait_for([&] { return !reports.done.empty(); }));
  {
    std::lock_guard lock(reports.mutex);
    BOOST_TEST(reports.done.size() == 1u);
    BOOST_TEST(reports.done[0].id == 42u);
    BOOST_TEST_REQUIRE(reports.done[0].failure.has_value());
    BOOST_TEST(reports.done[0].failure->code == ErrorCode::internal);
    BOOST_TEST(reports.done[0].failure->text == reports.died->text);
  }
  worker.stop();
}

BOOST_AUTO_TEST_CASE(a_stopped_worker_answers_what_it_held_as_shutdown_not_as_a_failure) {
  zmq::context_t context(1);
  const RingConfig config = ring_of(2);  // n1 never starts: the ring cannot form
  Reports reports;
  bool died = false;
  RingWorker worker(
      context, config,
      [&](OpDone done) {
        std::lock_guard lock(reports.mutex);
        reports.done.push_back(std::move(done));
      },
      [](daemon::RingState) {}, [&](Status) { died = true; });
  worker.start();
  worker.submit(op(1));  // waits for the ring
  worker.stop();
  BOOST_TEST(!died);
  BOOST_TEST_REQUIRE(reports.done.size() == 1u);
  BOOST_TEST_REQUIRE(reports.done[0].failure.has_value());
  BOOST_TEST(reports.done[0].failure->code == ErrorCode::aborted);
  BOOST_TEST(reports.done[0].failure->text == "zringd is shutting down");
}

BOOST_AUTO_TEST_SUITE_END()

// A job whose every rank waits on its shared buffer's board is answered there
// by the ring thread itself, right after it reported the op to the daemon
// (so that a status query a client sends once it has its answer counts
// the op); a job without board answers is left to the daemon's io thread.
BOOST_AUTO_TEST_CASE(the_ring_thread_answers_on_the_boards_once_it_reported_the_op) {
  zmq::context_t context(1);
  const RingConfig config = ring_of(1);
  const proc::TempDir tmp;
  const std::string& dir = tmp.path();
  constexpr std::size_t kElements = 4;
  const auto region = transport::SharedRegion::create(dir + "/buffer", kElements * sizeof(float));
  const transport::StagingBoard& board = transport::board_of(*region);
  auto* values = reinterpret_cast<float*>(region->data());
  for (std::size_t i = 0; i < kElements; ++i) values[i] = 1.5f * static_cast<float>(i);
  Reports reports;
  std::vector<std::optional<wire::Result>> on_board_when_done;  // under reports.mutex
  const auto on_done = [&](OpDone done) {
    std::lock_guard lock(reports.mutex);
    on_board_when_done.push_back(board.answer_to(done.id == 1 ? 501 : 502));
    reports.done.push_back(std::move(done));
    reports.changed.notify_all();
  };
  RingWorker worker(
      context, config, on_done, [](daemon::RingState) {}, [](Status) {});
  worker.start();
  const auto job = [&](std::uint64_t id, bool on_board) {
    OpJob j = op(id);
    j.input.manifest.tensors = {collective::TensorSpec{"w", {kElements}, kElements}};
    j.input.method = CompressionMethod::parse("none");
    j.values.push_back(collective::Bytes(region->data(), kElements * sizeof(float), region));
    j.input.output = values;
    j.input.output_owner = region;
    if (on_board) j.board_answers.push_back({region, 501, 0});
    return j;
  };
  worker.submit(job(1, true));
  worker.submit(job(2, false));
  BOOST_TEST_REQUIRE(reports.wait_for([&] { return reports.done.size() == 2u; }),
                     "the worker did not answer both jobs");
  worker.stop();
  const OpDone& first = reports.done[0];
  BOOST_TEST_REQUIRE(!first.failure, first.failure->text);
  BOOST_TEST(first.answered_on_board.has_value());
  BOOST_TEST(!on_board_when_done[0].has_value(), "answered on the board before on_done");
  const std::optional<wire::Result> on_board = board.answer_to(501);
  BOOST_TEST_REQUIRE(on_board.has_value(), "no answer on the board after the op");
  const wire::Result& answer = *on_board;
  BOOST_TEST(answer.in_shared_buffer);
  BOOST_TEST(answer.op == first.op);
  BOOST_TEST(answer.world_size == 1u);
  BOOST_TEST(answer.rank == 0u);
  BOOST_TEST(answer.dense_bytes == kElements * sizeof(float));
  for (std::size_t i = 0; i < kElements; ++i)
    BOOST_TEST(values[i] == 1.5f * static_cast<float>(i));  // one rank: its own values
  const OpDone& second = reports.done[1];
  BOOST_TEST_REQUIRE(!second.failure, second.failure->text);
  BOOST_TEST(!second.answered_on_board.has_value());
  BOOST_TEST(!on_board_when_done[1].has_value());  // request 502 is the io thread's to answer
}

// The averages are in local rank 0's buffer, which its client refills as
// soon as it has its answer: every other rank's buffer holds them before any
// board says the op is done (a thread watching rank 0's board finds rank
// 1's averages in place the moment the answer appears).
BOOST_AUTO_TEST_CASE(every_rank_has_the_averages_before_any_board_is_answered) {
  zmq::context_t context(1);
  const RingConfig config = ring_of(1, 2);
  const proc::TempDir tmp;
  const std::string& dir = tmp.path();
  constexpr std::size_t kElements = 1 << 16;
  const auto first = transport::SharedRegion::create(dir + "/first", kElements * sizeof(float));
  const auto second = transport::SharedRegion::create(dir + "/second", kElements * sizeof(float));
  auto* mine = reinterpret_cast<float*>(first->data());
  auto* theirs = reinterpret_cast<float*>(second->data());
  for (std::size_t i = 0; i < kElements; ++i) {
    mine[i] = 1.0f;
    theirs[i] = 3.0f;  // the average of the two ranks: 2
  }
  Reports reports;
  RingWorker worker(
      context, config,
      [&](OpDone done) {
        std::lock_guard lock(reports.mutex);
        reports.done.push_back(std::move(done));
        reports.changed.notify_all();
      },
      [](daemon::RingState) {}, [](Status) {});
  worker.start();
  std::atomic<std::size_t> twos_seen{0};
  std::thread watcher([&] {
    const transport::StagingBoard& board = transport::board_of(*first);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!board.answer_to(7) && std::chrono::steady_clock::now() < give_up) {
    }
    std::size_t twos = 0;
    for (std::size_t i = 0; i < kElements; ++i) twos += theirs[i] == 2.0f ? 1 : 0;
    twos_seen = twos;
  });
  OpJob job = op(1);
  job.input.manifest.tensors = {collective::TensorSpec{"w", {kElements}, kElements}};
  job.input.method = CompressionMethod::parse("none");
  job.values.push_back(collective::Bytes(first->data(), kElements * sizeof(float), first));
  job.values.push_back(collective::Bytes(second->data(), kElements * sizeof(float), second));
  job.input.output = mine;
  job.input.output_owner = first;
  job.board_answers = {{first, 7, 0}, {second, 8, 1}};
  worker.submit(std::move(job));
  BOOST_TEST_REQUIRE(reports.wait_for([&] { return !reports.done.empty(); }));
  watcher.join();
  worker.stop();
  BOOST_TEST_REQUIRE(!reports.done[0].failure, reports.done[0].failure->text);
  BOOST_TEST(twos_seen.load() == kElements);
  const std::optional<wire::Result> second_answer = transport::board_of(*second).answer_to(8);
  BOOST_TEST_REQUIRE(second_answer.has_value());
  BOOST_TEST(second_answer->rank == 1u);  // local rank 1 of the only node
  BOOST_TEST(second_answer->world_size == 2u);
}
