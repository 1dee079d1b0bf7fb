// test_ring_link.cpp - one RingLink conformance suite, run over both links:
// the in-process ring (collective/inproc_link.hpp) and ZmqRing on 127.0.0.1
// (transport/zmq_ring.hpp), as Gloo's transport tests and tensorpipe's
// connection tests run one suite over every transport.
//
// Each case runs one op on a ring of threads (one per node). What every
// link must do: messages from the predecessor arrive in order and intact
// (0 bytes to several MiB), every node sends and receives at once, a ring
// collective gives the exact sums, and recv throws timeout naming the
// predecessor when it is silent. Where the links differ they say so: when a
// peer goes away, the in-process ring (which has no membership) times out
// naming it, ZmqRing fails the op with ring_changed naming it.
#include <algorithm>
#include <atomic>
#include <barrier>
#include <boost/mpl/list.hpp>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>
#include <zring/error.hpp>

#include "codec/error_feedback.hpp"
#include "collective/allreduce_op.hpp"
#include "collective/inproc_link.hpp"
#include "collective/lanes.hpp"
#include "collective/ring_allreduce.hpp"
#include "collective/workspace.hpp"
#include "proc/process.hpp"
#include "ring_links.hpp"
#include "status.hpp"
#include "support/time_scale.hpp"
#include "transport/zmq_ring.hpp"

