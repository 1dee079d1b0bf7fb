// tcp_data.hpp - the ring's messages between two nodes over a plain TCP
// connection driven by the ring thread (internal, part of ZmqRing).
//
// A ZeroMQ message wakes four threads on its way: the sender's ZeroMQ I/O
// thread, the receiver's, then the receiving ring thread (and the sending
// ring thread already ran). On a busy host each wake-up costs tens of
// microseconds, and a small op is a handful of hops. So, without CurveZMQ
// keys (which only ZeroMQ's sockets carry) and unless the ring file says
// `tcp_data: false`, every node also listens on a TCP port of its own (an
// ephemeral one, on its ring address's host), announces it in every
// control message it sends (RingHeader::data_port) and, once it knows a
// peer's, sends that peer everything over one connection it writes to
// from the ring thread: a hop wakes the receiving ring thread only.
//
// ZeroMQ stays the membership protocol's way in and the fallback, and what
// one node sends another keeps its order across the two (the schedules and
// the membership protocol count on it):
// - The sender connects (the connection begins with a hello naming it, the
//   ring and the connection's nonce). Once connected, it queues
//   data_via_tcp(nonce) as its last ZeroMQ message to the peer and
//   everything after that on the connection. When the connection fails it
//   queues data_via_zmq as its next ZeroMQ message and goes on there; what
//   the connection still held is lost, as a broken ZeroMQ connection loses
//   what it carried, and it connects again a second later. A connection
//   whose bytes stay unacknowledged for the ring's timeout (a cut link)
//   fails so too (TCP_USER_TIMEOUT), as ZeroMQ's heartbeats end its own.
// - The receiver holds what a connection brings until data_via_tcp with its
//   nonce arrives on ZeroMQ (so everything sent before it on ZeroMQ has been
//   read), then reads it in order. data_via_zmq, or data_via_tcp with
//   another nonce (the peer restarted and connected again), closes that
//   connection, and what it still held is dropped, never read out of order;
//   a newer connection of the peer's, whose marker is still on its way,
//   stays. One that ended without its marker coming goes a timeout later.
//   A marker can be lost with a ZeroMQ connection that breaks (a lossy or
//   cut link): the sender queues its current one again each time its
//   ZeroMQ connection to the peer is made anew (repeat_marker), so that
//   what a live connection brings is never held for good.
//   Other ZeroMQ messages from a peer are read as they come, whatever its
//   connection: a forged one is dropped by the ring's checks as before and
//   ends nothing, and one from a peer that restarted without its old
//   connection closing (its host went away) still gets through.
// Nothing here trusts the bytes: a connection whose hello or frame is
// wrong is closed and counted, and the ring goes on.
#pragma once

#include <sys/socket.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "collective/link.hpp"
#include "wire/tcp_frames.hpp"
#include "wire/wire.hpp"

namespace zring::transport {

struct TcpDataOptions {
  std::size_t self = 0;
  std::vector<std::string> hosts;  // per listed node (ring file order): where it is reached
  std::string bind_host;           // the numeric address this node's ring socket is bound to
  std::uint64_t ring = 0;          // wire::ring_fingerprint of the ring file
  std::size_t max_message_bytes = 256u << 20;
  // A connection's hello must come within it; what a connection sent must
  // be acknowledged within it.
  std::chrono::milliseconds timeout{10000};
  // The TCP congestion control of the connections this node sends on
  // (setsockopt TCP_CONGESTION); empty: the kernel's default.
  std::string congestion;
};

// A ring message read from a connection, in the order its sender sent it.
struct TcpArrival {
  std::size_t peer = 0;
  std::vector<std::uint8_t> header;
  bool has_payload = false;
  collective::Bytes payload;
};

// A marker the ring must queue on ZeroMQ for `peer` before anything else
// goes to it: data_via_tcp(nonce) or data_via_zmq.
struct TcpSwitch {
  std::size_t peer = 0;
  bool to_tcp = false;
  std::uint64_t nonce = 0;
};

struct TcpCounters {
  std::uint64_t frames_sent = 0;
  std::uint64_t frames_received = 0;  // read out in order (not held, not dropped)
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
  std::uint64_t switches = 0;  // connections that took over a peer's messages
  std::uint64_t refused = 0;   // connections closed for a bad hello or frame
  std::string last_refusal;
};

class TcpData {
 public:
  using Clock = std::chrono::steady_clock;
  using Deadline = Clock::time_point;

  // Listens on options.bind_host, port chosen by the kernel. Throws
  // Error(connection_failed) when it cannot.
  explicit TcpData(TcpDataOptions options);
  ~TcpData();
  TcpData(const TcpData&) = delete;
  TcpData& operator=(const TcpData&) = delete;

  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }
  [[nodiscard]] const TcpCounters& counters() const noexcept { return counters_; }

