// test_tcp_data.cpp - ZmqRing's TCP connections (transport/tcp_data.hpp):
// without CurveZMQ a node's messages to another go on a connection of its
// own once both know each other's port, whole and in order; with
// tcp_data off there is none; and whatever else reaches a node's data port
// is refused by name while the ring goes on.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "ring_links.hpp"
#include "transport/tcp_data.hpp"
#include "wire/tcp_frames.hpp"
#include "wire/wire.hpp"

namespace {

using namespace zring::transport_test;
using zring::collective::Clock;

// Received what exchange_sizes sent, whole and in order.
void check_exchange(const std::vector<Received>& got) {
  const std::size_t nodes = got.size();
  for (std::size_t n = 0; n < nodes; ++n) {
    const std::size_t from = (n + nodes - 1) % nodes;
    BOOST_TEST_REQUIRE(got[n].tags.size() == kSizes.size());
    for (std::size_t i = 0; i < kSizes.size(); ++i) {
      BOOST_TEST((got[n].tags[i] == tag_of(from, i)));
      BOOST_TEST((got[n].payloads[i] == payload_of(from, i, kSizes[i])));
    }
    BOOST_TEST(got[n].extra == 0u);
  }
}

// A plain TCP connection to 127.0.0.1:port that sends `bytes` and stays open.
struct RawClient {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  RawClient(std::uint16_t port, const std::vector<std::uint8_t>& bytes) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    BOOST_REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    BOOST_REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
                  static_cast<ssize_t>(bytes.size()));
  }
  ~RawClient() { ::close(fd); }
};