namespace {

// The links, running an op, and the helpers' names (ring_links.hpp).
using namespace zring::transport_test;

using Links = boost::mpl::list<InprocLinks, ZmqLinks, ZmqOnlyLinks>;

// --- the cases -----------------------------------------------------------------------

BOOST_AUTO_TEST_SUITE(ring_link)

BOOST_AUTO_TEST_CASE_TEMPLATE(describes_its_ring, L, Links) {
  L links(3);
  for (std::size_t n = 0; n < 3; ++n) {
    BOOST_TEST(links.link(n).node() == n);
    BOOST_TEST(links.link(n).nodes() == 3u);
  }
  // Every node names every other the same way, and no two alike.
  for (std::size_t n = 0; n < 3; ++n)
    for (std::size_t other = 0; other < 3; ++other) {
      BOOST_TEST(links.link(n).describe(other) == links.link(0).describe(other));
      if (other != n) BOOST_TEST(links.link(0).describe(other) != links.link(0).describe(n));
    }
  BOOST_TEST_MESSAGE(L::kName << " names node 1 " << links.link(0).describe(1));
}

// Messages from the predecessor arrive in the order sent, each with its
// tag and every byte, from 0 bytes to 4 MiB; on a ring of two, the two
// directions between one pair of nodes at once.
BOOST_AUTO_TEST_CASE_TEMPLATE(messages_arrive_in_order_and_intact, L, Links) {
  for (const std::size_t nodes : {2u, 3u}) {
    L links(nodes);
    const std::vector<Received> got = exchange_sizes(links);
    for (std::size_t n = 0; n < nodes; ++n) {
      const std::size_t from = (n + nodes - 1) % nodes;
      BOOST_TEST_CONTEXT(L::kName << ", " << nodes << " nodes, node " << n) {
        BOOST_TEST_REQUIRE(got[n].tags.size() == kSizes.size());
        for (std::size_t i = 0; i < kSizes.size(); ++i) {
          BOOST_TEST((got[n].tags[i] == tag_of(from, i)), "message " << i << " has another tag");
          BOOST_TEST(got[n].payloads[i].size() == kSizes[i]);
          BOOST_TEST((got[n].payloads[i] == payload_of(from, i, kSizes[i])),
                     "message " << i << " differs");
        }
        BOOST_TEST(got[n].extra == 0u);
      }
    }
  }
}

// A payload is the receiver's own: it may write into it and send it on.
// Each node's message travels the whole ring, every node adding its index
// to every byte, and comes back to its origin with every node's mark;
// all nodes send and receive at the same time.
BOOST_AUTO_TEST_CASE_TEMPLATE(messages_go_round_the_ring, L, Links) {
  constexpr std::size_t kNodes = 3;
  constexpr std::size_t kBytes = 300000;
  L links(kNodes);
  std::vector<std::vector<std::uint8_t>> back(kNodes);
  check_no_failure(run_op(links, [&](std::size_t n, RingLink& link, std::barrier<>&) {
    const auto deadline = Clock::now() + scaled(10s);
    link.send(tag_of(n, 0),
              Bytes::take(std::make_shared<std::vector<std::uint8_t>>(payload_of(n, 0, kBytes))));
    for (std::size_t hop = 1; hop < kNodes; ++hop) {
      Message msg = link.recv(deadline);
      auto* bytes = const_cast<std::uint8_t*>(msg.payload.data());
      for (std::size_t i = 0; i < msg.payload.size(); ++i)
        bytes[i] = static_cast<std::uint8_t>(bytes[i] + n);
      ChunkTag tag = msg.tag;
      ++tag.hop;
      link.send(tag, std::move(msg.payload));
    }
    Message home = link.recv(deadline);
    if (home.tag.segment != n || home.tag.hop != kNodes)
      throw std::runtime_error("node " + std::to_string(n) + " got another node's message back");
    back[n].assign(home.payload.data(), home.payload.data() + home.payload.size());
  }));
  for (std::size_t n = 0; n < kNodes; ++n) {
    std::vector<std::uint8_t> expect = payload_of(n, 0, kBytes);
    const std::size_t marks = (0 + 1 + 2) - n;  // every other node's index
    for (auto& b : expect) b = static_cast<std::uint8_t>(b + marks);
    BOOST_TEST((back[n] == expect), L::kName << ": node " << n << "'s message came back changed");
  }
}

// The summaries' way (RingLink::send_to): every node sends a summary (hop
// 0, its own index as origin) and two data pieces straight to every other
// node; each gets every other node's, each sender's in order, intact. What
// a node puts back comes first, in order; timed_out names the node given.
BOOST_AUTO_TEST_CASE_TEMPLATE(send_to_reaches_every_node_and_put_back_comes_first, L, Links) {
  constexpr std::size_t kNodes = 3;
  L links(kNodes);
  std::vector<std::map<std::size_t, std::vector<Message>>> got(kNodes);  // per node, per origin
  std::vector<std::vector<ChunkTag>> again(kNodes), put(kNodes);
  std::vector<std::string> named(kNodes);
  ServicingBarrier all_in(kNodes);
  const auto tag = [](Phase phase, std::size_t origin, std::size_t chunk) {
    return ChunkTag{phase, static_cast<std::uint32_t>(origin), static_cast<std::uint32_t>(chunk),
                    0};
  };
  check_no_failure(run_op(links, [&](std::size_t n, RingLink& link, std::barrier<>&) {
    for (std::size_t to = 0; to < kNodes; ++to) {
      if (to == n) continue;
      for (std::size_t i = 0; i < 3; ++i)
        link.send_to(to, tag(i == 0 ? Phase::manifest : Phase::blobs, n, i),
                     Bytes::take(std::make_shared<std::vector<std::uint8_t>>(
                         payload_of(n, i, i == 2 ? 70000 : 100))));
    }
    const auto deadline = Clock::now() + scaled(10s);
    std::vector<Message> all;
    for (std::size_t k = 0; k < 3 * (kNodes - 1); ++k) {
      all.push_back(link.recv(deadline));
      got[n][all.back().tag.segment].push_back(all.back());
    }
    all_in.arrive_and_wait(links, n);  // every node has all it waits for
    put[n] = {all[3].tag, all[1].tag};
    link.put_back({all[3], all[1]});
    for (int k = 0; k < 2; ++k) again[n].push_back(link.recv(deadline).tag);
    try {
      link.timed_out((n + 1) % kNodes);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::timeout) named[n] = e.what();
    }
    all_in.arrive_and_wait(links, n);
  }));
  for (std::size_t n = 0; n < kNodes; ++n) {
    BOOST_TEST_CONTEXT(L::kName << ", node " << n) {
      BOOST_TEST(got[n].count(n) == 0u);
      for (std::size_t from = 0; from < kNodes; ++from) {
        if (from == n) continue;
        const std::vector<Message>& msgs = got[n][from];
        BOOST_TEST_REQUIRE(msgs.size() == 3u, "from node " << from);
        for (std::size_t i = 0; i < 3; ++i) {
          BOOST_TEST((msgs[i].tag == tag(i == 0 ? Phase::manifest : Phase::blobs, from, i)));
          const std::vector<std::uint8_t> bytes(msgs[i].payload.data(),
                                                msgs[i].payload.data() + msgs[i].payload.size());
          BOOST_TEST((bytes == payload_of(from, i, i == 2 ? 70000 : 100)), "message " << i);
        }
      }
      BOOST_TEST_REQUIRE(again[n].size() == 2u);
      BOOST_TEST((again[n][0] == put[n][0] && again[n][1] == put[n][1]),
                 "not in the order put back");
      const std::string other = links.link(n).describe((n + 1) % kNodes);
      BOOST_TEST(named[n].find("timed out") != std::string::npos, named[n]);
      BOOST_TEST(named[n].find(other) != std::string::npos, named[n] << " does not name " << other);
    }
  }
}

