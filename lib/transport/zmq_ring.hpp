// zmq_ring.hpp - the ring over ZeroMQ TCP sockets (internal).
//
// Each node binds a PULL socket at its own address and connects a PUSH
// socket to every other listed node's: the ring's data goes to the
// successor in the current ring, and the membership protocol's messages
// (heartbeats, FORM/UP/REFORM, see membership.hpp) to any listed node.
// Every data message carries (generation, op), so nothing of an older
// generation or op is ever summed. A node whose op fails sends ABORT(g, op)
// to every member, so every node fails the op at once rather than at its
// own deadline.
// With CurveZMQ keys (ZmqRingOptions::curve) the PULL socket is a CURVE
// server whose ZAP handler (inproc://zeromq.zap.01, a REP socket polled in
// this loop) admits only the listed nodes' public keys, and each PUSH socket
// a CURVE client that knows its peer's key; a message must then also come
// from the key of the node it names as sender. A monitor on the PULL socket
// counts failed handshakes and closed connections (a frame over
// max_message_bytes closes its connection inside ZeroMQ); one on each PUSH
// socket notes why that peer refuses this node (down_reason says it).
// All of it runs on the thread that owns the ZmqRing (the daemon's ring
// thread): ZeroMQ sockets are used from that thread only.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>
#include <zmq.hpp>
#include <zring/error.hpp>

#include "collective/link.hpp"
#include "status.hpp"
#include "transport/membership.hpp"
#include "transport/tcp_data.hpp"
#include "transport/wakeup.hpp"
#include "wire/wire.hpp"

namespace zring::transport {

// CurveZMQ keys of the ring, Z85 text (40 characters each).
struct CurveKeys {
  std::vector<std::string> public_keys;  // per node, ring order
  std::string secret_key;                // this node's
};

struct ZmqRingOptions {
  std::vector<std::string> names;      // ring order
  std::vector<std::string> addresses;  // tcp://HOST:PORT per node
  std::size_t self = 0;
  std::size_t min_nodes = 0;  // a quorum; 0: a strict majority of the listed nodes
  std::chrono::milliseconds timeout{10000};
  std::chrono::milliseconds heartbeat{500};
  std::size_t max_message_bytes = 256u << 20;
  std::optional<CurveKeys> curve;  // none: no authentication, no encryption
  // Messages to a peer over a plain TCP connection once it announced its
  // port (tcp_data.hpp); never with CurveZMQ keys.
  bool tcp_data = true;
  // Their TCP congestion control (TcpDataOptions::congestion); empty: the kernel's default.
  std::string tcp_congestion;
  // How long the ring thread looks for messages without sleeping (yielding
  // the CPU between looks) before it sleeps, in a short op and after one,
  // for the next request (begin_op); 0: it sleeps at once.
  std::chrono::microseconds busy_poll{200};
  // The settings every node must share (wire::RingSettings): the caller's
  // local_ranks, chunk_bytes, gather_bytes and direct_bytes; the ring sets
  // nodes (from names and addresses) and min_nodes (the quorum above).
  wire::RingSettings settings;
};

// Counters for status and metrics.
struct RingCounters {
  std::uint64_t dropped = 0;     // messages thrown away (stale, stray, malformed)
  std::uint64_t malformed = 0;   // of which did not decode
  std::uint64_t formations = 0;  // generations adopted
  std::uint64_t bytes_sent = 0;  // frames put on the ring (all kinds)
  std::uint64_t bytes_received = 0;
  std::string last_drop;
  std::uint64_t auth_rejected = 0;      // CurveZMQ clients refused: not a ring member's key
  std::uint64_t handshakes_failed = 0;  // connections that failed the handshake (no or bad
                                        // keys, another protocol, refused by the ZAP handler)
  std::uint64_t disconnects = 0;        // connections to the ring port closed: a peer went
                                        // away, or broke the protocol (an oversized frame)
  std::string last_rejection;           // the last key the ZAP handler refused, and from where
  std::string last_handshake_failure;   // what the last failed handshake was
  std::uint64_t data_refused = 0;       // connections to the TCP data port closed for a bad
                                        // hello or frame (tcp_data.hpp)
  std::string last_data_refusal;        // why the last one was

  bool operator==(const RingCounters&) const = default;
};

class ZmqRing final : public collective::RingLink {
 public:
  ZmqRing(zmq::context_t& context, ZmqRingOptions options);
  ~ZmqRing() override;