// The options of node `self` of a two-node ring file on 127.0.0.1.
zring::transport::TcpDataOptions two_nodes_on_loopback(std::size_t self) {
  zring::transport::TcpDataOptions o;
  o.self = self;
  o.hosts = {"127.0.0.1", "127.0.0.1"};
  o.bind_host = "127.0.0.1";
  o.ring = 42;
  return o;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(tcp_data)

BOOST_AUTO_TEST_CASE(messages_go_on_connections_of_their_own_whole_and_in_order) {
  ZmqLinks links(3);
  BOOST_TEST_REQUIRE(links.wait_for_tcp());
  std::vector<std::uint64_t> before;
  for (std::size_t n = 0; n < 3; ++n) {
    BOOST_TEST(links.ring(n).data_port() != 0u);
    before.push_back(links.ring(n).tcp_counters()->frames_received);
  }
  check_exchange(exchange_sizes(links));
  for (std::size_t n = 0; n < 3; ++n) {
    BOOST_TEST_CONTEXT("node " << n) {
      const zring::transport::TcpCounters& c = *links.ring(n).tcp_counters();
      BOOST_TEST(c.frames_received - before[n] >= kSizes.size());
      BOOST_TEST(c.refused == 0u);
      BOOST_TEST(links.ring(n).counters().dropped == 0u);
    }
  }
}

// What a node sends inside a SendBatch stays queued until the batch ends
// (its connection writes nothing of it before), then goes whole and in order.
BOOST_AUTO_TEST_CASE(sends_held_by_a_batch_leave_when_it_ends_whole_and_in_order) {
  ZmqLinks links(3);
  BOOST_TEST_REQUIRE(links.wait_for_tcp());
  std::vector<std::uint64_t> at_hold(3), after_sends(3);
  check_exchange(exchange_sizes(links, [&](std::size_t n, bool sent) {
    const std::uint64_t bytes = links.ring(n).tcp_counters()->bytes_sent;
    (sent ? after_sends : at_hold)[n] = bytes;
  }));
  for (std::size_t n = 0; n < 3; ++n) {
    BOOST_TEST_CONTEXT("node " << n) {
      BOOST_TEST(after_sends[n] == at_hold[n]);
      BOOST_TEST(links.ring(n).counters().dropped == 0u);
    }
  }
}

BOOST_AUTO_TEST_CASE(tcp_data_off_keeps_every_message_on_zeromq) {
  ZmqOnlyLinks links(2);
  check_exchange(exchange_sizes(links));
  for (std::size_t n = 0; n < 2; ++n) {
    BOOST_TEST(links.ring(n).tcp_counters() == nullptr);
    BOOST_TEST(links.ring(n).data_port() == 0u);
  }
}

// What is not a zringd of this ring's data connection is closed and
// counted, with why; the ring's own connections go on carrying its ops.
BOOST_AUTO_TEST_CASE(garbage_on_a_data_port_is_refused_by_name_and_the_ring_goes_on) {
  ZmqLinks links(2);
  BOOST_TEST_REQUIRE(links.wait_for_tcp());
  zring::transport::ZmqRing& ring = links.ring(0);
  const std::uint16_t port = ring.data_port();
  const auto& options = links.options();
  const std::uint64_t fingerprint = zring::wire::ring_fingerprint(options.names, options.addresses);
  const auto hello = [](std::uint32_t sender, std::uint64_t ring_id) {
    const auto h = zring::wire::encode_tcp_hello({sender, 99, ring_id});
    return std::vector<std::uint8_t>(h.begin(), h.end());
  };
  std::vector<std::uint8_t> bad_frame = hello(1, fingerprint);
  bad_frame.resize(bad_frame.size() + zring::wire::kTcpPrefixBytes, 0);  // a header of 0 bytes
  const std::vector<std::pair<std::vector<std::uint8_t>, std::string>> cases = {
      {std::vector<std::uint8_t>(32, 'x'), "not a zringd data connection"},
      {hello(1, fingerprint + 1), "a hello from another ring file's node"},
      {hello(0, fingerprint), "a hello from node #0, which is not another node of the ring file"},
      {bad_frame, "a frame with a header of 0 bytes"}};
  for (const auto& [bytes, why] : cases) {
    BOOST_TEST_CONTEXT(why) {
      const std::uint64_t refused = ring.tcp_counters()->refused;
      RawClient client(port, bytes);
      const auto give_up = Clock::now() + 4 * scaled(ZmqLinks::kTimeout);
      while (ring.tcp_counters()->refused == refused && Clock::now() < give_up)
        ring.service(Clock::now() + 20ms, nullptr);
      BOOST_TEST(ring.tcp_counters()->refused == refused + 1);
      BOOST_TEST(ring.tcp_counters()->last_refusal.find(why) != std::string::npos,
                 ring.tcp_counters()->last_refusal);
    }
  }
  check_exchange(exchange_sizes(links));
}

// Without keys anyone can put a message on the ring port that claims to
// come from a node. One from a node whose messages come on its TCP
// connection is read (and dropped by the ring's checks) like any other,
// and leaves that connection alone.
BOOST_AUTO_TEST_CASE(a_forged_message_from_a_node_does_not_end_its_connection) {
  ZmqLinks links(2);
  BOOST_TEST_REQUIRE(links.wait_for_tcp());
  const std::uint64_t switches = links.ring(1).tcp_counters()->switches;
  const std::uint64_t dropped = links.ring(0).counters().dropped;
  {
    zmq::context_t context(1);
    zmq::socket_t push(context, zmq::socket_type::push);
    push.set(zmq::sockopt::linger, 1000);
    push.connect(links.options().addresses[0]);
    zring::wire::RingHeader forged;
    forged.kind = zring::wire::RingKind::data;
    forged.generation = links.ring(0).generation() + 7;  // no such ring
    forged.sender = 1;
    forged.tag = {Phase::reduce, 0, 0, 1};
    const auto bytes = zring::wire::encode_ring_header(forged);
    for (int i = 0; i < 20; ++i) {
      (void)push.send(zmq::buffer(bytes), zmq::send_flags::sndmore);
      (void)push.send(zmq::str_buffer("payload"), zmq::send_flags::none);
    }
  }
  const auto give_up = Clock::now() + 4 * scaled(ZmqLinks::kTimeout);
  while (links.ring(0).counters().dropped < dropped + 20 && Clock::now() < give_up)
    links.ring(0).service(Clock::now() + 20ms, nullptr);
  BOOST_TEST(links.ring(0).counters().dropped >= dropped + 20);
  check_exchange(exchange_sizes(links));
  BOOST_TEST(links.ring(1).tcp_counters()->switches == switches, "node 1 had to connect again");
  BOOST_TEST(links.ring(0).data_on_tcp(1));
  BOOST_TEST(links.ring(1).data_on_tcp(0));
}

// tcp_congestion: asked of the kernel when the connections are set up, so a
// name it does not have is refused at start, by name.
BOOST_AUTO_TEST_CASE(a_congestion_control_the_kernel_lacks_is_refused_at_start) {
  zring::transport::TcpDataOptions options = two_nodes_on_loopback(0);
  options.congestion = "no_such_cc";
  try {
    zring::transport::TcpData data(options);
    BOOST_FAIL("a congestion control the kernel lacks was taken");
  } catch (const zring::Error& e) {
    BOOST_TEST((e.code() == zring::ErrorCode::config_invalid));
    BOOST_TEST(std::string(e.what()) ==
               "tcp_congestion: the kernel refuses 'no_such_cc' (No such file or directory; "
               "net.ipv4.tcp_allowed_congestion_control lists what it allows)");
  }
  options.congestion = "reno";  // built into every kernel, and allowed to everyone
  BOOST_CHECK_NO_THROW(zring::transport::TcpData{options});
  options.congestion.clear();  // the kernel's default
  BOOST_CHECK_NO_THROW(zring::transport::TcpData{options});
}

// What a connection brings is held until its marker comes on ZeroMQ; a
// marker lost with a ZeroMQ connection that broke (a lossy link) would
// hold it for good, and the peer would never be heard again. The ring
// queues its marker again whenever its ZeroMQ connection to the peer is
// made anew (repeat_marker): the peer then reads what was held, in order.
BOOST_AUTO_TEST_CASE(a_marker_lost_on_zeromq_is_sent_again_and_the_held_messages_read) {
  using zring::transport::TcpData;
  TcpData sender(two_nodes_on_loopback(0)), receiver(two_nodes_on_loopback(1));
  // Both polled until `done`; false after 10 s.
  const auto pump = [&](const auto& done) {
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (!done()) {
      if (Clock::now() > deadline) return false;
      std::vector<zmq::pollitem_t> items;
      sender.add_poll_items(items);
      const std::size_t receiver_at = items.size();
      receiver.add_poll_items(items);
      (void)zmq::poll(items.data(), items.size(), std::chrono::milliseconds(10));
      sender.after_poll(items.data(), Clock::now());
      receiver.after_poll(items.data() + receiver_at, Clock::now());
    }
    return true;
  };
  BOOST_TEST(sender.take_switches().empty());
  sender.repeat_marker(1);  // its messages go on ZeroMQ: no marker
  BOOST_TEST(sender.take_switches().empty());
  sender.heard_port(1, receiver.port(), Clock::now());
  BOOST_TEST_REQUIRE(pump([&] { return sender.via_tcp(1); }));
  const std::vector<zring::transport::TcpSwitch> first = sender.take_switches();
  BOOST_TEST_REQUIRE(first.size() == 1u);
  BOOST_TEST(first[0].to_tcp);
  BOOST_TEST(first[0].peer == 1u);
  // The marker is lost: the receiver never sees it.
  zring::wire::RingHeader header;
  header.kind = zring::wire::RingKind::heartbeat;
  header.sender = 0;
  header.generation = 7;
  const std::vector<std::uint8_t> bytes = zring::wire::encode_ring_header(header);
  sender.send(1, bytes, std::nullopt);
  const std::size_t sent = zring::wire::kTcpHelloBytes +
                           zring::wire::encode_tcp_prefix(bytes.size(), false, 0).size() +
                           bytes.size();
  BOOST_TEST_REQUIRE(pump([&] { return receiver.counters().bytes_received == sent; }));
  BOOST_TEST(!receiver.has_arrival());  // read, and held: its marker has not come
  // The ZeroMQ connection was made anew: the same marker again, not
  // counted as another switch.
  sender.repeat_marker(1);
  const std::vector<zring::transport::TcpSwitch> again = sender.take_switches();
  BOOST_TEST_REQUIRE(again.size() == 1u);
  BOOST_TEST(again[0].to_tcp);
  BOOST_TEST(again[0].peer == 1u);
  BOOST_TEST(again[0].nonce == first[0].nonce);
  BOOST_TEST(sender.counters().switches == 1u);
  BOOST_TEST(!receiver.from_zmq(0, zring::wire::RingKind::data_via_tcp, again[0].nonce));
  BOOST_TEST_REQUIRE(receiver.has_arrival());
  const std::optional<zring::transport::TcpArrival> got = receiver.take_arrival();
  BOOST_TEST_REQUIRE(got.has_value());
  BOOST_TEST(got->peer == 0u);
  BOOST_TEST((got->header == bytes));
  BOOST_TEST(!got->has_payload);
  // A marker that came twice is taken once: nothing more, nothing dropped.
  BOOST_TEST(!receiver.from_zmq(0, zring::wire::RingKind::data_via_tcp, again[0].nonce));
  BOOST_TEST(!receiver.has_arrival());
  BOOST_TEST(receiver.counters().refused == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