// ring_allreduce over the link, round the ring and in the direct schedule
// (RingOptions::direct_bytes): integers, so the float sums are exact in any
// order and every node must hold exactly the reference sums.
namespace {
template <class L>
void ring_allreduce_gives_exact_sums_with(std::size_t direct_bytes) {
  constexpr std::size_t kNodes = 3;
  constexpr std::size_t kElements = 100003;  // segments of unequal length, many chunks
  L links(kNodes);
  std::vector<std::vector<float>> local(kNodes, std::vector<float>(kElements));
  std::vector<float> reference(kElements, 0.0f);
  for (std::size_t n = 0; n < kNodes; ++n)
    for (std::size_t i = 0; i < kElements; ++i) {
      local[n][i] = static_cast<float>(static_cast<int>((i * 31 + n * 977) % 2001) - 1000);
      reference[i] += local[n][i];
    }
  std::vector<std::vector<float>> result(kNodes, std::vector<float>(kElements, -1.0f));
  zring::collective::RingOptions options;
  options.chunk_bytes = 16384;
  options.timeout = scaled(10s);
  options.direct_bytes = direct_bytes;
  check_no_failure(run_op(links, [&](std::size_t n, RingLink& link, std::barrier<>&) {
    zring::collective::RingStats stats;
    zring::collective::ring_allreduce(link, zring::collective::FloatLane{}, local[n].data(),
                                      result[n].data(), kElements, options, stats);
  }));
  for (std::size_t n = 0; n < kNodes; ++n)
    BOOST_TEST((result[n] == reference), L::kName << ", direct_bytes " << direct_bytes << ": node "
                                                  << n << " has other sums");
}
}  // namespace

BOOST_AUTO_TEST_CASE_TEMPLATE(ring_allreduce_gives_exact_sums, L, Links) {
  for (const std::size_t direct_bytes : {std::size_t{0}, std::size_t{1} << 30})
    ring_allreduce_gives_exact_sums_with<L>(direct_bytes);
}

