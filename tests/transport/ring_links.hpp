// ring_links.hpp - the links the RingLink tests run over, and what they
// share: the in-process ring, ZmqRing on 127.0.0.1 with and without its TCP
// connections, one op run on a thread per node, and messages whose every
// byte says where it came from.
#pragma once

#include <algorithm>
#include <atomic>
#include <barrier>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>
#include <zring/error.hpp>

#include "collective/inproc_link.hpp"
#include "proc/process.hpp"
#include "status.hpp"
#include "support/time_scale.hpp"
#include "transport/zmq_ring.hpp"

namespace zring::transport_test {

using namespace std::chrono_literals;
using zring::Error;
using zring::ErrorCode;
using zring::Status;
using zring::collective::Bytes;
using zring::collective::ChunkTag;
using zring::collective::Clock;
using zring::collective::Message;
using zring::collective::Phase;
using zring::collective::RingLink;
using zring::testing::scaled;

// --- the links ---------------------------------------------------------------------

// The in-process ring: nothing to start, and no membership: a peer that
// goes away is only a predecessor that says nothing.
class InprocLinks {
 public:
  static constexpr const char* kName = "InprocRing";
  static constexpr ErrorCode kPeerGone = ErrorCode::timeout;

  explicit InprocLinks(std::size_t nodes) : ring_(nodes) {}
  [[nodiscard]] std::size_t nodes() const { return ring_.nodes(); }
  RingLink& link(std::size_t n) { return ring_.link(n); }
  void begin_op(std::size_t) {}
  void end_op(std::size_t, const std::optional<Status>&) {}
  void stop(std::size_t) {}  // its thread just ends
  // A node with nothing to do until `until`: nothing waits to be sent.
  void idle(std::size_t, Clock::time_point until) { std::this_thread::sleep_until(until); }
  // How long a node waits for a peer that went away before the link says so.
  static Clock::duration peer_gone_wait() { return scaled(500ms); }

 private:
  zring::collective::InprocRing ring_;
};

// ZmqRing on 127.0.0.1, one ZeroMQ context per node as in zringd, ports
// from proc::free_ports. The constructor forms the ring (every node
// services it on its own thread until all are up); each node's ZmqRing is
// then used by one thread at a time (threads start and join in between).
template <bool kTcp>
class ZmqLinksOf {
 public:
  static constexpr const char* kName = kTcp ? "ZmqRing" : "ZmqRing without TCP connections";
  static constexpr ErrorCode kPeerGone = ErrorCode::ring_changed;
  static constexpr auto kTimeout = 2000ms;  // the membership timeout (scaled)
  static constexpr auto kHeartbeat = 100ms;

  explicit ZmqLinksOf(std::size_t nodes) : contexts_(nodes) {
    // A port taken between free_ports and the bind: try other ports. A
    // ring that does not form: try a new one (said in the log). In CI under
    // load, three in-process rings sometimes did not all come up within 10
    // membership timeouts (cause not found; the daemons' tests form rings
    // of real processes).
    for (int attempt = 0;; ++attempt) {
      try {
        start(nodes);
      } catch (const Error& e) {
        rings_.clear();
        if (e.code() != ErrorCode::connection_failed || attempt == 2) throw;
        continue;
      }
      const std::string problem = form();
      if (problem.empty()) break;
      if (attempt == 2) throw std::runtime_error(problem);
      BOOST_TEST_MESSAGE("ZmqRing: " << problem << "; trying a new ring");
      rings_.clear();
    }
  }
  ZmqLinksOf(const ZmqLinksOf&) = delete;
  ZmqLinksOf& operator=(const ZmqLinksOf&) = delete;

