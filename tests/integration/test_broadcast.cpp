// broadcast with real daemons on 127.0.0.1: from every root of a 3-node
// ring (and of a ring of 2 nodes x 2 local ranks), every rank ends with
// the root's bits, NaN payloads and -0.0 included, whichever way the values
// travel (the IPC frame, the shared buffer staged); ranks that disagree get
// manifest_mismatch; a root out of range is invalid_argument; once a node
// died, broadcasts on the others give the root's bits or an error, never
// anything else, and soon work on the smaller ring. Each client is a
// `ring_client --talk`, its tensors those of its rank.
#define BOOST_TEST_MODULE broadcast
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <optional>

#include "proc/local_ring.hpp"

using namespace zring::proc;

namespace {

constexpr int kTimeoutMs = 5000;
constexpr const char* kSeed = "41";

struct Ring {
  LocalRing ring;
  std::vector<Process> clients;  // one per rank, node by node

  Ring(std::size_t nodes, std::size_t local_ranks, const std::vector<std::string>& sizes,
       int timeout_ms = kTimeoutMs)
      : ring([&] {
          LocalRingOptions o;
          o.zringd = ZRING_ZRINGD_PATH;
          o.nodes = nodes;
          o.local_ranks = local_ranks;
          o.timeout_ms = timeout_ms;
          o.heartbeat_ms = 100;
          o.chunk_bytes = 64 * 1024;  // a 1.2 MB op is some 20 chunks down the chain
          return o;
        }()) {
    ring.start_all();
    ring.wait_up();
    for (std::size_t r = 0; r < nodes * local_ranks; ++r) {
      clients.push_back(Process::spawn_talking(
          {ZRING_RING_CLIENT_PATH, "--talk", ring.ipc(r / local_ranks),
           std::to_string(r % local_ranks), r % 2 ? "ef:topk:1%" : "quant:4", kSeed,
           sizes.at(r % sizes.size()), std::to_string(3 * kTimeoutMs)},
          ring.dir() + "/client" + std::to_string(r) + ".err"));
      const auto ready = clients.back().read_line(std::chrono::seconds(30));
      BOOST_TEST_REQUIRE(ready.has_value());
      BOOST_TEST_REQUIRE(*ready == "ready " + std::to_string(r));
    }
  }

  std::string file(std::uint64_t round, std::size_t rank) const {
    return ring.dir() + "/broadcast" + std::to_string(round) + "-" + std::to_string(rank);
  }

  std::vector<std::size_t> all_ranks() const {
    std::vector<std::size_t> ranks;
    for (std::size_t r = 0; r < clients.size(); ++r) ranks.push_back(r);
    return ranks;
  }

  // The same command on `ranks` (all by default) at once (round, root and
  // form: see ring_client.cpp); their answers.
  std::vector<std::string> broadcast(std::uint64_t round, std::size_t root, const std::string& form,
                                     std::vector<std::size_t> ranks = {}) {
    if (ranks.empty()) ranks = all_ranks();
    for (const std::size_t r : ranks)
      clients[r].send_line("broadcast " + std::to_string(round) + " " + file(round, r) + " " +
                           std::to_string(root) + " " + form);
    std::vector<std::string> answers;
    for (const std::size_t r : ranks)
      answers.push_back(clients[r].read_line(std::chrono::seconds(60)).value_or(""));
    return answers;
  }