namespace {
// Node n's values of the exact-average cases: small integers, whose sums
// and average are exact.
std::vector<std::vector<float>> integer_values(std::size_t nodes, std::size_t elements) {
  std::vector<std::vector<float>> values(nodes, std::vector<float>(elements));
  for (std::size_t n = 0; n < nodes; ++n)
    for (std::size_t i = 0; i < elements; ++i)
      values[n][i] = static_cast<float>(static_cast<int>((i * 17 + n * 101) % 513) - 256);
  return values;
}

std::vector<float> exact_average(const std::vector<std::vector<float>>& values) {
  std::vector<float> average(values[0].size(), 0.0f);
  for (const auto& v : values)
    for (std::size_t i = 0; i < v.size(); ++i) average[i] += v[i];
  for (float& a : average) a /= static_cast<float>(values.size());
  return average;
}

// One whole op of method none (summaries, then the data) on this node,
// never gathered; direct_bytes chooses the schedule.
std::vector<float> average_op(RingLink& link, std::vector<float>& values, std::size_t nodes,
                              std::size_t direct_bytes) {
  zring::collective::OpContext context;
  context.world_size = nodes;
  context.local_ranks = 1;
  context.op_seed = 7;
  context.ring.chunk_bytes = 4096;
  context.ring.gather_bytes = 0;  // round the ring, or direct
  context.ring.direct_bytes = direct_bytes;
  context.ring.timeout = scaled(10s);
  zring::collective::OpInput input;
  input.manifest.method = "none";
  zring::collective::TensorSpec spec;
  spec.name = "t";
  spec.shape.push_back(values.size());
  spec.numel = values.size();
  input.manifest.tensors.push_back(spec);
  input.ranks.push_back(values.data());
  std::vector<zring::codec::ErrorFeedback> residuals(1);
  zring::collective::Workspace workspace;
  zring::collective::OpOutput out =
      zring::collective::run_allreduce(link, context, input, residuals, workspace);
  return std::vector<float>(out.values.get(), out.values.get() + out.elements);
}
}  // namespace

// A whole op (summaries, then the data) with method none: every node gets
// the average, the same bits as summing integers and dividing by 3.
BOOST_AUTO_TEST_CASE_TEMPLATE(run_allreduce_gives_the_exact_average, L, Links) {
  constexpr std::size_t kNodes = 3;
  L links(kNodes);
  std::vector<std::vector<float>> values = integer_values(kNodes, 5000);
  const std::vector<float> reference = exact_average(values);
  std::vector<std::vector<float>> result(kNodes);
  check_no_failure(run_op(links, [&](std::size_t n, RingLink& link, std::barrier<>&) {
    result[n] = average_op(link, values[n], kNodes, 0);
  }));
  for (std::size_t n = 0; n < kNodes; ++n)
    BOOST_TEST((result[n] == reference), L::kName << ": node " << n << " has another average");
}

// Nodes 0 and 1 begin an op while node 2 is still between ops (its thread
// services the ring): what they send right behind their summaries (their
// values for node 2 as an owner, or node 1's hop 1 of its segment) is kept
// for the op, not dropped, and every node gets the exact average.
BOOST_AUTO_TEST_CASE(data_sent_behind_a_summary_waits_for_a_node_that_begins_late) {
  constexpr std::size_t kNodes = 3;
  for (const std::size_t direct_bytes : {std::size_t{0}, std::size_t{1} << 30}) {
    BOOST_TEST_INFO("direct_bytes " << direct_bytes);
    ZmqLinks links(kNodes);
    std::vector<std::vector<float>> values = integer_values(kNodes, 5000);
    const std::vector<float> reference = exact_average(values);
    std::vector<std::vector<float>> result(kNodes);
    std::vector<std::optional<Status>> failures(kNodes);
    {
      std::vector<std::jthread> threads;
      for (std::size_t n = 0; n < kNodes; ++n)
        threads.emplace_back([&, n] {
          try {
            if (n == 2) {
              const auto until = Clock::now() + scaled(300ms);
              while (Clock::now() < until) links.ring(2).service(until, nullptr);
            }
            links.begin_op(n);
            result[n] = average_op(links.link(n), values[n], kNodes, direct_bytes);
            links.end_op(n, std::nullopt);
          } catch (const Error& e) {
            failures[n] = Status::of(e);
            try {
              links.end_op(n, failures[n]);
            } catch (const std::exception&) {  // the failure is what counts
            }
          }
        });
    }
    check_no_failure(failures);
    for (std::size_t n = 0; n < kNodes; ++n)
      BOOST_TEST((result[n] == reference), "node " << n << " has another average");
    BOOST_TEST(links.ring(2).counters().dropped == 0u, links.ring(2).counters().last_drop);
  }
}