  // --- membership --------------------------------------------------------------
  [[nodiscard]] bool up() const noexcept { return membership_.up(); }
  [[nodiscard]] std::uint64_t generation() const noexcept { return membership_.generation(); }
  [[nodiscard]] const Membership& membership() const noexcept { return membership_; }
  // Why the ring is not up, as a sentence (empty when up).
  [[nodiscard]] std::string down_reason() const;
  // A descriptor service() also watches: ready once it is readable (the
  // caller reads it, and clears ready).
  struct Readable {
    int fd = -1;
    bool ready = false;
  };
  // Runs the protocol until `until`, until `wake` (if given) is signalled
  // (it is cleared then), until `also` (if given) is readable, or until the
  // ring goes up or down.
  void service(collective::Deadline until, Wakeup* wake, Readable* also = nullptr);
  // Runs the protocol's timers once between two ops, so that the coordinator
  // can take a node in even when ops follow each other without a pause.
  void between_ops() {
    check_stall(collective::Clock::now());
    run_timers();
  }
  // Set once after this node's ring thread did not run for a timeout or
  // more (zringd was stopped or starved): it sent nothing meanwhile, so the
  // other nodes dropped it from their ring and failed every op it was in;
  // its ring went down with it. Says why, and when the thread ran again:
  // ops queued here before then are over on the other nodes.
  struct Stall {
    std::string why;
    collective::Deadline noticed;
  };
  [[nodiscard]] std::optional<Stall> take_stall() { return std::exchange(stall_, std::nullopt); }

  // --- ops -----------------------------------------------------------------------
  // Starts the next op of the current generation; returns its number. The
  // ring's members stay those of this op (node(), nodes(), describe()) until
  // end_op. Precondition: up(). Throws Error(aborted) if the ring aborted
  // this op before this node started it (its ranks were late). A short op
  // (`short_op`: one that waits for a few messages, not for a stream of
  // data) waits for its messages looking without sleeping for up to
  // options.busy_poll each time, and so does the ring thread for
  // options.busy_poll after it, for the next request: a wake-up of a
  // sleeping thread costs as much as such an op's work.
  std::uint64_t begin_op(bool short_op = false);
  // Ends the op, or (with how it failed on this node) fails it. A failure
  // every node reaches by itself (Status::everyone_knows, a manifest
  // mismatch) needs nothing more; any other is aborted on every member and
  // the ring re-forms, so that no node can pair this op's data with
  // another op's.
  void end_op(const std::optional<Status>& failure);
  // Whether the op that just failed should run again on the next ring: the
  // ring changed under it before this node knew every summary, so nothing
  // of it was written anywhere, and the nodes that had not begun it yet will
  // run it on the new ring; and this node sent nothing but its summary, so
  // no other node can have finished the op with its data (a small op's
  // values, top-k payloads and what a schedule sends ahead go right behind
  // the summary: a node that has every summary and that data is done, and
  // a node that ran the op again would then be an op behind it, silently).
  // Valid between the failure and end_op.
  [[nodiscard]] bool op_may_run_again() const noexcept {
    return op_failure_ && retry_ && !data_ahead_;
  }

  // --- RingLink (positions in the current ring) ----------------------------------
  std::size_t node() const noexcept override;
  std::size_t nodes() const noexcept override;
  std::string describe(std::size_t position) const override;
  void send(const collective::ChunkTag& tag, collective::Bytes payload) override;
  collective::Message recv(collective::Deadline deadline) override;
  std::optional<collective::Message> recv_until(collective::Deadline deadline) override;
  void send_to(std::size_t to, const collective::ChunkTag& tag, collective::Bytes payload) override;
  [[noreturn]] void timed_out(std::size_t waited_for) override;
  void put_back(std::vector<collective::Message> messages) override;
  void summaries_known() override { summaries_known_ = true; }
  void wake() noexcept override { wakeup_.signal(); }
  void hold_sends() noexcept override;
  void release_sends() noexcept override;

  // "node 'b' (tcp://...)": a listed node.
  [[nodiscard]] std::string label(std::size_t listed) const;
  // With the bytes of the TCP connections (tcp_data.hpp) in bytes_sent and bytes_received.
  [[nodiscard]] RingCounters counters() const;
  // Whether this node's messages to listed node `peer` go on its TCP connection now.
  [[nodiscard]] bool data_on_tcp(std::size_t peer) const noexcept {
    return tcp_ && tcp_->via_tcp(peer);
  }
  // The TCP port this node takes ring messages on; 0 when its TCP connections are off.
  [[nodiscard]] std::uint16_t data_port() const noexcept { return tcp_ ? tcp_->port() : 0; }
  // The TCP connections' own counters; nothing when they are off.
  [[nodiscard]] const TcpCounters* tcp_counters() const noexcept {
    return tcp_ ? &tcp_->counters() : nullptr;
  }
  // Adds the messages the collective threw away during an op (out-of-range
  // chunk, stale or duplicate) to the counters.
  void count_drops(std::uint64_t count, const std::string& last);
  // When *flag becomes true, recv() throws Error(aborted) and service()
  // returns within about 100 ms (the daemon is shutting down).
  void set_interrupt(const std::atomic<bool>* flag) noexcept { interrupt_ = flag; }

 private:
  struct Outgoing {
    zmq::message_t header;
    zmq::message_t payload;
    bool has_payload = false;
    bool header_sent = false;
  };
  // A PUSH socket to one listed node, what waits to go to it, and what its
  // handshakes said.
  struct Peer {
    zmq::socket_t out;
    zmq::socket_t monitor;  // PAIR: out's handshake events
    std::deque<Outgoing> outbox;
    std::string problem;  // why the last handshake with it failed
    // ZeroMQ never reconnects after a failed handshake (a protocol error
    // ends the session): when to connect to it again.
    std::optional<collective::Deadline> reconnect_at;
  };

