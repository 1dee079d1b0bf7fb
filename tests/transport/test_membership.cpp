// The membership protocol without sockets: Membership machines of a ring
// file's nodes, wired by a network that delivers, loses or cuts their
// messages, on a clock the test moves.
#include <boost/test/unit_test.hpp>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "transport/membership.hpp"

namespace {

using namespace std::chrono_literals;
using zring::ErrorCode;
using zring::collective::Clock;
using zring::collective::Deadline;
using zring::transport::Membership;
using zring::transport::MembershipOptions;
using zring::transport::PeerState;

using Members = std::vector<std::uint32_t>;

constexpr auto kTimeout = 1000ms;
constexpr auto kHeartbeat = 100ms;
constexpr auto kStep = 10ms;

// Nodes n0..n{count-1}; each one's machine, and what reaches whom.
class Network {
 public:
  explicit Network(std::size_t count, std::size_t min_nodes = 0)
      : count_(count), min_nodes_(min_nodes) {
    for (std::size_t n = 0; n < count; ++n) nodes_.push_back(make(n));
  }

  Membership& at(std::size_t n) { return *nodes_.at(n); }
  Deadline now() const { return now_; }

  // The node stops (its machine is kept, to read), or starts afresh.
  void stop(std::size_t n) { nodes_.at(n).reset(); }
  void start(std::size_t n) { nodes_.at(n) = make(n); }
  // The ring file's local_ranks node n starts with from now on (1 at first).
  void set_local_ranks(std::size_t n, std::uint32_t local_ranks) {
    local_ranks_.resize(count_, 1);
    local_ranks_.at(n) = local_ranks;
  }
  bool running(std::size_t n) const { return nodes_.at(n) != nullptr; }
  // No message between a and b, either way.
  void cut(std::size_t a, std::size_t b) {
    cut_.insert({a, b});
    cut_.insert({b, a});
  }
  void cut_one_way(std::size_t from, std::size_t to) { cut_.insert({from, to}); }
  void heal() { cut_.clear(); }
  // Messages of `kind` from `from` to `to` wait until release().
  void hold(std::size_t from, std::size_t to, zring::wire::RingKind kind) {
    held_kinds_.insert({from, to, kind});
  }
  void release() {
    held_kinds_.clear();
    for (auto& [from, to, header] : held_)
      if (running(to)) nodes_[to]->heard(from, header, now_);
    held_.clear();
    deliver();
  }

  // Moves the clock by `span`, ticking every running node each step and
  // delivering every message at once.
  void run(Clock::duration span) {
    const Deadline end = now_ + span;
    while (now_ < end) {
      for (std::size_t n = 0; n < count_; ++n)
        if (running(n)) nodes_[n]->tick(now_);
      deliver();
      now_ += kStep;
    }
  }

  // Runs until every node in `ring` is up in one generation whose members
  // are `ring`, for at most `limit`; true if it got there.
  bool settles_on(const Members& ring, Clock::duration limit = 5s) {
    for (Clock::duration spent{}; spent <= limit; spent += kStep) {
      if (agreed(ring)) return true;
      run(kStep);
    }
    return false;
  }

  bool agreed(const Members& ring) {
    const std::uint64_t g = at(ring.front()).generation();
    for (const std::uint32_t n : ring) {
      if (!running(n) || !at(n).up() || at(n).generation() != g || at(n).members() != ring)
        return false;
    }
    return true;
  }

 private:
  std::unique_ptr<Membership> make(std::size_t n) {
    MembershipOptions options;
    for (std::size_t i = 0; i < count_; ++i) {
      options.names.push_back("n" + std::to_string(i));
      options.labels.push_back("node 'n" + std::to_string(i) +
                               "' (tcp://127.0.0.1:" + std::to_string(7000 + i) + ")");
    }
    options.self = n;
    options.min_nodes = min_nodes_ != 0 ? min_nodes_ : count_ / 2 + 1;
    options.timeout = kTimeout;
    options.heartbeat = kHeartbeat;
    options.settings.nodes = 0xfeed;
    options.settings.local_ranks = n < local_ranks_.size() ? local_ranks_[n] : 1;
    options.settings.chunk_bytes = 1 << 20;
    return std::make_unique<Membership>(options, 1000 + n + 17 * starts_++, now_);
  }

