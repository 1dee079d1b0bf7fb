// Multi-host faults: three zringd nodes, each in its own network namespace
// behind a veth link to a bridge, with a training-process stand-in next to
// each. While all-reduces of 4 MiB per rank run back to back, a link is cut,
// made lossy and slow, or two nodes are partitioned at once. Every rank of
// every round must get the correct result (identical bits, equal to the
// reference average) or a clear error naming a node, never a hang; once the
// network is repaired the ring must re-form and the next all-reduce succeed
// on every rank. Skipped, with the reason, where namespaces are forbidden.
#define BOOST_TEST_MODULE netns
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <csignal>
#include <functional>
#include <iomanip>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include "netns/netns_ring.hpp"
#include "netns/network.hpp"
#include "netns/round_check.hpp"
#include "support/time_scale.hpp"

using namespace zring::netns;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t kNodes = 3;
constexpr int kTimeoutMs = 2000;
// A hang detector, not a speed limit: three op deadlines and 10 s.
const std::chrono::milliseconds kGuard =
    zring::testing::scaled(std::chrono::milliseconds(3 * kTimeoutMs + 10000));
// Two tensors, 4 MiB per rank: an op lasts long enough for a fault to land inside it.
const std::vector<std::size_t> kSizes = {786432, 262145};
const std::vector<std::string> kMethods = {"none", "quant:8", "ef:topk:1%"};