  [[nodiscard]] std::size_t nodes() const { return rings_.size(); }
  RingLink& link(std::size_t n) { return *rings_.at(n); }
  zring::transport::ZmqRing& ring(std::size_t n) { return *rings_.at(n); }
  void begin_op(std::size_t n) {
    rings_.at(n)->between_ops();
    (void)rings_.at(n)->begin_op();
  }
  void end_op(std::size_t n, const std::optional<Status>& failure) {
    if (rings_.at(n)) rings_[n]->end_op(failure);
  }
  // The node's sockets close, as when its zringd exits.
  void stop(std::size_t n) { rings_.at(n).reset(); }
  // A node with nothing to do until `until` goes on servicing its ring, as
  // zringd's ring thread does between ops: what its outbox holds goes out.
  void idle(std::size_t n, Clock::time_point until) { rings_.at(n)->service(until, nullptr); }
  // Silence is noticed after the membership timeout: wait a few of them.
  static Clock::duration peer_gone_wait() { return 4 * scaled(kTimeout); }
  // The ring file every node has (self aside).
  [[nodiscard]] const zring::transport::ZmqRingOptions& options() const { return options_; }
  // Runs every node's protocol until each sends every other node its
  // messages on a TCP connection (tcp_data.hpp); false if that did not
  // happen within a few membership timeouts.
  bool wait_for_tcp() {
    const auto give_up = Clock::now() + 4 * scaled(kTimeout);
    const auto all_switched = [&] {
      for (auto& ring : rings_) {
        const zring::transport::TcpCounters* c = ring->tcp_counters();
        if (!c || c->switches < rings_.size() - 1) return false;
      }
      return true;
    };
    while (!all_switched() && Clock::now() < give_up) {
      std::vector<std::jthread> threads;
      for (auto& ring : rings_)
        threads.emplace_back([&, r = ring.get()] { r->service(Clock::now() + 20ms, nullptr); });
    }
    return all_switched();
  }

 private:
  void start(std::size_t nodes) {
    const std::vector<int> ports = zring::proc::free_ports(nodes);
    zring::transport::ZmqRingOptions options;
    for (std::size_t n = 0; n < nodes; ++n) {
      options.names.push_back("n" + std::to_string(n));
      options.addresses.push_back("tcp://127.0.0.1:" + std::to_string(ports[n]));
    }
    options.timeout = scaled(kTimeout);
    options.heartbeat = kHeartbeat;
    options.tcp_data = kTcp;
    options_ = options;
    for (std::size_t n = 0; n < nodes; ++n) {
      options.self = n;
      rings_.push_back(std::make_unique<zring::transport::ZmqRing>(contexts_[n], options));
    }
  }

  // Every node runs the protocol until all are up at once (a node that is
  // up goes on servicing, so that what it owes the others goes out, and a
  // node that went down again, the ring re-forming, is waited for again).
  // Empty when every ring came up, else what the first one that did not says.
  std::string form() {
    const auto give_up = Clock::now() + 10 * scaled(kTimeout);
    std::vector<std::atomic<bool>> up(rings_.size());
    std::atomic<bool> all_up{false};
    {
      std::vector<std::jthread> threads;
      for (std::size_t n = 0; n < rings_.size(); ++n)
        threads.emplace_back([&, n, r = rings_[n].get()] {
          while (!all_up.load() && Clock::now() < give_up) {
            r->service(std::min(give_up, Clock::now() + 20ms), nullptr);
            up[n] = r->up();
            if (std::all_of(up.begin(), up.end(),
                            [](const std::atomic<bool>& u) { return u.load(); }))
              all_up = true;
          }
        });
    }
    for (auto& ring : rings_)
      if (!ring->up())
        return "the ZmqRing of " + ring->label(static_cast<std::size_t>(&ring - rings_.data())) +
               " did not come up: " + ring->down_reason();
    return {};
  }

  std::vector<zmq::context_t> contexts_;  // outlive the rings
  std::vector<std::unique_ptr<zring::transport::ZmqRing>> rings_;
  zring::transport::ZmqRingOptions options_;
};
using ZmqLinks = ZmqLinksOf<true>;
using ZmqOnlyLinks = ZmqLinksOf<false>;

// --- running one op on every node ----------------------------------------------------

// A barrier for the nodes of an op at which each goes on idling its link
// (L::idle). A ZmqRing sends what a busy or not yet connected peer could
// not take only when it is serviced again, so a node asleep in a plain
// barrier can keep its messages from a node still waiting for them (CI:
// node 2 heard nothing from node 0 for the membership timeout, while node
// 0 sat in the barrier with its messages to node 2 queued). Throws when
// the others do not all arrive within `wait`.
class ServicingBarrier {
 public:
  explicit ServicingBarrier(std::size_t nodes) : nodes_(nodes) {}
  template <class L>
  void arrive_and_wait(L& links, std::size_t n, Clock::duration wait = scaled(10s)) {
    const std::size_t ticket = arrived_.fetch_add(1);
    const std::size_t everyone = (ticket / nodes_ + 1) * nodes_;
    const auto give_up = Clock::now() + wait;
    while (arrived_.load() < everyone) {
      if (Clock::now() > give_up)
        throw std::runtime_error("node " + std::to_string(n) + ": the others did not arrive");
      links.idle(n, Clock::now() + 2ms);
    }
  }