// A predecessor that is there but sends nothing: recv_until returns nothing
// at its deadline, recv throws timeout naming the predecessor.
BOOST_AUTO_TEST_CASE_TEMPLATE(a_silent_predecessor_times_out, L, Links) {
  L links(3);
  const std::string predecessor = links.link(1).describe(0);
  bool nothing = false;
  const std::vector<std::optional<Status>> failures =
      run_op(links, [&](std::size_t n, RingLink& link, std::barrier<>& sync) {
        // The others wait on the barrier (not on the link) until node 1 has
        // failed, so that nothing node 1 sends when it ends the op reaches
        // them mid-op.
        if (n != 1) return sync.arrive_and_wait();
        nothing = !link.recv_until(Clock::now() + 100ms);
        std::optional<Error> failed;
        try {
          (void)link.recv(Clock::now() + 300ms);
        } catch (const Error& e) {
          failed = e;
        }
        sync.arrive_and_wait();
        if (failed) throw *failed;
      });
  BOOST_TEST(nothing);
  if (failures[1]) BOOST_TEST_MESSAGE(L::kName << ": " << failures[1]->text);
  BOOST_TEST(!failures[0]);
  BOOST_TEST(!failures[2]);
  BOOST_TEST_REQUIRE(failures[1].has_value());
  BOOST_TEST(failures[1]->code == ErrorCode::timeout);
  BOOST_TEST(failures[1]->text.find("timed out") != std::string::npos, failures[1]->text);
  BOOST_TEST(failures[1]->text.find(predecessor) != std::string::npos,
             failures[1]->text << " does not name " << predecessor);
}

// A wake from another thread ends a recv_until long before its deadline,
// with nothing; recv, woken, still waits out its deadline and then throws
// timeout (a wake is never taken for one).
BOOST_AUTO_TEST_CASE_TEMPLATE(a_wake_ends_recv_until_but_not_recv, L, Links) {
  L links(3);
  bool nothing = false;
  bool early = false;
  bool waited_out = false;
  const std::vector<std::optional<Status>> failures =
      run_op(links, [&](std::size_t n, RingLink& link, std::barrier<>& sync) {
        if (n != 1) return sync.arrive_and_wait();
        const auto deadline = Clock::now() + 60s;
        {
          std::jthread waker([&link] {
            std::this_thread::sleep_for(20ms);
            link.wake();
          });
          nothing = !link.recv_until(deadline);
          early = Clock::now() < deadline;
        }
        link.wake();  // a wake that nobody waits for yet: the next wait ends
        const auto recv_deadline = Clock::now() + 200ms;
        std::optional<Error> failed;
        try {
          (void)link.recv(recv_deadline);
        } catch (const Error& e) {
          failed = e;
        }
        waited_out = Clock::now() >= recv_deadline;
        sync.arrive_and_wait();
        if (failed) throw *failed;
      });
  BOOST_TEST(nothing);
  BOOST_TEST(early);
  BOOST_TEST(waited_out);
  BOOST_TEST(!failures[0]);
  BOOST_TEST(!failures[2]);
  BOOST_TEST_REQUIRE(failures[1].has_value());
  BOOST_TEST(failures[1]->code == ErrorCode::timeout, failures[1]->text);
}

// Node 2 goes away mid-op: its successor (node 0) and node 1 fail the op
// naming it, with the code the link gives (see InprocLinks/ZmqLinks).
BOOST_AUTO_TEST_CASE_TEMPLATE(a_peer_that_goes_away_is_named, L, Links) {
  L links(3);
  const std::string gone = links.link(0).describe(2);
  const std::vector<std::optional<Status>> failures =
      run_op(links, [&](std::size_t n, RingLink& link, std::barrier<>&) {
        if (n == 2) {
          links.stop(2);
          return;
        }
        const auto deadline = Clock::now() + L::peer_gone_wait();
        if (n == 0) (void)link.recv(deadline);  // from node 2
        if (n == 1) (void)link.recv(deadline);  // node 0 sends nothing either
      });
  BOOST_TEST(!failures[2]);
  for (const std::size_t n : {0u, 1u}) {
    BOOST_TEST_CONTEXT(L::kName << ", node " << n) {
      BOOST_TEST_REQUIRE(failures[n].has_value());
      BOOST_TEST_MESSAGE(L::kName << ", node " << n << ": " << failures[n]->text);
      BOOST_TEST(failures[n]->code == L::kPeerGone, failures[n]->text);
      // Node 0 names its predecessor; on ZmqRing node 1 names it too (its
      // ring changed because node 2 fell silent).
      if (n == 0 || L::kPeerGone == ErrorCode::ring_changed)
        BOOST_TEST(failures[n]->text.find(gone) != std::string::npos,
                   failures[n]->text << " does not name " << gone);
    }
  }
}

