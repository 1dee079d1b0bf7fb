// broadcast with real daemons on 127.0.0.1: from every root of a 3-node
// ring (and of a ring of 2 nodes x 2 local ranks), every rank ends with
// the root's bits, NaN payloads and -0.0 included, whichever way the values
// travel (the IPC frame, the shared buffer staged); ranks that disagree get
// manifest_mismatch; a root out of range is invalid_argument. Each client
// is a `ring_client --talk`, its tensors those of its rank.
#define BOOST_TEST_MODULE broadcast
#include <boost/test/unit_test.hpp>
#include <chrono>

#include "proc/local_ring.hpp"

using namespace zring::proc;

namespace {

constexpr int kTimeoutMs = 5000;
constexpr const char* kSeed = "41";

struct Ring {
  LocalRing ring;
  std::vector<Process> clients;  // one per rank, node by node

  Ring(std::size_t nodes, std::size_t local_ranks, const std::vector<std::string>& sizes)
      : ring([&] {
          LocalRingOptions o;
          o.zringd = ZRING_ZRINGD_PATH;
          o.nodes = nodes;
          o.local_ranks = local_ranks;
          o.timeout_ms = kTimeoutMs;
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

  // The same command on every rank at once (round, root and form: see
  // ring_client.cpp); every rank's answer.
  std::vector<std::string> broadcast(std::uint64_t round, std::size_t root,
                                     const std::string& form) {
    for (std::size_t r = 0; r < clients.size(); ++r)
      clients[r].send_line("broadcast " + std::to_string(round) + " " + file(round, r) + " " +
                           std::to_string(root) + " " + form);
    std::vector<std::string> answers;
    for (Process& c : clients)
      answers.push_back(c.read_line(std::chrono::seconds(60)).value_or(""));
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