 private:
  const std::size_t nodes_;
  std::atomic<std::size_t> arrived_{0};
};

// One thread per node: begin the op, meet the others (no node sends before
// every node has begun), run body, end the op (with its failure). A node
// that fails leaves the barrier, so no other node waits for it. Returns
// each node's failure; the assertions are made on the test's thread.
using Body = std::function<void(std::size_t node, RingLink& link, std::barrier<>& sync)>;

template <class L>
std::vector<std::optional<Status>> run_op(L& links, const Body& body) {
  const std::size_t nodes = links.nodes();
  std::barrier<> sync(static_cast<std::ptrdiff_t>(nodes));
  std::vector<std::optional<Status>> failures(nodes);
  std::vector<std::jthread> threads;
  for (std::size_t n = 0; n < nodes; ++n)
    threads.emplace_back([&, n] {
      bool began = false;
      try {
        links.begin_op(n);
        began = true;
        sync.arrive_and_wait();
        body(n, links.link(n), sync);
      } catch (const Error& e) {
        failures[n] = Status::of(e);
      } catch (const std::exception& e) {
        failures[n] = Status{ErrorCode::internal, e.what()};
      }
      if (failures[n]) sync.arrive_and_drop();
      try {
        if (began) links.end_op(n, failures[n]);
      } catch (const std::exception& e) {
        if (!failures[n]) failures[n] = Status{ErrorCode::internal, e.what()};
      }
    });
  threads.clear();  // joins
  return failures;
}

inline void check_no_failure(const std::vector<std::optional<Status>>& failures) {
  for (std::size_t n = 0; n < failures.size(); ++n)
    BOOST_TEST(!failures[n], "node " << n << ": " << (failures[n] ? failures[n]->text : ""));
}

// --- message contents ----------------------------------------------------------------

// The payload of message `index` from node `from`: every byte depends on
// both and on its offset, so a reordered, truncated or mixed-up payload differs.
inline std::vector<std::uint8_t> payload_of(std::size_t from, std::size_t index, std::size_t size) {
  std::vector<std::uint8_t> bytes(size);
  std::uint32_t x = static_cast<std::uint32_t>(from * 7919 + index * 104729 + 1);
  for (std::size_t i = 0; i < size; ++i) {
    x = x * 1664525u + 1013904223u;
    bytes[i] = static_cast<std::uint8_t>(x >> 24);
  }
  return bytes;
}

inline ChunkTag tag_of(std::size_t from, std::size_t index) {
  ChunkTag tag;
  tag.phase = Phase::reduce;
  tag.segment = static_cast<std::uint32_t>(from);
  tag.chunk = static_cast<std::uint32_t>(index);
  tag.hop = 1;
  return tag;
}

// What one node received of the messages it waited for.
struct Received {
  std::vector<ChunkTag> tags;
  std::vector<std::vector<std::uint8_t>> payloads;
  std::size_t extra = 0;  // messages after the expected ones
};

inline const std::vector<std::size_t> kSizes = {0,        1, 7, 4096, 65537, (1u << 20) + 3,
                                                4u << 20, 0, 13};

// Called on a node's thread inside its SendBatch, before its sends
// (sent false) and after them (sent true).
using WhileHeld = std::function<void(std::size_t node, bool sent)>;

// Every node sends kSizes to its successor, then receives as many from its
// predecessor; then it waits (receiving) until every node has got its own,
// so that nothing arrives unexpected. With while_held the sends are made in
// a SendBatch.
template <class L>
std::vector<Received> exchange_sizes(L& links, const WhileHeld& while_held = {}) {
  const std::size_t nodes = links.nodes();
  std::vector<Received> got(nodes);
  std::atomic<std::size_t> done{0};
  check_no_failure(run_op(links, [&](std::size_t n, RingLink& link, std::barrier<>&) {
    {
      std::optional<zring::collective::SendBatch> batch;
      if (while_held) {
        batch.emplace(link);
        while_held(n, false);
      }
      for (std::size_t i = 0; i < kSizes.size(); ++i) {
        auto bytes = std::make_shared<std::vector<std::uint8_t>>(payload_of(n, i, kSizes[i]));
        link.send(tag_of(n, i), Bytes::take(std::move(bytes)));
      }
      if (while_held) while_held(n, true);
    }
    const auto deadline = Clock::now() + scaled(10s);
    for (std::size_t i = 0; i < kSizes.size(); ++i) {
      Message msg = link.recv(deadline);
      got[n].tags.push_back(msg.tag);
      got[n].payloads.emplace_back(msg.payload.data(), msg.payload.data() + msg.payload.size());
    }
    ++done;
    while (done.load() < nodes && Clock::now() < deadline)
      if (link.recv_until(Clock::now() + 10ms)) ++got[n].extra;
  }));
  return got;
}

}  // namespace zring::transport_test
