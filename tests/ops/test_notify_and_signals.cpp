// zringd under a service manager: this test plays systemd's part. It owns
// the NOTIFY_SOCKET datagram socket and checks that READY=1 comes only once
// the ring is up; then it checks the signals a service manager sends:
// SIGTERM (also mid-op), SIGINT, SIGHUP.
#define BOOST_TEST_MODULE ops_daemon
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstring>
#include <filesystem>
#include <regex>
#include <thread>

#include "ops/ops_util.hpp"

using namespace zring;
using namespace zring::ops;

namespace {

// The service manager's end of sd_notify(3): a bound AF_UNIX datagram socket.
class NotifySocket {
 public:
  explicit NotifySocket(std::string path) : path_(std::move(path)) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof addr.sun_path - 1);
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
      throw std::runtime_error("cannot bind " + path_ + ": " + std::strerror(errno));
  }
  ~NotifySocket() {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  NotifySocket(const NotifySocket&) = delete;
  NotifySocket& operator=(const NotifySocket&) = delete;

  [[nodiscard]] std::string env() const { return "NOTIFY_SOCKET=" + path_; }

  // Every datagram that arrives within `window`, or until one contains `stop`.
  std::vector<std::string> receive(std::chrono::milliseconds window, const std::string& stop = "") {
    std::vector<std::string> got;
    const auto deadline = Clock::now() + window;
    while (Clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (::poll(&p, 1, static_cast<int>(std::max<long>(left.count(), 0))) <= 0) continue;
      char buffer[4096];
      const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) continue;
      got.emplace_back(buffer, static_cast<std::size_t>(n));
      if (!stop.empty() && contains(got.back(), stop)) break;
    }
    return got;
  }

 private:
  std::string path_;
  int fd_ = -1;
};

bool any_contains(const std::vector<std::string>& messages, const std::string& part) {
  for (const auto& m : messages)
    if (contains(m, part)) return true;
  return false;
}

