// test_ring_bell.cpp - the ring thread's side of the bell (ring_bell.cpp): an
// op the io thread armed and its client rings again runs on the ring thread,
// is answered on its board under the new request id and waits in the books
// (no on_done); whatever rings nothing armed (another op, another client, an
// op read late, a rank disarmed) goes to the io thread as it came; and a
// datagram without a routing id is dropped, the bell still working after.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include <zring/config.hpp>

#include "proc/process.hpp"
#include "ring_worker.hpp"
#include "transport/staging_board.hpp"
#include "wire/bell.hpp"

using namespace zring;
using daemon::OpDone;
using daemon::RepeatOp;
using daemon::RingWorker;

namespace {

constexpr std::size_t kElements = 4;
const std::string kClient("\x07client", 7);

RingConfig one_node() {
  const std::vector<int> ports = proc::free_ports(1);
  return parse_config(
      "timeout_ms: 2000\nheartbeat_ms: 200\nnodes:\n  - {name: n0, address: "
      "tcp://127.0.0.1:" +
          std::to_string(ports[0]) + ", ipc: ipc:///tmp/zring-test-unused.sock}\n",
      "test_ring_bell", std::string("n0"));
}

wire::Submit submit_of(std::uint64_t request, const std::string& tensor) {
  wire::Submit submit;
  submit.request = request;
  submit.values = wire::ValuesIn::shared_buffer;
  submit.manifest.method = "none";
  submit.manifest.tensors = {wire::TensorSpec{tensor, {kElements}, kElements}};
  return submit;
}

// A worker on a ring of one node with its bell in a temporary directory,
// an op on a shared buffer armed for kClient, and what it forwards.
struct Bell {
  zmq::context_t context{1};
  RingConfig config = one_node();
  proc::TempDir tmp;
  std::shared_ptr<transport::SharedRegion> region =
      transport::SharedRegion::create(tmp.path() + "/buffer", kElements * sizeof(float));
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<OpDone> done;                         // on_done's
  std::vector<std::vector<std::string>> forwarded;  // frames as text
  RingWorker worker{context, config,
                    [this](OpDone d) {
                      std::lock_guard lock(mutex);
                      done.push_back(std::move(d));
                      changed.notify_all();
                    },
                    [](daemon::RingState) {}, [](Status) {}};
  std::string path = tmp.path() + "/bell";

  Bell() {
    auto* values = reinterpret_cast<float*>(region->data());
    for (std::size_t i = 0; i < kElements; ++i) values[i] = 2.0f + static_cast<float>(i);
    worker.start();
    worker.take_bell(std::make_unique<daemon::BellSocket>(path),
                     [this](std::vector<zmq::message_t> frames) {
                       std::lock_guard lock(mutex);
                       std::vector<std::string> text;
                       for (const zmq::message_t& f : frames) text.push_back(f.to_string());
                       forwarded.push_back(std::move(text));
                       changed.notify_all();
                     });
    worker.arm(armed("w", true));
  }
  ~Bell() { worker.stop(); }

  std::shared_ptr<const RepeatOp> armed(const std::string& tensor, bool clock_shared,
                                        std::optional<wire::Submit> like = std::nullopt) {
    auto op = std::make_shared<RepeatOp>();
    op->client = kClient;
    op->key = daemon::repeat_key(like.value_or(submit_of(0, tensor)));
    op->stats = like ? like->block_stats.size() : 0;
    op->clock_shared = clock_shared;
    daemon::OpJob& job = op->job;
    job.input.manifest.method = "none";
    job.input.manifest.tensors = {collective::TensorSpec{tensor, {kElements}, kElements}};
    job.input.method = CompressionMethod::parse("none");
    job.values.push_back(collective::Bytes(region->data(), kElements * sizeof(float), region));
    job.input.output = reinterpret_cast<float*>(region->data());
    job.input.output_owner = region;
    job.board_answers.push_back({region, 0, 0});
    return op;
  }

  void ring(const std::vector<std::uint8_t>& datagram) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
    const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    BOOST_TEST_REQUIRE(fd >= 0);
    const ssize_t sent = ::sendto(fd, datagram.data(), datagram.size(), 0,
                                  reinterpret_cast<const sockaddr*>(&address), sizeof address);
    ::close(fd);
    BOOST_TEST_REQUIRE(sent == static_cast<ssize_t>(datagram.size()));
  }
  void ring(const std::string& client, const wire::IpcMessage& message) {
    ring(wire::encode_bell(client, wire::encode_ipc(message)));
  }

  // The board's answer to `request`, waited for with a guard (not a timing).
  std::optional<wire::Result> answer_to(std::uint64_t request) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < give_up) {
      if (auto answer = transport::board_of(*region).answer_to(request)) return answer;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return std::nullopt;
  }
  bool forwarded_count(std::size_t n) {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, std::chrono::seconds(30), [&] { return forwarded.size() >= n; });
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(ring_bell)