  // Every rank holds the bits rank `root` sent, which differ from its own.
  void check_bits_of(std::uint64_t round, std::size_t root) const {
    const std::string sent = read_file(file(round, root) + ".in");
    BOOST_TEST_REQUIRE(!sent.empty());
    for (std::size_t r = 0; r < clients.size(); ++r) {
      BOOST_TEST((read_file(file(round, r)) == sent),
                 "round " << round << ": rank " << r << " did not get rank " << root << "'s bits");
      if (r != root)
        BOOST_TEST((read_file(file(round, r) + ".in") != sent), "rank " << r << " sent the same");
    }
  }
};

void check_all(const std::vector<std::string>& answers, const std::string& want) {
  for (std::size_t r = 0; r < answers.size(); ++r)
    BOOST_TEST(answers[r].find(want) != std::string::npos, "rank " << r << ": " << answers[r]);
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_root_of_a_three_node_ring_reaches_every_rank_bit_for_bit) {
  // 5 + 300000 floats: staged through the shared buffer; "small": the
  // 5-float tensor alone, in the IPC frame.
  Ring ring(3, 1, {"5,300000"});
  std::uint64_t round = 0;
  for (std::size_t root = 0; root < 3; ++root) {
    for (const char* form : {"map", "views", "small"}) {
      BOOST_TEST_CONTEXT("root " << root << ", " << form) {
        const auto answers = ring.broadcast(round, root, form);
        check_all(answers, "ok");
        ring.check_bits_of(round, root);
      }
      ++round;
    }
  }
  // After broadcasts, an all-reduce still works: the same bits everywhere.
  for (std::size_t r = 0; r < 3; ++r) ring.clients[r].send_line("world");
  for (std::size_t r = 0; r < 3; ++r)
    BOOST_TEST(ring.clients[r].read_line(std::chrono::seconds(10)).value_or("") ==
               "world 3 rank " + std::to_string(r));
}

BOOST_AUTO_TEST_CASE(local_ranks_of_a_node_get_the_roots_bits_too) {
  Ring ring(2, 2, {"5,300000"});
  for (std::size_t root = 0; root < 4; ++root) {
    BOOST_TEST_CONTEXT("root " << root) {
      check_all(ring.broadcast(root, root, root % 2 ? "views" : "small"), "ok");
      ring.check_bits_of(root, root);
    }
  }
}

BOOST_AUTO_TEST_CASE(ranks_that_disagree_get_a_manifest_mismatch_and_a_bad_root_is_refused) {
  // Rank 2's second tensor has one value more.
  Ring ring(3, 1, {"5,300000", "5,300000", "5,300001"});
  check_all(ring.broadcast(0, 1, "map"), "error manifest_mismatch op ");
  check_all(ring.broadcast(0, 1, "map"),
            ": manifest mismatch: tensor 't001' has shape [300000] (300000 elements) on rank 0 "
            "(node 'n0'");
  // The first tensor alone agrees: the ring is still usable.
  check_all(ring.broadcast(1, 2, "small"), "ok");
  ring.check_bits_of(1, 2);
  // Root 3 of a world of 3, refused by every client before anything is sent.
  check_all(ring.broadcast(2, 3, "small"),
            "error invalid_argument broadcast: root 3 is not a rank: world_size() is 3, so root "
            "must be 0..2");
  check_all(ring.broadcast(3, 0, "small"), "ok");
  ring.check_bits_of(3, 0);
}

BOOST_AUTO_TEST_CASE(after_a_node_dies_the_smaller_ring_broadcasts_exactly_or_says_why) {
  Ring ring(3, 1, {"5,300000"}, 2000);
  check_all(ring.broadcast(0, 2, "map"), "ok");
  ring.check_bits_of(0, 2);
  ring.ring.daemon(2).kill();
  ring.clients[2].kill();
  // Broadcasts from rank 1 on ranks 0 and 1 until one works on both (the
  // elastic ring drops node 2 within its timeout). Every rank that answers
  // ok holds rank 1's bits, whatever the other one answered; every other
  // answer is an error saying why.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::optional<std::uint64_t> good;
  std::string failed;
  for (std::uint64_t round = 1; !good && std::chrono::steady_clock::now() < until; ++round) {
    const auto answers = ring.broadcast(round, 1, "map", {0, 1});
    const std::string sent = read_file(ring.file(round, 1) + ".in");
    for (std::size_t r = 0; r < 2; ++r) {
      if (answers[r] == "ok")
        BOOST_TEST((read_file(ring.file(round, r)) == sent), "round " << round << " rank " << r);
      else
        BOOST_TEST(answers[r].rfind("error ", 0) == 0, answers[r]);
    }
    if (answers[0] == "ok" && answers[1] == "ok")
      good = round;
    else
      failed += "\n  " + answers[0] + "\n  " + answers[1];
  }
  BOOST_TEST_REQUIRE(good.has_value(), "no broadcast worked on ranks 0 and 1:" << failed);
  BOOST_TEST_MESSAGE("broadcast " << *good << " worked on the smaller ring; before:" << failed);
  BOOST_TEST((read_file(ring.file(*good, 0) + ".in") != read_file(ring.file(*good, 1) + ".in")));
  ring.clients[1].send_line("world");
  BOOST_TEST(ring.clients[1].read_line(std::chrono::seconds(10)).value_or("") == "world 2 rank 1");
  // Rank 2 is gone: a broadcast from it is refused (root 2 of a world of
  // 2, as the last op's ring says), on both ranks alike.
  check_all(ring.broadcast(*good + 1, 2, "small", {0, 1}),
            "error invalid_argument broadcast: root 2 is not a rank: world_size() is 2");
}