  // --- sending -------------------------------------------------------------
  // Whether what goes to `peer` now goes on its connection (else on ZeroMQ).
  [[nodiscard]] bool via_tcp(std::size_t peer) const noexcept;
  // Queues a message for `peer` (via_tcp(peer)) and writes what the
  // connection takes now.
  void send(std::size_t peer, const std::vector<std::uint8_t>& header,
            std::optional<collective::Bytes> payload);
  // While held, send only queues; hold(false) writes what every peer's
  // connection takes now, several messages in one write (a peer is woken
  // once for all of them).
  void hold(bool on);
  // Messages queued for `peer` and not yet written whole, and whether the
  // last of them has a payload (the ring's rules for control messages).
  [[nodiscard]] std::size_t queued(std::size_t peer) const noexcept;
  [[nodiscard]] bool last_has_payload(std::size_t peer) const noexcept;
  // A new ring generation: queued messages with a payload that have not
  // begun to go out never will.
  void drop_unstarted_payloads();

  // --- what came on ZeroMQ -------------------------------------------------
  // `peer` takes ring messages on `port` (0: on ZeroMQ only).
  void heard_port(std::size_t peer, std::uint32_t port, Deadline now);
  // A ZeroMQ message from `peer` of `kind` (nonce: its op field): whether the
  // ring reads it; the markers are taken here.
  [[nodiscard]] bool from_zmq(std::size_t peer, wire::RingKind kind, std::uint64_t nonce);
  // The markers to queue on ZeroMQ now, in order.
  [[nodiscard]] std::vector<TcpSwitch> take_switches();
  // The ring's ZeroMQ connection to `peer` was made anew: the marker that
  // sent its messages here may have been lost with the old one (and the
  // peer holds what this connection brings until it comes), so it is
  // queued again (take_switches). The peer takes a repeated one as a no-op.
  // Nothing while `peer`'s messages go on ZeroMQ.
  void repeat_marker(std::size_t peer);

  // --- the ring thread's poll ----------------------------------------------
  // Appends the sockets to poll; after_poll reads their results from the
  // same place (items + the size before the append).
  void add_poll_items(std::vector<zmq::pollitem_t>& items);
  void after_poll(const zmq::pollitem_t* items, Deadline now);
  [[nodiscard]] bool has_arrival() const noexcept;
  [[nodiscard]] std::optional<TcpArrival> take_arrival();
  // When a connection is next tried or a hello given up on.
  [[nodiscard]] Deadline next_timer() const noexcept;

 private:
  struct Queued {
    std::vector<std::uint8_t> head;  // prefix and header
    collective::Bytes payload;
    bool has_payload = false;
    std::size_t written = 0;
    [[nodiscard]] std::size_t size() const noexcept { return head.size() + payload.size(); }
  };
  // This node's connection to a peer, and what waits to go on it.
  struct Outgoing {
    int fd = -1;
    bool connected = false;
    Deadline since{};  // when the connect began
    std::uint64_t nonce = 0;
    std::deque<Queued> queue;
  };
  // A connection a peer made to this node.
  struct Incoming {
    int fd = -1;
    Deadline since{};
    std::array<std::uint8_t, wire::kTcpHelloBytes> hello_bytes{};
    std::size_t hello_have = 0;
    std::optional<wire::TcpHello> hello;
    std::unique_ptr<wire::TcpFrameReader> reader;
    std::deque<TcpArrival> held;    // read, not yet handed over (kept after the end)
    std::optional<Deadline> ended;  // when it was read to its end or broke
  };
  enum class Role : std::uint8_t { listen, outgoing, incoming };
  struct Address {
    sockaddr_storage storage{};
    socklen_t length = 0;  // 0: not resolved
  };

  [[nodiscard]] std::size_t listed() const noexcept { return options_.hosts.size(); }
  void connect(std::size_t peer, Deadline now);
  void connected(std::size_t peer);
  void fail(std::size_t peer, Deadline now);
  // Writes what the connection takes now: everything queued, or with a
  // budget at most that many bytes (a message cut where it runs out).
  void flush(std::size_t peer, Deadline now,
             std::size_t budget = std::numeric_limits<std::size_t>::max());
  void accept_all(Deadline now);
  void read(Incoming& in);
  void read_hello(Incoming& in);
  void refuse(Incoming& in, const std::string& why);
  static void drop(Incoming& in);
  [[nodiscard]] bool readable_now(const Incoming& in) const noexcept;
  void close_used(std::size_t peer);
  void sweep(Deadline now);

  TcpDataOptions options_;
  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::vector<Outgoing> out_;                              // per listed node
  std::vector<Address> addresses_;                         // per listed node, without a port
  std::vector<std::uint32_t> peer_port_;                   // 0: not known
  std::vector<std::optional<Deadline>> retry_at_;          // when to connect again
  std::vector<bool> route_tcp_;                            // sending: on the connection
  std::vector<std::optional<std::uint64_t>> switched_in_;  // receiving: the nonce a peer chose
  std::vector<std::unique_ptr<Incoming>> in_;
  std::vector<TcpSwitch> switches_;
  std::vector<std::pair<Role, std::size_t>> polled_;  // what add_poll_items appended
  bool held_ = false;                                 // hold(true): send only queues
  std::uint64_t next_nonce_;
  TcpCounters counters_;
};

}  // namespace zring::transport