  // How often poll_once reads the sockets' monitors.
  static constexpr std::chrono::milliseconds kMonitorLook{20};
  // How many times in a row poll_once may hand over what a TCP connection
  // already brought without polling.
  static constexpr int kTakenWithoutPoll = 8;

  std::size_t listed() const noexcept { return options_.names.size(); }
  // The listed index of ring position `position` (of the op, during one).
  std::size_t member_at(std::size_t position) const noexcept;
  // The ring position of listed node `listed_index` (of the op, during
  // one); nothing when it is not a member.
  std::optional<std::size_t> position_of(std::size_t listed_index) const noexcept;
  // ring_receive.cpp
  // Data sent to every node by its origin itself, and whether its sender is that origin.
  static bool sent_straight(const wire::RingHeader& header) noexcept;
  bool from_its_origin(const wire::RingHeader& header) const noexcept;
  static bool sent_direct(const wire::RingHeader& header) noexcept;
  // Data that may come right behind its sender's summary, before this node began the op.
  static bool sent_ahead(const wire::RingHeader& header) noexcept;
  bool direct_from_its_sender(const wire::RingHeader& header) const noexcept;

  // Polls once: receives what is there, flushes what is queued, runs timers.
  // Returns a data message of the current op when one arrived.
  std::optional<collective::Message> poll_once(collective::Deadline until, Wakeup* wake,
                                               bool* woken, Readable* also = nullptr);
  std::optional<collective::Message> receive_one(bool* read);
  std::optional<collective::Message> dispatch(wire::RingHeader header,
                                              std::optional<collective::Bytes> payload,
                                              std::optional<std::size_t> authenticated,
                                              bool via_tcp);
  std::optional<collective::Message> receive_tcp(TcpArrival arrival);
  void keep_early(const wire::RingHeader& header, collective::Message msg);
  // ring_guard.cpp
  void set_connection_liveness(zmq::socket_t& socket) const;
  void watch_sockets(zmq::context_t& context);
  void setup_curve(zmq::context_t& context);
  void answer_zap();
  void read_monitor();
  void read_out_monitor(std::size_t peer);
  void reconnect(std::size_t peer);
  // membership
  void on_abort(const wire::RingHeader& header);
  void run_timers();
  // `waited`: how long of the time since it last ran the thread meant to wait.
  void check_stall(collective::Deadline now,
                   collective::Clock::duration waited = collective::Clock::duration::zero());
  void apply_membership();
  void enqueue(std::size_t peer, wire::RingHeader header, std::optional<collective::Bytes> payload);
  void flush(std::size_t peer);
  // Queues on ZeroMQ the markers of the TCP connections' changes (tcp_data.hpp).
  void send_switches();
  void drop(const std::string& why, bool malformed);
  bool interrupted() const noexcept { return interrupt_ && interrupt_->load(); }

  ZmqRingOptions options_;
  Membership membership_;
  zmq::socket_t zap_;                         // REP on inproc://zeromq.zap.01 (CurveZMQ only)
  zmq::socket_t in_;                          // PULL, bound at our address
  zmq::socket_t monitor_;                     // PAIR: in_'s handshake and disconnect events
  std::vector<Peer> peers_;                   // per listed node; this node's slot has no sockets
  std::vector<zmq::pollitem_t> poll_items_;   // poll_once's, reused
  std::vector<std::size_t> poll_peers_;       // the peers of its POLLOUT items
  std::unique_ptr<TcpData> tcp_;              // the TCP connections; none when off
  Wakeup wakeup_;                             // wake(): polled by poll_once
  bool woken_ = false;                        // wake() came; recv_until returns
  int taken_without_poll_ = 0;                // poll_once's hand-overs since its last poll
  collective::Deadline next_monitor_look_{};  // when poll_once reads the monitors next
  std::vector<std::array<std::uint8_t, 32>> member_keys_;  // CurveZMQ: per node, binary
  std::deque<std::pair<std::uint64_t, collective::Message>>
      early_;                                 // the next op's messages that came before it began
  std::deque<collective::Message> put_back_;  // the op's messages to hand over again first

  // ops
  std::uint64_t next_op_ = 0;                  // number of the next op in this generation
  std::optional<std::uint64_t> op_;            // the op running now
  std::uint64_t op_generation_ = 0;            // its generation
  std::vector<std::uint32_t> op_members_;      // its ring
  std::optional<Status> poisoned_;             // the next op was aborted before this node began it
  std::optional<Status> op_failure_;           // set by control messages mid-op
  bool summaries_known_ = false;               // the op knows every summary
  bool retry_ = false;                         // op_failure_ is a ring change before that
  bool data_ahead_ = false;                    // data of the op went out before that
  bool short_op_ = false;                      // begin_op's: it waits without sleeping first
  collective::Deadline busy_until_{};          // after a short op: no sleep before then
  std::optional<collective::Deadline> alive_;  // when the ring thread last ran (check_stall)
  std::optional<Stall> stall_;

  RingCounters counters_;
  const std::atomic<bool>* interrupt_ = nullptr;
};

}  // namespace zring::transport
