// zringctl status and check-config against real daemons: members and their
// reachability, this node's ranks, ops, the last error and the bytes per
// method, as a table and as JSON.
#define BOOST_TEST_MODULE ops_observe
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <sstream>

#define BOOST_BIND_GLOBAL_PLACEHOLDERS  // property_tree still includes the old boost/bind.hpp
#include <boost/property_tree/json_parser.hpp>

#include "ops/ops_util.hpp"

using namespace zring;
using namespace zring::ops;
using boost::property_tree::ptree;

namespace {

Run zringctl(const std::vector<std::string>& args, const std::string& dir) {
  std::vector<std::string> argv{ZRING_ZRINGCTL_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, dir);
}

std::vector<std::string> member_states(const ptree& report) {
  std::vector<std::string> states;
  for (const auto& [key, member] : report.get_child("members"))
    states.push_back(member.get<std::string>("state"));
  return states;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(status)

BOOST_AUTO_TEST_CASE(status_reports_members_ranks_ops_errors_and_bytes_per_method) {
  auto options = ring_options(2, 2000);
  options.local_ranks = 2;
  proc::LocalRing ring(options);
  Daemons daemons(ring);
  daemons.start(0);
  daemons.start(1);
  daemons.wait_up();

  std::vector<Client> clients;
  for (std::size_t node = 0; node < 2; ++node)
    for (std::size_t local = 0; local < 2; ++local)
      clients.push_back(start_client(ring, node, "quant:8", 3, 100000, 7, 10000, local));
  for (Client& c : clients) BOOST_REQUIRE_MESSAGE(c.process.wait(60s).value_or(-1) == 0, c.error());

  const Run json = zringctl({"status", "--endpoint", ring.ipc(1), "--json"}, ring.dir());
  BOOST_REQUIRE_MESSAGE(json.status == 0, json.out);
  ptree report;
  std::istringstream in(json.out);
  BOOST_REQUIRE_NO_THROW(boost::property_tree::read_json(in, report));
  BOOST_TEST(report.get<std::string>("node") == "n1");
  BOOST_TEST(flag_at(report, "ring_up"));
  BOOST_TEST(number_at(report, "first_rank") == 2);
  BOOST_TEST(number_at(report, "local_ranks") == 2);
  BOOST_TEST(number_at(report, "world_size") == 4);
  BOOST_TEST(number_at(report, "ops_done") == 3);
  BOOST_TEST(number_at(report, "ops_failed") == 0);
  BOOST_TEST(report.get<std::string>("last_error").empty());
  BOOST_TEST((member_states(report) == std::vector<std::string>{"up", "self"}));
  // Its ring messages to n0 go on a TCP connection (tcp_data is on by default) once ops ran.
  BOOST_TEST(eventually(
      [&] {
        const ptree now = status_of(ring.ipc(1));
        const ptree& members = now.get_child("members");
        return members.front().second.get<bool>("data_on_tcp") &&
               !members.back().second.get<bool>("data_on_tcp");
      },
      15s));
  const ptree& quant = report.get_child("methods").get_child("quant:8");
  BOOST_TEST(number_at(quant, "ops") == 3);
  // A dense float32 ring of N nodes sends 2 (N-1) / N of the gradients per op: all of them for N
  // = 2.
  BOOST_TEST(number_at(quant, "raw_bytes") == 3 * 100000 * 4);
  const auto sent = number_at(quant, "wire_bytes_sent");
  const auto received = number_at(quant, "wire_bytes_received");
  BOOST_TEST(sent > 0);
  BOOST_TEST(received > 0);
  BOOST_TEST(sent < number_at(quant, "raw_bytes"), "8-bit codes must cost less than float32");

  const Run table = zringctl({"status", "--endpoint", ring.ipc(1)}, ring.dir());
  BOOST_REQUIRE_MESSAGE(table.status == 0, table.out);
  BOOST_TEST(contains(table.out, "ranks       2-3 of world size 4 (2 local ranks)"), table.out);
  BOOST_TEST(contains(table.out, "ring        up since"), table.out);
  BOOST_TEST(contains(table.out, "this node"), table.out);
  BOOST_TEST(contains(table.out, "in the ring"), table.out);
  BOOST_TEST(contains(table.out, "tcp (data port)"), table.out);
  BOOST_TEST(contains(table.out, "members [n0 n1], quorum 2 of 2 listed"), table.out);
  BOOST_TEST(contains(table.out, "ops         3 done (0 rung on the bell), 0 failed"), table.out);
  BOOST_TEST(contains(table.out, "last error  none"), table.out);
  BOOST_TEST(contains(table.out, "quant:8"), table.out);

  // n0's peer dies: an op on n1 fails, n1 names n0 unreachable and keeps the error.
  daemons.process(0).kill();
  Client late0 = start_client(ring, 1, "none", 1, 100, 8, 10000, 0);
  Client late1 = start_client(ring, 1, "none", 1, 100, 8, 10000, 1);
  BOOST_TEST(late0.process.wait(30s).value_or(-1) == 3);
  BOOST_TEST(late1.process.wait(30s).value_or(-1) == 3);
  BOOST_REQUIRE(
      eventually([&] { return member_states(status_of(ring.ipc(1)))[0] == "down"; }, 15s));
  const ptree after = status_of(ring.ipc(1));
  BOOST_TEST(!flag_at(after, "ring_up"));
  BOOST_TEST(number_at(after, "ops_failed") == 1);
  BOOST_TEST(contains(after.get<std::string>("last_error"), "n0"),
             after.get<std::string>("last_error"));
  BOOST_TEST(contains(after.get<std::string>("ring_reason"), "n0"),
             after.get<std::string>("ring_reason"));
  const Run down = zringctl({"status", "--endpoint", ring.ipc(1)}, ring.dir());
  BOOST_TEST(contains(down.out, "ring        DOWN since"), down.out);
  BOOST_TEST(contains(down.out, "unreachable"), down.out);
  BOOST_TEST(contains(down.out, "ops         3 done (0 rung on the bell), 1 failed"), down.out);
  BOOST_TEST(!contains(down.out, "last error  none"), down.out);
}

// A client alone on its node rings the bell with the requests of its ops in
// the shared buffer: an op the io thread ran once for it starts on the ring
// thread from then on, and status counts those. ZRING_IPC_REQUESTS=stream
// keeps a client's requests off the bell.
BOOST_AUTO_TEST_CASE(status_counts_the_ops_rung_on_the_bell) {
  proc::LocalRing ring(ring_options(2, 2000));
  Daemons daemons(ring);
  daemons.start(0);
  daemons.start(1);
  daemons.wait_up();
  const auto run_clients = [&](std::uint64_t seed) {
    std::vector<Client> clients;
    for (std::size_t node = 0; node < 2; ++node)
      clients.push_back(start_client(ring, node, "none", 8, 1000, seed));
    for (Client& c : clients)
      BOOST_REQUIRE_MESSAGE(c.process.wait(60s).value_or(-1) == 0, c.error());
  };
  run_clients(21);
  const ptree rung = status_of(ring.ipc(0));
  BOOST_TEST(number_at(rung, "ops_done") == 8);
  // The first op of each kind, and every op in a values frame, went through
  // the io thread (ring_client goes through every API form).
  BOOST_TEST(number_at(rung, "ops_rung") >= 1);
  BOOST_TEST(number_at(rung, "ops_rung") < 8);
  const Run table = zringctl({"status", "--endpoint", ring.ipc(0)}, ring.dir());
  BOOST_TEST(
      contains(table.out, "ops         8 done (" + std::to_string(number_at(rung, "ops_rung")) +
                              " rung on the bell), 0 failed"),
      table.out);
  struct OffTheBell {  // the clients inherit it; gone again however the test ends
    OffTheBell() { ::setenv("ZRING_IPC_REQUESTS", "stream", 1); }
    ~OffTheBell() { ::unsetenv("ZRING_IPC_REQUESTS"); }
  } off;
  run_clients(22);
  const ptree after = status_of(ring.ipc(0));
  BOOST_TEST(number_at(after, "ops_done") == 16);
  BOOST_TEST(number_at(after, "ops_rung") == number_at(rung, "ops_rung"));
}

// A client's bell stays connected to the zringd it first rang. One that
// restarted (as Restart=on-failure would) binds the bell's path anew: the
// client, still running, rings the new one once the old socket refuses.
BOOST_AUTO_TEST_CASE(a_client_that_stays_rings_a_restarted_zringd_on_its_bell) {
  proc::LocalRing ring(ring_options(1, 2000));
  Daemons daemons(ring);
  daemons.start(0);
  daemons.wait_up();
  proc::Process client = proc::Process::spawn_talking(
      {ZRING_RING_CLIENT_PATH, "--talk", ring.ipc(0), "0", "none", "7", "1000", "3000"},
      ring.dir() + "/talker.err");
  BOOST_TEST_REQUIRE(client.read_line(20s).value_or("") == "ready 0");
  std::uint64_t round = 0;
  const auto ask = [&] {
    const std::string r = std::to_string(round++);
    client.send_line("inplace " + r + " " + ring.dir() + "/r" + r);
    return client.read_line(30s).value_or("no answer");
  };
  // An op is counted by the time its client has the answer, also one the
  // ring thread answered on its board (it hands the op to the io thread
  // first): a status query sent then finds it.
  std::uint64_t done = 0;
  const auto ask_and_count = [&] {
    BOOST_TEST_REQUIRE(ask() == "ok");
    ++done;
    BOOST_TEST(number_at(status_of(ring.ipc(0)), "ops_done") == done);
  };
  for (int i = 0; i < 4; ++i) ask_and_count();
  BOOST_TEST_REQUIRE(number_at(status_of(ring.ipc(0)), "ops_rung") >= 1);

  daemons.start(0);  // kills the one running first
  daemons.wait_up();
  done = 0;  // the new zringd's count
  // The first after the restart may fail: an answer, never silence.
  const std::string answer = ask();
  BOOST_TEST((answer == "ok" || answer.rfind("error ", 0) == 0), answer);
  if (answer == "ok") ++done;
  for (int i = 0; i < 4; ++i) ask_and_count();
  BOOST_TEST(number_at(status_of(ring.ipc(0)), "ops_rung") >= 1);
  client.send_line("quit");
}

BOOST_AUTO_TEST_CASE(status_finds_the_endpoint_in_the_config_and_fails_clearly_without_a_daemon) {
  proc::LocalRing ring(ring_options(1));
  Daemons daemons(ring);
  daemons.start(0);
  daemons.wait_up();
  const Run via_config =
      zringctl({"status", "--config", ring.config_path(), "--node", "n0"}, ring.dir());
  BOOST_TEST(via_config.status == 0, via_config.out);
  BOOST_TEST(contains(via_config.out, "node        n0"), via_config.out);
  daemons.process(0).kill();
  const Run nobody = zringctl({"status", "--endpoint", ring.ipc(0)}, ring.dir());
  BOOST_TEST(nobody.status == 1, nobody.out);
  BOOST_TEST(contains(nobody.out, "is zringd running"), nobody.out);
}

BOOST_AUTO_TEST_CASE(check_config_prints_the_ring_or_the_problem) {
  proc::LocalRing ring(ring_options(3));
  const Run ok = zringctl({"check-config", ring.config_path(), "--node", "n1"}, ring.dir());
  BOOST_TEST(ok.status == 0, ok.out);
  BOOST_TEST(contains(ok.out, "ok: 3 nodes x 1 local ranks (world size 3)"), ok.out);
  BOOST_TEST(contains(ok.out, "n1  tcp://127.0.0.1:" + std::to_string(ring.port(1)) + "   <- self"),
             ok.out);
  proc::write_file(ring.dir() + "/bad.yaml",
                   proc::read_file(ring.config_path()) + "metrics: {listen: nowhere}\n");
  const Run bad = zringctl({"check-config", ring.dir() + "/bad.yaml", "--node", "n1"}, ring.dir());
  BOOST_TEST(bad.status == 2, bad.out);
  BOOST_TEST(contains(bad.out, "metrics.listen: 'nowhere' has no port"), bad.out);
}

BOOST_AUTO_TEST_SUITE_END()