std::vector<std::string> node_names(std::size_t nodes = kNodes) {
  std::vector<std::string> names;
  for (std::size_t n = 0; n < nodes; ++n) names.push_back(NetnsRing::name(n));
  return names;
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// What happened under each kind of fault, over the whole run (printed at the end).
struct Tally {
  int injected = 0;
  int mid_op = 0;          // the fault began while an op was in flight
  std::size_t rounds = 0;  // rounds run while the fault was in place
  std::size_t ok = 0, errors = 0;
  std::map<std::string, int> codes;
  double worst_error_seconds = 0;

  void add(const Verdict& v) {
    ++rounds;
    ok += v.ok;
    errors += v.errors;
    for (const auto& [code, n] : v.codes) codes[code] += n;
    worst_error_seconds = std::max(worst_error_seconds, v.worst_error_seconds);
  }
};
std::map<std::string, Tally>& tallies() {
  static std::map<std::string, Tally> t;
  return t;
}

struct Precondition {
  boost::test_tools::assertion_result operator()(boost::unit_test::test_unit_id) const {
    boost::test_tools::assertion_result ok(namespaces_unavailable().empty());
    ok.message() << "SKIPPED: network namespaces are not available here: "
                 << namespaces_unavailable();
    return ok;
  }
};

struct NetemPrecondition {
  boost::test_tools::assertion_result operator()(boost::unit_test::test_unit_id) const {
    const std::string why =
        namespaces_unavailable().empty() ? netem_unavailable() : namespaces_unavailable();
    boost::test_tools::assertion_result ok(why.empty());
    ok.message() << "SKIPPED: tc netem (reordering, duplication) is not available here: " << why;
    return ok;
  }
};

// Once per run: delete what a killed earlier run left; print the tallies at the end.
struct RunFixture {
  void setup() {
    // A client that died must show up as an error of send_line, not kill the test.
    std::signal(SIGPIPE, SIG_IGN);
    if (!namespaces_unavailable().empty()) return;
    for (const std::string& name : remove_stale_namespaces())
      BOOST_TEST_MESSAGE("deleted " << name << ", left by a killed earlier run");
  }
  void teardown() {
    for (const auto& [fault, t] : tallies()) {
      std::ostringstream codes;
      for (const auto& [code, n] : t.codes) codes << " " << code << "=" << n;
      BOOST_TEST_MESSAGE("SUMMARY " << fault << ": injected " << t.injected << " times ("
                                    << t.mid_op << " mid-op), " << t.rounds
                                    << " rounds under the fault, rank outcomes: " << t.ok
                                    << " correct, " << t.errors << " errors" << codes.str()
                                    << "; worst time to error " << std::fixed
                                    << std::setprecision(2) << t.worst_error_seconds << " s");
    }
  }
};
BOOST_TEST_GLOBAL_FIXTURE(RunFixture);

NetnsRingOptions ring_options(std::size_t min_nodes) {
  NetnsRingOptions o;
  o.zringd = ZRING_ZRINGD_PATH;
  o.ring_client = ZRING_RING_CLIENT_PATH;
  o.timeout_ms = kTimeoutMs;
  o.heartbeat_ms = 200;
  o.min_nodes = min_nodes;
  return o;
}

// A network of kNodes namespaces and a running, formed ring on it. Most
// scenarios check that no op completes while a link is down: their ring
// may not go on without a node (min_nodes is kNodes).
struct RingFixture {
  explicit RingFixture(std::size_t min_nodes = kNodes) : ring(net, ring_options(min_nodes)) {
    ring.start_all();
    if (!ring.wait_up(30s)) throw std::runtime_error("the ring did not come up:\n" + logs());
  }
  Network net{kNodes};
  NetnsRing ring;
  std::mt19937 rng{20261130};

  std::string logs() const {
    std::string all = ring.yaml();
    for (std::size_t n = 0; n < kNodes; ++n)
      all += "--- zringd " + NetnsRing::name(n) + ":\n" + ring.log(n);
    return all;
  }
};

// The elastic ring: zringd's default min_nodes (2 of 3).
struct ElasticRingFixture : RingFixture {
  ElasticRingFixture() : RingFixture(0) {}
};

// The assertions every checked round must pass (round_check.hpp).
void expect_sound(const Verdict& v, const std::string& what, std::uint64_t number) {
  BOOST_TEST(v.problems.empty(), what << ", round " << number << ": " << describe(v));
  BOOST_TEST(v.unnamed.empty(), what << ", round " << number
                                     << ": an error does not say which node failed "
                                     << "(an error must name the node): " << describe(v));
}

// Runs, checks and tallies one round. Fails the test case when a rank never
// answers: the clients would be out of step from then on.
Verdict checked_round(Clients& clients, RoundChecker& checker, std::uint64_t number,
                      Clock::time_point fault_at, Tally* tally, const std::string& what) {
  const Round round = clients.run_round(number, kGuard);
  const Verdict v = checker.check(round, fault_at);
  expect_sound(v, what, number);
  const bool answered = std::none_of(round.answers.begin(), round.answers.end(),
                                     [](const Answer& a) { return a.kind == Answer::Kind::none; });
  BOOST_TEST_REQUIRE(answered, what << ", round " << number << ": a rank did not answer within "
                                    << kGuard.count() << " ms (hang)");
  if (tally) tally->add(v);
  return v;
}

// How long the round took until its last answer.
double round_seconds(const Round& round) {
  Clock::time_point last = round.started;
  for (const Answer& a : round.answers) last = std::max(last, a.at);
  return seconds(last - round.started);
}

// Two clean rounds (every rank must succeed), then rounds in which `fault`
// is injected at a random point inside the op (a fraction of the fastest
// clean round), until it has landed while some rank still waited; rounds it
// missed must succeed. The round it lands in may end either way. Returns the
// next round number.
std::uint64_t rounds_with_fault(RingFixture& f, Clients& clients, RoundChecker& checker,
                                std::uint64_t number, const std::function<void()>& fault,
                                Tally& tally, const std::string& what) {
  double op = 1e9;
  for (int i = 0; i < 2; ++i) {
    const Round round = clients.run_round(number, kGuard);
    op = std::min(op, round_seconds(round));
    const Verdict v = checker.check(round, round.started);
    BOOST_TEST_REQUIRE(v.all_ok(), what << ", round " << number << " before the fault: "
                                        << describe(v) << " " << v.first_error);
    ++number;
  }
  for (int attempt = 0; attempt < 20; ++attempt) {
    InjectDuring inject;
    inject.after = std::chrono::milliseconds(
        static_cast<int>(1000 * op * std::uniform_real_distribution<double>(0.05, 0.8)(f.rng)));
    inject.action = fault;
    const Round round = clients.run_round(number, kGuard, &inject);
    const Verdict v = checker.check(round, round.injected.value_or(round.started));
    expect_sound(v, what, number);
    BOOST_TEST_REQUIRE(std::none_of(round.answers.begin(), round.answers.end(),
                                    [](const Answer& a) { return a.kind == Answer::Kind::none; }),
                       what << ", round " << number << ": a rank did not answer within "
                            << kGuard.count() << " ms (hang)");
    ++number;
    if (!round.injected) {  // the op was done before the fault was due: again, sooner
      BOOST_TEST(v.all_ok(), what << ", round " << number - 1 << " (no fault yet): " << describe(v)
                                  << " " << v.first_error);
      op = std::min(op, round_seconds(round));
      continue;
    }
    ++tally.injected;
    ++tally.mid_op;
    tally.add(v);
    BOOST_TEST_MESSAGE(what << ": fault landed " << std::fixed << std::setprecision(3)
                            << seconds(*round.injected - round.started) << " s into round "
                            << number - 1 << " (clean ops took " << op << " s; "
                            << round.answered_before_fault
                            << " ranks had their result already): " << describe(v)
                            << (v.first_error.empty() ? "" : "; e.g. " + v.first_error)
                            << "; latest error " << v.worst_error_seconds << " s after the fault");
    return number;
  }
  BOOST_FAIL(what << ": every op finished before the fault was due, 20 times");
  return number;
}

// After the network is repaired: the ring re-forms by itself and the next
// all-reduce succeeds on every rank with the correct result.
std::uint64_t expect_recovery(RingFixture& f, Clients& clients, RoundChecker& checker,
                              std::uint64_t number, const std::string& what) {
  const auto repaired = Clock::now();
  // What the nodes decide in the first timeout_ms after the repair can
  // still rest on the fault (a node not heard during it, a connection whose
  // TCP retransmissions backed off under heavy loss): the ring that is up
  // then may still end. Once a timeout has passed, the ring that is up
  // formed on the repaired network. (Seen once: under 30% loss, wait_up
  // returned 0.02 s after the repair, and that ring ended in the next op.)
  std::this_thread::sleep_for(std::chrono::milliseconds(kTimeoutMs));
  BOOST_TEST_REQUIRE(f.ring.wait_up(30s), what << ": the ring did not re-form within 30 s\n"
                                               << f.logs());
  const double reform = seconds(Clock::now() - repaired);
  const Verdict v =
      checked_round(clients, checker, number++, Clock::now(), nullptr, what + " (repaired)");
  BOOST_TEST(
      v.all_ok(),
      what << ": the first all-reduce after the ring re-formed did not succeed on every rank: "
           << describe(v) << " " << v.first_error);
  BOOST_TEST_MESSAGE(what << ": ring up " << std::fixed << std::setprecision(2) << reform
                          << " s after the repair; next all-reduce: " << describe(v));
  // So that the next trial starts from a working ring (and the log says
  // whether it works at all), a few more tries when that op failed.
  bool works = v.all_ok();
  for (int retry = 1; retry <= 5 && !works; ++retry) {
    BOOST_TEST_REQUIRE(f.ring.wait_up(30s), what << ": the ring did not re-form again within 30 s\n"
                                                 << f.logs());
    const Verdict again =
        checked_round(clients, checker, number++, Clock::now(), nullptr, what + " (retry)");
    works = again.all_ok();
    BOOST_TEST_MESSAGE(what << ": retry " << retry << ": " << describe(again) << " "
                            << again.first_error);
  }
  BOOST_TEST_REQUIRE(works,
                     what << ": no all-reduce succeeded on every rank in 6 tries after the repair");
  BOOST_TEST(f.ring.daemons_running(), what << ": a zringd exited\n" << f.logs());
  return number;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(netns, *boost::unit_test::precondition(Precondition()))

// Scenario 1: `ip link set DEV down` on one node's link while an op runs,
// on the switch's end or the node's own, for each method; while it is down
// another op must fail on every rank; then `up`, and the ring must recover.
BOOST_FIXTURE_TEST_CASE(link_cut_mid_op_then_restored, RingFixture) {
  Tally& tally = tallies()["link down (ip link set down)"];
  int trial = 0;
  for (const std::string& method : kMethods) {
    Clients clients(ring, net, method, 11 + trial, kSizes);
    RoundChecker checker(clients, node_names());
    std::uint64_t number = 0;
    for (Network::End end : {Network::End::hub, Network::End::node}) {
      const std::size_t victim = static_cast<std::size_t>(trial) % kNodes;
      const std::string what = method + ": link of " + NetnsRing::name(victim) + " cut at the " +
                               Network::to_string(end) + " end";
      number = rounds_with_fault(
          *this, clients, checker, number, [&] { net.set_link(victim, end, false); }, tally, what);
      // While the link is down, no op can complete anywhere.
      const auto down_from = Clock::now();
      const Verdict down =
          checked_round(clients, checker, number++, down_from, &tally, what + " (still down)");
      BOOST_TEST(down.ok == 0,
                 what << ": " << down.ok << " ranks got a result while the ring was cut");
      BOOST_TEST_MESSAGE(what << ": op while down: " << describe(down) << "; e.g. "
                              << down.first_error);
      net.set_link(victim, end, true);
      number = expect_recovery(*this, clients, checker, number, what);
      ++trial;
    }
  }
}

// Scenario 1b: the link goes down for less than the op deadline (0.3 to
// 0.8 s) mid-op and comes back by itself: TCP may carry the op through or
// the op fails; either way no hang, no wrong result, and the ring works after.
BOOST_FIXTURE_TEST_CASE(brief_link_flap_mid_op, RingFixture) {
  Tally& tally = tallies()["brief link flap (down 0.3-0.8 s)"];
  int trial = 0;
  for (const std::string& method : {std::string("quant:8"), std::string("none")}) {
    Clients clients(ring, net, method, 21 + trial, kSizes);
    RoundChecker checker(clients, node_names());
    const std::size_t victim = static_cast<std::size_t>(trial + 1) % kNodes;
    const Network::End end = trial == 0 ? Network::End::hub : Network::End::node;
    const auto down_for =
        std::chrono::milliseconds(std::uniform_int_distribution<int>(300, 800)(rng));
    const std::string what = method + ": link of " + NetnsRing::name(victim) + " down for " +
                             std::to_string(down_for.count()) + " ms at the " +
                             Network::to_string(end) + " end";
    std::string restore_error;
    std::optional<std::jthread> restore;
    std::uint64_t number = rounds_with_fault(
        *this, clients, checker, 0,
        [&] {
          net.set_link(victim, end, false);
          restore.emplace([&, down_for] {
            std::this_thread::sleep_for(down_for);
            try {
              net.set_link(victim, end, true);
            } catch (const std::exception& e) {
              restore_error = e.what();
            }
          });
        },
        tally, what);
    restore.reset();  // joins: the link is up again
    BOOST_TEST_REQUIRE(restore_error.empty(), what << ": " << restore_error);
    expect_recovery(*this, clients, checker, number, what);
    ++trial;
  }
}

// Scenario 2: a lossy, slow link (netem loss 5% / 30% with 20 ms delay, or
// the eBPF + tbf equivalent) on one node while ops run for a few seconds.
BOOST_FIXTURE_TEST_CASE(lossy_slow_link_gives_correct_results_or_errors, RingFixture) {
  BOOST_TEST_MESSAGE("link degradation by " << net.degradation_kind());
  struct Level {
    const char* name;
    Degradation how;
    const char* method;
    std::chrono::seconds duration;
  };
  const std::vector<Level> levels = {
      {"loss 5% delay 20ms", {5, 20, "200mbit"}, "quant:8", 5s},
      {"loss 30% delay 20ms", {30, 20, "50mbit"}, "none", 6s},
      {"loss 5% delay 20ms", {5, 20, "200mbit"}, "ef:topk:1%", 4s},
  };
  std::size_t victim = 2;
  for (const Level& level : levels) {
    Tally& tally = tallies()[std::string("degraded link: ") + level.name];
    Clients clients(ring, net, level.method, 31 + victim, kSizes);
    RoundChecker checker(clients, node_names());
    const std::string what =
        std::string(level.method) + ": " + level.name + " on " + NetnsRing::name(victim);
    std::uint64_t number = 0;
    checked_round(clients, checker, number++, Clock::now(), nullptr, what + " (before)");
    const long drops_before = net.dropped(victim);
    // The first degraded op starts as the link goes bad.
    InjectDuring inject;
    inject.action = [&] { net.degrade(victim, level.how); };
    const Round first = clients.run_round(number++, kGuard, &inject);
    BOOST_TEST_REQUIRE(first.injected.has_value());
    ++tally.injected;
    ++tally.mid_op;
    Verdict sum = checker.check(first, *first.injected);
    expect_sound(sum, what, number - 1);
    tally.add(sum);
    const auto began = Clock::now();
    while (Clock::now() - began < level.duration) {
      const auto started = Clock::now();
      const Verdict v = checked_round(clients, checker, number++, started, &tally, what);
      sum.ok += v.ok;
      sum.errors += v.errors;
      for (const auto& [code, n] : v.codes) sum.codes[code] += n;
      sum.worst_error_seconds = std::max(sum.worst_error_seconds, v.worst_error_seconds);
      if (sum.first_error.empty()) sum.first_error = v.first_error;
    }
    const long drops = net.dropped(victim) - drops_before;
    BOOST_TEST_MESSAGE(what << ": " << number - 1 << " rounds, " << describe(sum) << ", " << drops
                            << " packets dropped on the link; worst time to error "
                            << sum.worst_error_seconds << " s"
                            << (sum.first_error.empty() ? "" : "; e.g. " + sum.first_error));
    BOOST_TEST(drops > 0, what << ": the link dropped no packet: the fault was not in place");
    net.restore(victim);
    expect_recovery(*this, clients, checker, number, what);
    victim = (victim + 1) % kNodes;
  }
}

// Scenario 3: two nodes partitioned from the rest at once, mid-op.
BOOST_FIXTURE_TEST_CASE(partition_of_two_nodes_mid_op_then_healed, RingFixture) {
  Tally& tally = tallies()["partition of two nodes"];
  for (const std::string& method : {std::string("quant:8"), std::string("ef:topk:1%")}) {
    Clients clients(ring, net, method, 41, kSizes);
    RoundChecker checker(clients, node_names());
    const std::string what =
        method + ": " + NetnsRing::name(0) + " and " + NetnsRing::name(1) + " cut off";
    std::uint64_t number = 0;
    number = rounds_with_fault(
        *this, clients, checker, number,
        [&] {
          net.set_link(0, Network::End::hub, false);
          net.set_link(1, Network::End::hub, false);
        },
        tally, what);
    const Verdict down =
        checked_round(clients, checker, number++, Clock::now(), &tally, what + " (still down)");
    BOOST_TEST(down.ok == 0, what << ": " << down.ok << " ranks got a result while partitioned");
    net.set_link(0, Network::End::hub, true);
    net.set_link(1, Network::End::hub, true);
    expect_recovery(*this, clients, checker, number, what);
  }
}

// Scenario 3a: a partition that lasts long (8 timeouts), then healed.
// Meanwhile every node's heartbeats pile up unacknowledged on its TCP
// connections to the other side, whose retransmissions back off: kept,
// such a connection would carry them again only at the kernel's next
// retransmission, about 10 s after this repair (11 s measured before the
// data connections gave such bytes up after timeout_ms). The ring must be
// whole again, and an op work on every rank, within three timeouts of the
// repair: the connections given up, connected anew (a retry a second
// after a failed connect, each connect given up after two), and the node
// taken in at the next op boundary (docs/membership.md).
BOOST_FIXTURE_TEST_CASE(a_long_partition_heals_within_a_few_timeouts, RingFixture) {
  Clients clients(ring, net, "none", 45, kSizes);
  RoundChecker checker(clients, node_names());
  std::uint64_t number = 0;
  const Verdict before =
      checked_round(clients, checker, number++, Clock::now(), nullptr, "long partition");
  BOOST_TEST_REQUIRE(before.all_ok(), "before the partition: " << describe(before));
  net.set_link(0, Network::End::hub, false);
  net.set_link(1, Network::End::hub, false);
  std::this_thread::sleep_for(std::chrono::milliseconds(8 * kTimeoutMs));
  net.set_link(0, Network::End::hub, true);
  net.set_link(1, Network::End::hub, true);
  const auto repaired = Clock::now();
  bool whole = false;
  std::string last;
  while (!whole && Clock::now() - repaired < 60s) {
    const Verdict v =
        checked_round(clients, checker, number++, repaired, nullptr, "long partition, healed");
    whole = v.all_ok();
    last = describe(v) + " " + v.first_error;
    if (!whole) std::this_thread::sleep_for(200ms);
  }
  const double took = seconds(Clock::now() - repaired);
  BOOST_TEST_MESSAGE("long partition: an op worked on every rank "
                     << std::fixed << std::setprecision(2) << took << " s after the repair");
  BOOST_TEST_REQUIRE(whole, "no op worked on every rank within 60 s of the repair: " << last << "\n"
                                                                                     << logs());
  const double promised = 3 * kTimeoutMs / 1000.0;
  BOOST_TEST(took <= promised, "the first op that worked on every rank ended "
                                   << took << " s after the repair, beyond three timeouts ("
                                   << promised << " s)\n"
                                   << logs());
}

// Scenario 3b: netem reordering and duplication (TCP hides both; zring must
// not notice either). Needs netem.
BOOST_FIXTURE_TEST_CASE(reordered_and_duplicated_packets, RingFixture,
                        *boost::unit_test::precondition(NetemPrecondition())) {
  Tally& tally = tallies()["netem reorder 25% duplicate 5%"];
  Clients clients(ring, net, "quant:8", 51, kSizes);
  RoundChecker checker(clients, node_names());
  std::uint64_t number = 0;
  BOOST_TEST_REQUIRE(net.reorder_and_duplicate(1));
  ++tally.injected;
  for (int i = 0; i < 5; ++i)
    checked_round(clients, checker, number++, Clock::now(), &tally, "reorder/duplicate");
  net.restore(1);
  expect_recovery(*this, clients, checker, number, "reorder/duplicate");
}

// Scenario 4: the elastic ring. One node's link stays down: the other two
// (a majority) go on without it, with their average, and the cut node's
// rank gets errors; once the link is back the ring takes the node in again.
BOOST_FIXTURE_TEST_CASE(a_link_that_stays_down_leaves_the_others_going_on, ElasticRingFixture) {
  Tally& tally = tallies()["link down for good (elastic ring)"];
  Clients clients(ring, net, "none", 61, kSizes);
  RoundChecker checker(clients, node_names());
  std::uint64_t number = 0;
  const Verdict before =
      checked_round(clients, checker, number++, Clock::now(), nullptr, "elastic");
  BOOST_TEST_REQUIRE(before.all_ok(),
                     "before the cut: " << describe(before) << " " << before.first_error);
  const std::size_t victim = 2;
  const std::vector<std::size_t> others = {0, 1};
  net.set_link(victim, Network::End::hub, false);
  ++tally.injected;
  const auto cut = Clock::now();
  bool went_on = false;
  std::string last;
  while (!went_on && Clock::now() - cut < kGuard) {
    const Round round = clients.run_round(number++, kGuard);
    const Verdict v = checker.check(round, cut, &others);
    expect_sound(v, "elastic, link of " + NetnsRing::name(victim) + " down", round.number);
    tally.add(v);
    went_on = v.ok == others.size();
    last = describe(v) + " " + v.first_error;
  }
  BOOST_TEST_REQUIRE(went_on, "the two nodes with a link never went on without "
                                  << NetnsRing::name(victim) << ": " << last << "\n"
                                  << logs());
  BOOST_TEST_MESSAGE("elastic: the ring went on without " << NetnsRing::name(victim) << " "
                                                          << seconds(Clock::now() - cut)
                                                          << " s after the cut");
  net.set_link(victim, Network::End::hub, true);
  const auto repaired = Clock::now();
  // Taken in again: every daemon up (the cut node has no quorum alone). The
  // ring's connections are closed after timeout_ms of silence and connected
  // anew (docs/membership.md): here heard again within about a second of
  // the repair, taken in at the next op boundary; but a node that did not
  // pass on the FORM that first tried to keep it (the link was already
  // cut) is left out for 10 timeouts from then (docs/membership.md): about
  // 20 s here. The guard stays 60 s.
  BOOST_TEST_REQUIRE(ring.wait_up(zring::testing::scaled(60s)),
                     "the ring did not take " << NetnsRing::name(victim) << " in again within "
                                              << zring::testing::scaled(60s).count() << " ms\n"
                                              << logs());
  BOOST_TEST_MESSAGE("elastic: " << NetnsRing::name(victim) << " taken in again "
                                 << seconds(Clock::now() - repaired) << " s after the repair");
  bool whole = false;
  for (int attempt = 0; attempt < 6 && !whole; ++attempt) {
    const Round round = clients.run_round(number++, kGuard);
    const Verdict v = checker.check(round, repaired, &others);  // until the node is taken in
    expect_sound(v, "elastic, link of " + NetnsRing::name(victim) + " back", round.number);
    whole = v.all_ok();
    last = describe(v) + " " + v.first_error;
  }
  BOOST_TEST(whole, "no round worked on all three once the link was back: " << last);
  BOOST_TEST(ring.daemons_running(), "a zringd exited\n" << logs());
}

// Scenario 5: a 2|2 partition of four nodes, both sides running, with
// min_nodes 3 (the ring file's). Inside each namespace a blackhole route
// drops everything for the other side's two addresses, so each side still
// hears itself. Neither side may go on: every rank's op fails, and once
// the silence has lasted timeout_ms every node says there is no quorum.
// Healed, the ring of four comes back and its results are exact again.
BOOST_AUTO_TEST_CASE(a_two_two_partition_leaves_neither_side_going_on) {
  constexpr std::size_t kFour = 4;
  Network net(kFour);
  NetnsRing ring(net, ring_options(3));
  ring.start_all();
  BOOST_TEST_REQUIRE(ring.wait_up(zring::testing::scaled(30s)), "the ring of four is not up");
  Clients clients(ring, net, "none", 71, kSizes);
  RoundChecker checker(clients, node_names(kFour));
  std::uint64_t number = 0;
  const Verdict before = checker.check(clients.run_round(number++, kGuard), Clock::now());
  BOOST_TEST_REQUIRE(before.all_ok(), "before the partition: " << describe(before));
  const auto route = [&](const char* verb) {
    for (std::size_t a = 0; a < kFour; ++a)
      for (std::size_t b = 0; b < kFour; ++b)
        if ((a < 2) != (b < 2))
          run(net.in_node(a, {"ip", "route", verb, "blackhole", net.address(b) + "/32"}));
  };
  route("add");
  const auto cut = Clock::now();
  std::vector<bool> said(kFour, false);
  std::string last;
  while (std::count(said.begin(), said.end(), true) < static_cast<long>(kFour) &&
         Clock::now() - cut < 3 * kGuard) {
    const Round round = clients.run_round(number++, kGuard);
    const Verdict v = checker.check(round, cut);
    expect_sound(v, "2|2 partition", round.number);
    BOOST_TEST_REQUIRE(v.ok == 0u, "round " << round.number << ": " << v.ok
                                            << " ranks got a result during a 2|2 partition");
    for (std::size_t r = 0; r < kFour; ++r) {
      const Answer& a = round.answers[r];
      if (a.kind == Answer::Kind::error &&
          a.message.find("no quorum: 2 of the 4 listed nodes are reachable") != std::string::npos)
        said[r] = true;
      last = a.message;
    }
  }
  for (std::size_t r = 0; r < kFour; ++r)
    BOOST_TEST(said[r], "rank " << r << " never said there is no quorum; last: " << last);
  route("del");
  const auto healed = Clock::now();
  bool whole = false;
  while (!whole && Clock::now() - healed < 3 * kGuard) {
    const Round round = clients.run_round(number++, kGuard);
    // Three nodes are a quorum: a ring of the first three back may go on
    // before the coordinator takes the fourth in, averaging its own ranks
    // (every one of them the same bits: the checker compares them all).
    std::vector<std::size_t> answered;
    for (std::size_t r = 0; r < kFour; ++r)
      if (round.answers[r].kind == Answer::Kind::ok) answered.push_back(r);
    const bool three = answered.size() == kFour - 1;
    const Verdict v = checker.check(round, healed, three ? &answered : nullptr);
    expect_sound(v, "2|2 partition healed", round.number);
    whole = v.all_ok();
    last = describe(v) + " " + v.first_error;
  }
  BOOST_TEST(whole, "no round worked on all four once the partition healed: " << last);
  BOOST_TEST_MESSAGE("2|2 partition: no quorum on every node, the four together again "
                     << seconds(Clock::now() - healed) << " s after the healing");
}

BOOST_AUTO_TEST_SUITE_END()