BOOST_AUTO_TEST_CASE(an_armed_op_rung_again_runs_on_the_ring_thread_and_waits_in_the_books) {
  Bell bell;
  bell.ring(kClient, submit_of(77, "w"));
  const std::optional<wire::Result> answer = bell.answer_to(77);
  BOOST_TEST_REQUIRE(answer.has_value(), "no answer on the board");
  BOOST_TEST(answer->in_shared_buffer);
  BOOST_TEST(answer->world_size == 1u);
  BOOST_TEST(answer->dense_bytes == kElements * sizeof(float));
  const std::vector<OpDone> books = bell.worker.take_books();
  BOOST_TEST_REQUIRE(books.size() == 1u);
  BOOST_TEST_REQUIRE(books[0].rung.has_value());
  BOOST_TEST(books[0].rung->request == 77u);
  BOOST_TEST(books[0].rung->op->client == kClient);
  BOOST_TEST(books[0].op == answer->op);
  BOOST_TEST(!books[0].failure.has_value());
  bell.ring(kClient, submit_of(78, "w"));  // and again
  BOOST_TEST_REQUIRE(bell.answer_to(78).has_value());
  std::lock_guard lock(bell.mutex);
  BOOST_TEST(bell.done.empty());  // the io thread was not woken
  BOOST_TEST(bell.forwarded.empty());
  const auto* values = reinterpret_cast<const float*>(bell.region->data());
  for (std::size_t i = 0; i < kElements; ++i)
    BOOST_TEST(values[i] == 2.0f + static_cast<float>(i));  // one rank: its own values
}

BOOST_AUTO_TEST_CASE(what_rings_nothing_armed_goes_to_the_io_thread_as_it_came) {
  Bell bell;
  const wire::Submit other_op = submit_of(5, "v");
  bell.ring(kClient, other_op);                                 // another op
  bell.ring(std::string("\x07someone", 8), submit_of(6, "w"));  // another client
  wire::Submit late = submit_of(7, "w");
  late.wait.timeout_ms = 60000;
  late.wait.sent_ns = 1;  // sent long before zringd read it: the io thread judges it
  bell.ring(kClient, late);
  BOOST_TEST_REQUIRE(bell.forwarded_count(3), "not every request went to the io thread");
  bell.worker.disarm(0);
  bell.ring(kClient, submit_of(8, "w"));  // disarmed
  wire::Hello hello;
  hello.request = 9;
  bell.ring(kClient, hello);                            // not a Submit at all
  bell.ring(wire::encode_bell(kClient, {0xc1, 0x00}));  // no IPC message: the io thread says so
  BOOST_TEST_REQUIRE(bell.forwarded_count(6), "not every request went to the io thread");
  std::lock_guard lock(bell.mutex);
  const std::vector<std::uint8_t> other = wire::encode_ipc(other_op);
  BOOST_TEST(bell.forwarded[0][0] == kClient);
  BOOST_TEST(bell.forwarded[0][1] == std::string(other.begin(), other.end()));
  BOOST_TEST(bell.forwarded[1][0] == std::string("\x07someone", 8));
  BOOST_TEST(bell.forwarded[5][1] == std::string("\xc1\x00", 2));
  for (const auto& frames : bell.forwarded) BOOST_TEST(frames.size() == 2u);
  BOOST_TEST(bell.done.empty());
  BOOST_TEST(bell.worker.take_books().empty());  // nothing ran
}

// A staged op brings its block statistics with every ring: as many as the
// op the io thread checked, or the io thread judges them.
BOOST_AUTO_TEST_CASE(a_rung_op_brings_as_many_block_statistics_as_the_armed_one) {
  Bell bell;
  wire::Submit staged = submit_of(0, "s");
  staged.values = wire::ValuesIn::staged;
  staged.block_stats = {1.0f, 2.0f};
  bell.worker.arm(bell.armed("s", true, staged));
  staged.request = 51;
  staged.block_stats = {3.0f, 4.0f};  // others than the armed op's: each op has its own
  bell.ring(kClient, staged);
  BOOST_TEST_REQUIRE(bell.answer_to(51).has_value(), "the staged op did not run");
  staged.request = 52;
  staged.block_stats = {3.0f};
  bell.ring(kClient, staged);
  staged.request = 53;
  staged.block_stats.clear();
  bell.ring(kClient, staged);
  BOOST_TEST_REQUIRE(bell.forwarded_count(2), "a ring with other statistics ran");
  const std::vector<OpDone> books = bell.worker.take_books();
  BOOST_TEST_REQUIRE(books.size() == 1u);
  BOOST_TEST(books[0].rung->request == 51u);
}

BOOST_AUTO_TEST_CASE(a_datagram_without_a_routing_id_is_dropped_and_the_bell_goes_on) {
  Bell bell;
  bell.ring({});             // empty
  bell.ring({0, 1, 2, 3});   // a routing id of 0 bytes
  bell.ring({9, 'a', 'b'});  // cut short
  bell.ring(kClient, submit_of(31, "w"));
  BOOST_TEST_REQUIRE(bell.answer_to(31).has_value(), "the bell stopped working");
  std::lock_guard lock(bell.mutex);
  BOOST_TEST(bell.forwarded.empty());
  BOOST_TEST(bell.done.empty());
}

BOOST_AUTO_TEST_SUITE_END()