// A ring change before this node knew every summary: the op runs again on
// the next ring only if the node sent nothing but its summary. With data
// behind it (a small op's values, what a schedule sends ahead), another
// node may have finished the op with it, so this one fails it instead of
// running it again an op behind.
BOOST_AUTO_TEST_CASE(an_op_runs_again_after_a_ring_change_only_if_only_its_summary_went_out) {
  for (const bool data : {false, true}) {
    BOOST_TEST_CONTEXT((data ? "summary and data" : "summary alone")) {
      ZmqLinks links(3);
      links.begin_op(0);
      std::jthread peer([&](std::stop_token stop) {  // node 1 goes on; node 2 is gone
        while (!stop.stop_requested()) links.ring(1).service(Clock::now() + 20ms, nullptr);
      });
      RingLink& link = links.link(0);
      for (const std::size_t to : {1u, 2u})
        link.send_to(to, ChunkTag{Phase::manifest, 0, 0, 0}, Bytes::copy_of("s", 1));
      if (data) link.send_to(1, ChunkTag{Phase::blobs, 0, 0, 0}, Bytes::copy_of("d", 1));
      links.stop(2);
      std::optional<Status> failed;
      try {
        (void)link.recv(Clock::now() + ZmqLinks::peer_gone_wait());
      } catch (const Error& e) {
        failed = Status::of(e);
      }
      BOOST_REQUIRE(failed.has_value());
      BOOST_TEST(failed->code == ErrorCode::ring_changed, failed->text);
      BOOST_TEST(links.ring(0).op_may_run_again() == !data);
      links.end_op(0, failed);
    }
  }
}

// A node whose thread did not run for a timeout (its zringd was stopped)
// sent nothing meanwhile, so its peers dropped it and failed their copy of
// its op. When it runs again its op fails for good (it must not run again
// on the next ring, paired with the others' next op), before it reads what
// came meanwhile; it says why once, and its ring is down.
BOOST_AUTO_TEST_CASE(a_node_whose_thread_did_not_run_for_a_timeout_fails_its_op_for_good) {
  ZmqLinks links(2);
  links.begin_op(0);
  std::jthread peer([&](std::stop_token stop) {  // stopped and joined also when a check fails
    while (!stop.stop_requested()) links.ring(1).service(Clock::now() + 20ms, nullptr);
  });
  std::this_thread::sleep_for(scaled(ZmqLinks::kTimeout) + 500ms);  // node 0 runs nothing
  std::optional<std::string> failed;
  ErrorCode code = ErrorCode::internal;
  try {
    (void)links.link(0).recv(Clock::now() + ZmqLinks::peer_gone_wait());
  } catch (const Error& e) {
    failed = e.what();
    code = e.code();
  }
  BOOST_REQUIRE(failed.has_value());
  BOOST_TEST(code == ErrorCode::peer_lost, *failed);
  BOOST_TEST(failed->find("zringd did not run for ") != std::string::npos, *failed);
  BOOST_TEST(failed->find("the other nodes have dropped this one") != std::string::npos, *failed);
  BOOST_TEST(!links.ring(0).op_may_run_again());
  BOOST_TEST(!links.ring(0).up());
  const std::optional<zring::transport::ZmqRing::Stall> stall = links.ring(0).take_stall();
  BOOST_REQUIRE(stall.has_value());
  BOOST_TEST(failed->find(stall->why) != std::string::npos, *failed);
  BOOST_TEST(!links.ring(0).take_stall().has_value());  // said once
  links.end_op(0, Status{code, *failed});
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