std::string joined(const std::vector<std::string>& messages) {
  std::string out;
  for (const auto& m : messages) out += "[" + m + "] ";
  return out;
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(notify)

BOOST_AUTO_TEST_CASE(ready_comes_only_once_the_ring_is_up_and_only_once) {
  proc::LocalRing ring(ring_options(2));
  NotifySocket manager(ring.dir() + "/notify");
  Daemons daemons(ring);
  daemons.start(0, {}, {manager.env()});
  // Node n1 is not running: node n0 cannot have a ring, so it must not say READY.
  const auto early = manager.receive(1500ms);
  BOOST_TEST(any_contains(early, "STATUS=waiting for the ring to form"), joined(early));
  BOOST_TEST(!any_contains(early, "READY=1"), joined(early));
  BOOST_TEST(!ring.is_up(0));

  daemons.start(1);
  const auto later = manager.receive(30s, "READY=1");
  BOOST_REQUIRE_MESSAGE(any_contains(later, "READY=1"),
                        "no READY=1 after the ring formed: " << joined(later));
  BOOST_TEST(any_contains(later, "STATUS=ring up (2 nodes)"), joined(later));
  BOOST_TEST(ring.is_up(0), "READY=1 came but zringd does not report the ring up");

  // The ring goes down and comes back: STATUS lines follow, READY=1 does not repeat.
  daemons.process(1).kill();
  const auto down = manager.receive(15s, "STATUS=ring down");
  BOOST_TEST(any_contains(down, "STATUS=ring down"), joined(down));
  daemons.start(1);
  const auto again = manager.receive(30s, "STATUS=ring up");
  BOOST_TEST(any_contains(again, "STATUS=ring up"), joined(again));
  BOOST_TEST((!any_contains(down, "READY=1") && !any_contains(again, "READY=1")),
             joined(down) << joined(again));

  daemons.process(0).signal(SIGTERM);
  BOOST_TEST(daemons.process(0).wait(10s).value_or(-1) == 0, daemons.log(0));
  const auto stopping = manager.receive(2s, "STOPPING=1");
  BOOST_TEST(any_contains(stopping, "STOPPING=1"), joined(stopping));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(signals)

// The service manager's stop: an op in flight fails on its clients with an
// error naming the shutdown, every socket closes, and zringd exits 0 well
// within the 2 s the issue allows.
BOOST_AUTO_TEST_CASE(sigterm_mid_op_fails_the_op_on_its_clients_and_exits_zero_within_2_s) {
  proc::LocalRing ring(ring_options(2, 20000));
  Daemons daemons(ring);
  daemons.start(0);
  daemons.start(1);
  daemons.wait_up();
  Client c0 = start_client(ring, 0, "none", 100000, 1000000, 1, 60000);
  Client c1 = start_client(ring, 1, "none", 100000, 1000000, 1, 60000);
  BOOST_REQUIRE(
      eventually([&] { return number_at(status_of(ring.ipc(0)), "ops_done") >= 2; }, 30s));
  // Freeze n1: n0's next op waits for n1's chunks (for up to 20 s).
  daemons.process(1).signal(SIGSTOP);
  std::this_thread::sleep_for(500ms);
  BOOST_TEST(c0.process.running(), "the client should be waiting in an op");

  const auto sent = Clock::now();
  daemons.process(0).signal(SIGTERM);
  const auto exit_status = daemons.process(0).wait(10s);
  const double took = seconds_since(sent);
  BOOST_TEST_MESSAGE("zringd exited " << took << " s after SIGTERM (mid-op)");
  BOOST_TEST(exit_status.value_or(-1) == 0, daemons.log(0));
  BOOST_TEST(took < 2.0);

  // The client learns from zringd itself, not from its own 60 s deadline.
  const auto client_status = c0.process.wait(10s);
  BOOST_TEST(client_status.value_or(-1) == 3);
  BOOST_TEST(contains(c0.error(), "aborted"), c0.error());
  BOOST_TEST(contains(c0.error(), "shutting down (SIGTERM)"), c0.error());
  BOOST_TEST(contains(daemons.log(0), "SIGTERM: shutting down"), daemons.log(0));
  // ZeroMQ removes the IPC socket file when the socket closes.
  BOOST_TEST(!std::filesystem::exists(ring.ipc(0).substr(6)));

  daemons.process(1).signal(SIGCONT);
  daemons.process(1).signal(SIGTERM);
  BOOST_TEST(daemons.process(1).wait(10s).value_or(-1) == 0, daemons.log(1));
  c1.process.kill();
}

BOOST_AUTO_TEST_CASE(sigterm_and_sigint_exit_zero_when_idle_or_waiting_for_peers) {
  proc::LocalRing ring(ring_options(2));
  Daemons daemons(ring);
  // Alone, waiting for a peer that never comes.
  daemons.start(0);
  BOOST_REQUIRE(eventually([&] { return contains(daemons.log(0), "listening on"); }, 10s));
  daemons.process(0).signal(SIGTERM);
  BOOST_TEST(daemons.process(0).wait(2s).value_or(-1) == 0, daemons.log(0));
  // A formed, idle ring; Ctrl-C.
  daemons.start(0);
  daemons.start(1);
  daemons.wait_up();
  daemons.process(1).signal(SIGINT);
  BOOST_TEST(daemons.process(1).wait(2s).value_or(-1) == 0, daemons.log(1));
  BOOST_TEST(contains(daemons.log(1), "SIGINT: shutting down"));
}

// SIGHUP re-reads the file: the log level changes at once, other changes are
// named as needing a restart, and a broken file keeps what runs.
BOOST_AUTO_TEST_CASE(sighup_rereads_the_log_level_and_says_so) {
  proc::LocalRing ring(ring_options(1, 2000, "info"));
  Daemons daemons(ring);
  daemons.start(0);
  daemons.wait_up();
  const std::string original = proc::read_file(ring.config_path());
  const auto reload = [&](const std::string& text, int nth) {
    proc::write_file(ring.config_path(), text);
    daemons.process(0).signal(SIGHUP);
    return eventually(
        [&] {
          const std::string log = daemons.log(0);
          std::size_t count = 0;
          for (std::size_t at = log.find("SIGHUP"); at != std::string::npos;
               at = log.find("SIGHUP", at + 1))
            ++count;
          return count >= static_cast<std::size_t>(nth);
        },
        10s);
  };
  // At info, a finished op is not logged.
  Client first = start_client(ring, 0, "none", 1, 100, 1);
  BOOST_REQUIRE(first.process.wait(30s).value_or(-1) == 0);
  BOOST_TEST(!std::regex_search(daemons.log(0), std::regex("debug: op [0-9]+ done")),
             daemons.log(0));

  std::string debug =
      std::regex_replace(original, std::regex("log_level: info"), "log_level: debug");
  BOOST_REQUIRE(reload(debug, 1));
  BOOST_TEST(contains(daemons.log(0),
                      "notice: SIGHUP: re-read " + ring.config_path() + "; log level debug"),
             daemons.log(0));
  BOOST_TEST(contains(daemons.log(0), "was info; nothing else changed"), daemons.log(0));
  Client second = start_client(ring, 0, "none", 1, 100, 2);
  BOOST_REQUIRE(second.process.wait(30s).value_or(-1) == 0);
  BOOST_TEST(
      eventually(
          [&] { return std::regex_search(daemons.log(0), std::regex("debug: op [0-9]+ done")); },
          5s),
      daemons.log(0));

  // A change that needs a restart is named; the level still applies.
  std::string slower =
      std::regex_replace(debug, std::regex("timeout_ms: 2000"), "timeout_ms: 3000");
  slower = std::regex_replace(slower, std::regex("log_level: debug"), "log_level: warn");
  slower += "busy_poll_us: 0\ngather_bytes: 0\n";
  BOOST_REQUIRE(reload(slower, 2));
  BOOST_TEST(contains(daemons.log(0), "log level warn"), daemons.log(0));
  BOOST_TEST(contains(daemons.log(0),
                      "changes to timeout_ms, busy_poll_us, gather_bytes take effect after a "
                      "restart"),
             daemons.log(0));

  // A broken file: the running configuration stays, the daemon runs on.
  BOOST_REQUIRE(reload("nodes: [oops\n", 3));
  BOOST_TEST(contains(daemons.log(0), "SIGHUP: kept the running configuration"), daemons.log(0));
  BOOST_TEST(daemons.process(0).running());
  Client third = start_client(ring, 0, "none", 1, 100, 3);
  BOOST_TEST(third.process.wait(30s).value_or(-1) == 0, third.error());
}

// --log-level wins over the file's, also after SIGHUP.
BOOST_AUTO_TEST_CASE(sighup_keeps_the_command_line_log_level) {
  proc::LocalRing ring(ring_options(1, 2000, "info"));
  Daemons daemons(ring);
  daemons.start(0, {"--log-level", "warn"});
  daemons.wait_up();
  BOOST_TEST(!contains(daemons.log(0), "info:"), daemons.log(0));
  daemons.process(0).signal(SIGHUP);
  BOOST_REQUIRE(eventually([&] { return contains(daemons.log(0), "SIGHUP"); }, 10s));
  BOOST_TEST(
      contains(daemons.log(0),
               "log level warn (from --log-level, which wins over the file's info), unchanged"),
      daemons.log(0));
}

BOOST_AUTO_TEST_SUITE_END()