  void deliver() {
    for (int round = 0; round < 1000; ++round) {
      bool any = false;
      for (std::size_t from = 0; from < count_; ++from) {
        if (!running(from)) continue;
        for (const auto& send : nodes_[from]->take_sends()) {
          any = true;
          if (held_kinds_.count({from, send.to, send.header.kind}))
            held_.push_back({from, send.to, send.header});
          else if (send.to < count_ && running(send.to) && !cut_.count({from, send.to}))
            nodes_[send.to]->heard(from, send.header, now_);
        }
      }
      if (!any) return;
    }
    BOOST_FAIL("the machines never stopped talking");
  }

  std::size_t count_;
  std::size_t min_nodes_;
  std::size_t starts_ = 0;
  std::vector<std::uint32_t> local_ranks_;
  Deadline now_ = Clock::now();
  std::vector<std::unique_ptr<Membership>> nodes_;
  std::set<std::pair<std::size_t, std::size_t>> cut_;
  std::set<std::tuple<std::size_t, std::size_t, zring::wire::RingKind>> held_kinds_;
  std::vector<std::tuple<std::size_t, std::size_t, zring::wire::RingHeader>> held_;
};

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(membership)

BOOST_AUTO_TEST_CASE(every_listed_node_heard_forms_one_ring_of_all) {
  Network net(4);
  BOOST_TEST(net.settles_on({0, 1, 2, 3}, 500ms));
  BOOST_TEST(net.at(0).last_change() == "formed [n0 n1 n2 n3]");
  for (std::size_t n = 0; n < 4; ++n) {
    BOOST_TEST(net.at(n).position() == n);
    BOOST_TEST(net.at(n).successor() == (n + 1) % 4);
    BOOST_TEST(net.at(n).predecessor() == (n + 3) % 4);
    BOOST_TEST((net.at(n).peer((n + 1) % 4, net.now()) == PeerState::member));
    BOOST_TEST((net.at(n).peer(n, net.now()) == PeerState::self));
  }
}

BOOST_AUTO_TEST_CASE(a_node_gone_for_good_is_dropped_and_the_op_in_flight_fails_naming_it) {
  Network net(4);
  BOOST_REQUIRE(net.settles_on({0, 1, 2, 3}));
  const std::uint64_t before = net.at(1).generation();
  (void)net.at(1).take_break();
  net.at(1).op_began();
  net.stop(2);
  net.run(kTimeout / 2);
  BOOST_TEST(net.at(1).up());  // not yet silent for a timeout
  BOOST_TEST(!net.at(1).take_break());
  BOOST_TEST(net.settles_on({0, 1, 3}, kTimeout + 500ms));
  BOOST_TEST(net.at(1).generation() != before);
  const auto broken = net.at(1).take_break();
  BOOST_REQUIRE(broken.has_value());
  BOOST_TEST((broken->code == ErrorCode::ring_changed));
  BOOST_TEST(contains(broken->text, "nothing heard from node 'n2' (tcp://127.0.0.1:7002) for "),
             broken->text);
  for (const std::size_t n : {0, 1, 3}) {
    BOOST_TEST(contains(net.at(n).last_change(), "[n0 n1 n2 n3] -> [n0 n1 n3]: "),
               net.at(n).last_change());
    BOOST_TEST((net.at(n).peer(2, net.now()) == PeerState::silent));
  }
  BOOST_TEST(net.at(3).predecessor() == 1u);
  BOOST_TEST(net.at(1).successor() == 3u);
}

BOOST_AUTO_TEST_CASE(a_node_adopting_a_new_ring_mid_op_fails_it_saying_how_the_ring_changed) {
  Network net(3);
  BOOST_REQUIRE(net.settles_on({0, 1, 2}));
  net.stop(2);
  BOOST_REQUIRE(net.settles_on({0, 1}, kTimeout + 1s));
  net.at(1).op_began();  // n1 is in an op when the coordinator takes n2 in
  (void)net.at(1).take_break();
  net.start(2);
  BOOST_REQUIRE(net.settles_on({0, 1, 2}, 2s));
  const auto broken = net.at(1).take_break();
  BOOST_REQUIRE(broken.has_value());
  BOOST_TEST((broken->code == ErrorCode::ring_changed));
  BOOST_TEST(broken->text ==
             "the ring re-formed during the op ([n0 n1] -> [n0 n1 n2]): taking in node 'n2'");
}

BOOST_AUTO_TEST_CASE(when_the_first_node_dies_the_next_one_coordinates) {
  Network net(4);
  BOOST_REQUIRE(net.settles_on({0, 1, 2, 3}));
  net.stop(0);
  BOOST_TEST(net.settles_on({1, 2, 3}, kTimeout + 1s));
  BOOST_TEST(net.at(2).coordinator(net.now()) == 1u);
  BOOST_TEST(net.at(3).successor() == 1u);
}

BOOST_AUTO_TEST_CASE(neither_side_of_a_partition_without_a_quorum_goes_on) {
  Network net(4, 3);
  BOOST_REQUIRE(net.settles_on({0, 1, 2, 3}));
  for (const std::size_t a : {0, 1})
    for (const std::size_t b : {2, 3}) net.cut(a, b);
  net.run(kTimeout + 2s);
  for (std::size_t n = 0; n < 4; ++n) {
    BOOST_TEST(!net.at(n).up(), "n" << n);
  }
  BOOST_TEST(net.at(0).down_reason() ==
             "no quorum: 2 of the 4 listed nodes are reachable ([n0 n1]; not heard for 1000 ms: "
             "[n2 n3]), and min_nodes is 3");
  BOOST_TEST(net.at(2).down_reason() ==
             "no quorum: 2 of the 4 listed nodes are reachable ([n2 n3]; not heard for 1000 ms: "
             "[n0 n1]), and min_nodes is 3");
  net.heal();
  BOOST_TEST(net.settles_on({0, 1, 2, 3}, 2s));
}

BOOST_AUTO_TEST_CASE(a_majority_side_goes_on_and_the_minority_waits) {
  Network net(5);  // min_nodes 3
  BOOST_REQUIRE(net.settles_on({0, 1, 2, 3, 4}));
  for (const std::size_t a : {0, 1})
    for (const std::size_t b : {2, 3, 4}) net.cut(a, b);
  BOOST_TEST(net.settles_on({2, 3, 4}, kTimeout + 2s));
  net.run(1s);
  BOOST_TEST(!net.at(0).up());
  BOOST_TEST(!net.at(1).up());
  BOOST_TEST(contains(net.at(1).down_reason(), "no quorum"), net.at(1).down_reason());
}

BOOST_AUTO_TEST_CASE(a_restarted_node_is_taken_in_between_two_ops_of_the_coordinator) {
  Network net(4);
  BOOST_REQUIRE(net.settles_on({0, 1, 2, 3}));
  net.stop(2);
  BOOST_REQUIRE(net.settles_on({0, 1, 3}, kTimeout + 1s));
  net.at(0).op_began();  // the coordinator is in an op: n2 waits
  net.start(2);
  net.run(1s);
  BOOST_TEST(net.agreed({0, 1, 3}));
  BOOST_TEST((net.at(0).peer(2, net.now()) == PeerState::live));
  net.at(0).op_ended();
  BOOST_TEST(net.settles_on({0, 1, 2, 3}, 1s));
  BOOST_TEST(contains(net.at(3).last_change(), "[n0 n1 n3] -> [n0 n1 n2 n3]: taking in node 'n2'"),
             net.at(3).last_change());
}

BOOST_AUTO_TEST_CASE(a_restart_inside_the_ring_makes_a_new_generation) {
  Network net(3, 3);
  BOOST_REQUIRE(net.settles_on({0, 1, 2}));
  const std::uint64_t before = net.at(0).generation();
  net.stop(1);
  net.start(1);  // back within the timeout: it never went silent
  BOOST_TEST(net.settles_on({0, 1, 2}, 2s));
  BOOST_TEST(net.at(0).generation() != before);
}

BOOST_AUTO_TEST_CASE(a_ring_waits_a_timeout_for_listed_nodes_that_have_not_started) {
  Network net(4);
  net.stop(3);
  net.run(kTimeout / 2);
  BOOST_TEST(!net.at(0).up());
  BOOST_TEST(contains(net.at(0).down_reason(),
                      "waiting up to 1000 ms after this node started to hear from [n3]"),
             net.at(0).down_reason());
  BOOST_TEST(net.settles_on({0, 1, 2}, kTimeout));
  net.start(3);  // a listed node that starts late
  BOOST_TEST(net.settles_on({0, 1, 2, 3}, 2s));
}

BOOST_AUTO_TEST_CASE(a_late_node_passes_over_a_first_node_the_ring_goes_on_without) {
  Network net(4);
  BOOST_REQUIRE(net.settles_on({0, 1, 2, 3}));
  net.stop(0);
  BOOST_REQUIRE(net.settles_on({1, 2, 3}, kTimeout + 1s));
  net.stop(3);
  net.start(3);  // never heard n0: it must not wait a timeout for it
  BOOST_TEST(net.settles_on({1, 2, 3}, kTimeout / 2));
}

BOOST_AUTO_TEST_CASE(a_node_that_cannot_be_reached_is_left_out_rather_than_keep_the_ring_down) {
  Network net(4);
  net.stop(3);
  BOOST_REQUIRE(net.settles_on({0, 1, 2}, kTimeout + 1s));
  // n3 comes up and is heard, but nothing reaches it from n2, its
  // predecessor: the FORM that takes it in never comes back.
  net.start(3);
  net.cut_one_way(2, 3);
  net.run(kTimeout / 4);
  BOOST_TEST(!net.at(0).up());  // trying to take n3 in
  BOOST_TEST(net.settles_on({0, 1, 2}, kTimeout + 1s));
  BOOST_TEST(net.at(0).last_change().find("node 'n3' did not pass on a FORM within 500 ms") == 0,
             net.at(0).last_change());
  net.run(3 * kTimeout);
  BOOST_TEST(net.agreed({0, 1, 2}));  // not tried again for a while
  net.heal();
  BOOST_TEST(net.settles_on({0, 1, 2, 3}, 10 * kTimeout + 2s));
}

BOOST_AUTO_TEST_CASE(a_coordinator_that_adopts_another_ones_ring_comes_up_in_it) {
  Network net(3);
  net.stop(0);
  BOOST_REQUIRE(net.settles_on({1, 2}, kTimeout + 1s));
  net.start(0);  // the first node is back: it coordinates, n1 stops forming its own
  BOOST_TEST(net.settles_on({0, 1, 2}, 2s));
  BOOST_TEST(net.at(1).coordinator(net.now()) == 0u);
}

BOOST_AUTO_TEST_CASE(one_listed_node_is_a_ring_at_once) {
  Network net(1);
  BOOST_TEST(net.agreed({0}));
  BOOST_TEST(net.at(0).generation() != 0u);
}

BOOST_AUTO_TEST_CASE(a_form_from_a_node_that_is_not_the_coordinator_is_ignored) {
  Network net(3);
  BOOST_REQUIRE(net.settles_on({0, 1, 2}));
  const std::uint64_t g = net.at(2).generation();
  zring::wire::RingHeader form;
  form.kind = zring::wire::RingKind::form;
  form.generation = 77;
  form.origin = 1;
  form.members = {1, 2};
  net.at(2).heard(1, form, net.now());  // n1 is not the coordinator while n0 lives
  BOOST_TEST(net.at(2).generation() == g);
  BOOST_TEST(net.at(2).up());
  form.origin = 0;
  form.members = {0, 2};  // a ring without n1, claimed by n1 as n0's
  net.at(2).heard(1, form, net.now());
  BOOST_TEST(net.at(2).generation() == g);
}

// Found in test_elastic under ASan: n1 adopted the new ring from its FORM
// and, before the UP reached it, asked its coordinator for a new ring of
// that very generation; n0, up in it, ended it, and the op that had begun
// on it failed a second time.
BOOST_AUTO_TEST_CASE(a_node_waiting_for_the_up_of_its_new_ring_does_not_ask_for_another) {
  Network net(3);
  BOOST_REQUIRE(net.settles_on({0, 1, 2}));
  net.hold(0, 1, zring::wire::RingKind::up);
  net.stop(2);
  net.run(kTimeout + 300ms);  // n2 found silent; n0 forms [n0 n1], n1 waits for the UP
  BOOST_REQUIRE(net.at(0).up());
  BOOST_REQUIRE((net.at(0).members() == Members{0, 1}));
  BOOST_REQUIRE(!net.at(1).up());
  const std::uint64_t g = net.at(0).generation();
  BOOST_REQUIRE(net.at(1).generation() == g);
  net.run(kTimeout / 2);  // n1 would have asked every 200 ms
  BOOST_TEST(net.at(0).up());
  BOOST_TEST(net.at(0).generation() == g);
  net.release();
  BOOST_TEST(net.agreed({0, 1}));
  BOOST_TEST(net.at(1).generation() == g);
}

// An op waits a timeout for a node that died: on its side the silence is
// the same length, so which is noticed first was a matter of a heartbeat.
// A member that missed its last two heartbeats is taken as gone.
BOOST_AUTO_TEST_CASE(an_op_that_times_out_on_a_member_that_missed_its_heartbeats_ends_the_ring) {
  Network net(3);
  BOOST_REQUIRE(net.settles_on({0, 1, 2}));
  (void)net.at(1).take_break();
  net.stop(2);
  net.run(kTimeout / 2);
  BOOST_TEST(!net.at(1).fail_if_a_member_is_missing(net.now()));  // n0 and n2 heard lately
  BOOST_TEST(net.at(1).up());
  net.run(kTimeout / 2 - 2 * kHeartbeat + 50ms);
  BOOST_REQUIRE(net.at(1).up());  // not yet silent for a timeout
  BOOST_TEST(net.at(1).fail_if_a_member_is_missing(net.now()));
  BOOST_TEST(!net.at(1).up());
  const auto broken = net.at(1).take_break();
  BOOST_REQUIRE(broken.has_value());
  BOOST_TEST((broken->code == ErrorCode::ring_changed));
  BOOST_TEST(contains(broken->text, "nothing heard from node 'n2' (tcp://127.0.0.1:7002) for "),
             broken->text);
  BOOST_TEST(net.settles_on({0, 1}, kTimeout));
}

// A node restarted with another ring file (here: another local_ranks) would
// cut ops differently or divide by another world size: it is left out at
// its first heartbeat, not after a timeout, named with what differs, and
// taken in again once it agrees.
BOOST_AUTO_TEST_CASE(a_node_with_other_settings_is_left_out_naming_them_until_it_agrees) {
  Network net(4);
  BOOST_REQUIRE(net.settles_on({0, 1, 2, 3}));
  (void)net.at(1).take_break();
  net.stop(3);
  net.set_local_ranks(3, 2);
  net.start(3);
  BOOST_TEST(net.settles_on({0, 1, 2}, kTimeout / 2));
  const auto broken = net.at(1).take_break();
  BOOST_REQUIRE(broken.has_value());
  BOOST_TEST((broken->code == ErrorCode::ring_changed));
  BOOST_TEST(contains(broken->text,
                      "node 'n3' (tcp://127.0.0.1:7003) has other settings than this node "
                      "(local_ranks 2 there, 1 here): its ring file differs, and it stays out of "
                      "the ring until they agree"),
             broken->text);
  net.run(2 * kTimeout);
  for (const std::size_t n : {0, 1, 2}) {
    BOOST_TEST((net.at(n).peer(3, net.now()) == PeerState::mismatched));
    BOOST_TEST(net.at(n).mismatch(3) == "local_ranks 2 there, 1 here");
    BOOST_TEST(net.at(n).mismatch((n + 1) % 3) == "");
  }
  BOOST_TEST(net.agreed({0, 1, 2}));
  BOOST_TEST(!net.at(3).up());
  BOOST_TEST((net.at(3).peer(0, net.now()) == PeerState::mismatched));
  BOOST_TEST(net.at(3).down_reason() ==
             "no quorum: 1 of the 4 listed nodes are reachable ([n3]; not heard for 1000 ms: []; "
             "with other settings: node 'n0' (tcp://127.0.0.1:7000): local_ranks 1 there, 2 here; "
             "node 'n1' (tcp://127.0.0.1:7001): local_ranks 1 there, 2 here; node 'n2' "
             "(tcp://127.0.0.1:7002): local_ranks 1 there, 2 here), and min_nodes is 3");
  net.stop(3);
  net.set_local_ranks(3, 1);
  net.start(3);
  BOOST_TEST(net.settles_on({0, 1, 2, 3}, 2 * kTimeout));
  BOOST_TEST((net.at(0).peer(3, net.now()) == PeerState::member));
  BOOST_TEST(net.at(0).mismatch(3) == "");
}

// Only HEARTBEATs and FORMs say a node's settings: an UP or REFORM of
// another generation is ignored, so a stale or forged one with other
// settings marks no node (it would end the ring).
BOOST_AUTO_TEST_CASE(an_up_or_reform_of_another_generation_marks_no_node_mismatched) {
  Network net(3);
  BOOST_REQUIRE(net.settles_on({0, 1, 2}));
  zring::wire::RingHeader stale;
  stale.generation = net.at(0).generation() + 1;
  stale.settings.local_ranks = 7;
  for (const auto kind : {zring::wire::RingKind::up, zring::wire::RingKind::reform}) {
    stale.kind = kind;
    net.at(0).heard(2, stale, net.now());
  }
  BOOST_TEST(net.at(0).mismatch(2) == "");
  BOOST_TEST((net.at(0).peer(2, net.now()) == PeerState::member));
  net.run(2 * kHeartbeat);
  BOOST_TEST(net.agreed({0, 1, 2}));
}

BOOST_AUTO_TEST_SUITE_END()
