// ring_receive.cpp - what comes in on the ring (part of ZmqRing): the
// poll that drives the ring thread, and the checks a message passes before
// the collective sees it: its sender, generation and op, its place in the
// schedule, and for an op this node has not begun, whether it may be kept.
#include <algorithm>
#include <zring/error.hpp>

#include "transport/zmq_calls.hpp"
#include "transport/zmq_ring.hpp"

namespace zring::transport {
namespace {

using collective::Clock;
using collective::Deadline;
using wire::RingHeader;
using wire::RingKind;

// Messages of the next op kept while this node has not begun it.
constexpr std::size_t kMaxEarly = 1024;

}  // namespace

// --- receiving -----------------------------------------------------------------

collective::Message ZmqRing::recv(Deadline deadline) {
  do {
    if (std::optional<collective::Message> msg = recv_until(deadline)) return std::move(*msg);
  } while (Clock::now() < deadline);  // woken
  timed_out((node() + nodes() - 1) % nodes());
}

void ZmqRing::timed_out(std::size_t waited_for) {
  // A member that died is about to be found silent (its heartbeats stopped
  // with it): the op meets that change of the ring, the same on every
  // node, rather than a timeout, which aborts the op at the others too.
  if (op_ && membership_.fail_if_a_member_is_missing(Clock::now())) {
    apply_membership();
    if (op_failure_) op_failure_->raise();
  }
  std::string text = "op " + std::to_string(op_.value_or(0)) + ": timed out after " +
                     ms_text(options_.timeout) + " waiting for " + describe(waited_for);
  if (counters_.dropped != 0)
    text += " (" + std::to_string(counters_.dropped) +
            " messages dropped, last: " + counters_.last_drop + ")";
  throw Error(ErrorCode::timeout, text);
}

std::optional<collective::Message> ZmqRing::recv_until(Deadline deadline) {
  for (;;) {
    if (op_failure_) op_failure_->raise();
    if (!put_back_.empty() && op_) {
      collective::Message msg = std::move(put_back_.front());
      put_back_.pop_front();
      return msg;
    }
    if (!early_.empty() && op_ && early_.front().first == *op_) {
      collective::Message msg = std::move(early_.front().second);
      early_.pop_front();
      return msg;
    }
    if (auto msg = poll_once(deadline, nullptr, nullptr)) return msg;
    if (interrupted()) throw Error(ErrorCode::aborted, "zringd is shutting down");
    if (op_failure_) op_failure_->raise();
    if (std::exchange(woken_, false) || Clock::now() >= deadline) return std::nullopt;
  }
}

void ZmqRing::put_back(std::vector<collective::Message> messages) {
  put_back_.insert(put_back_.begin(), std::make_move_iterator(messages.begin()),
                   std::make_move_iterator(messages.end()));
}

void ZmqRing::service(Deadline until, Wakeup* wake, Readable* also) {
  bool woken = false;
  const bool was_up = up();
  while (!woken && !(also && also->ready) && !interrupted() && up() == was_up &&
         Clock::now() < until) {
    // Outside an op, data can only be for the next op: dispatch keeps it.
    (void)poll_once(until, wake, &woken, also);
  }
}

std::optional<collective::Message> ZmqRing::poll_once(Deadline until, Wakeup* wake, bool* woken,
                                                      Readable* also) {
  // Messages a connection brought in the last read are handed over without
  // a poll (three system calls with ZeroMQ's sockets in it), a few at a
  // time: the poll still comes often enough for the other sockets.
  if (tcp_ && tcp_->has_arrival() && taken_without_poll_ < kTakenWithoutPoll) {
    ++taken_without_poll_;
    for (int i = 0; i < 256 && tcp_->has_arrival(); ++i)
      if (std::optional<collective::Message> got = receive_tcp(*tcp_->take_arrival())) return got;
  }
  taken_without_poll_ = 0;
  const auto now = Clock::now();
  check_stall(now);
  // Sleep until the earliest timer that can fire in this state.
  Deadline next = std::min(until, membership_.next_timer());
  for (const Peer& peer : peers_)
    if (peer.reconnect_at) next = std::min(next, *peer.reconnect_at);
  if (tcp_) next = std::min(next, tcp_->has_arrival() ? now : tcp_->next_timer());
  auto wait = std::max<Clock::duration>(next - now, Clock::duration::zero());
  if (interrupt_) wait = std::min<Clock::duration>(wait, std::chrono::milliseconds(100));
  // Every ZeroMQ socket in a poll costs system calls before and after it
  // (libzmq looks at each one's command pipe), so a poll holds only what
  // can need this thread now: the ring's socket, the wake-up, the ZAP
  // handler and the peers with something queued. The monitors bring rare
  // news (a failed handshake, a closed connection): they are looked at
  // every kMonitorLook, which then bounds the wait.
  const bool look_at_monitors = now >= next_monitor_look_;
  if (look_at_monitors) next_monitor_look_ = now + kMonitorLook;
  wait = std::min<Clock::duration>(wait, next_monitor_look_ - now);
  std::vector<zmq::pollitem_t>& items = poll_items_;  // kept: no allocation per poll
  std::vector<std::size_t>& flushing = poll_peers_;
  items.clear();
  flushing.clear();
  items.push_back({in_.handle(), 0, ZMQ_POLLIN, 0});
  const std::size_t zap_at = items.size();
  if (zap_) items.push_back({zap_.handle(), 0, ZMQ_POLLIN, 0});
  const std::size_t wake_at = items.size();
  if (wake) items.push_back({nullptr, wake->fd(), ZMQ_POLLIN, 0});
  const std::size_t also_at = items.size();
  if (also && also->fd >= 0) items.push_back({nullptr, also->fd, ZMQ_POLLIN, 0});
  const std::size_t wakeup_at = items.size();
  items.push_back({nullptr, wakeup_.fd(), ZMQ_POLLIN, 0});
  const std::size_t peers_at = items.size();
  for (std::size_t n = 0; n < listed(); ++n) {
    if (n == options_.self || peers_[n].outbox.empty()) continue;
    items.push_back({peers_[n].out.handle(), 0, ZMQ_POLLOUT, 0});
    flushing.push_back(n);
  }
  const std::size_t monitors_at = items.size();
  if (look_at_monitors) {
    items.push_back({monitor_.handle(), 0, ZMQ_POLLIN, 0});
    for (std::size_t n = 0; n < listed(); ++n)
      if (n != options_.self) items.push_back({peers_[n].monitor.handle(), 0, ZMQ_POLLIN, 0});
  }
  const std::size_t tcp_at = items.size();
  if (tcp_) tcp_->add_poll_items(items);
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(wait);
  // A short op, or the next request after one: looked for without sleeping first.
  const auto busy = std::chrono::duration_cast<std::chrono::microseconds>(
      op_ ? (short_op_ ? options_.busy_poll : Clock::duration::zero())
          : std::max<Clock::duration>(busy_until_ - now, Clock::duration::zero()));
  (void)poll_items(items.data(), items.size(), ms, busy);
  check_stall(Clock::now(), wait);  // beyond the wait asked for: stopped meanwhile
  if (tcp_) {
    tcp_->after_poll(items.data() + tcp_at, Clock::now());
    send_switches();
  }
  for (std::size_t i = 0; i < flushing.size(); ++i)
    if (items[peers_at + i].revents & ZMQ_POLLOUT) flush(flushing[i]);
  if (look_at_monitors) {
    if (items[monitors_at].revents & ZMQ_POLLIN) read_monitor();
    for (std::size_t n = 0, at = monitors_at + 1; n < listed(); ++n) {
      if (n == options_.self) continue;
      if (items[at++].revents & ZMQ_POLLIN) read_out_monitor(n);
    }
  }
  if (zap_ && (items[zap_at].revents & ZMQ_POLLIN)) answer_zap();
  if (wake && (items[wake_at].revents & ZMQ_POLLIN) && wake->clear()) *woken = true;
  if (also && also->fd >= 0 && (items[also_at].revents & ZMQ_POLLIN)) also->ready = true;
  if ((items[wakeup_at].revents & ZMQ_POLLIN) && wakeup_.clear()) woken_ = true;
  // Drain what is queued, but hand over the first data message at once;
  // the ZeroMQ socket and the TCP connections take turns, so that a flood on
  // one (garbage on the ring port) cannot hold up the other's data. What is
  // left waits for the next poll, which then does not sleep.
  std::optional<collective::Message> got;
  bool zmq_more = (items[0].revents & ZMQ_POLLIN) != 0;
  for (int i = 0; i < 256 && !got; ++i) {
    const bool tcp_more = tcp_ && tcp_->has_arrival();
    if (!zmq_more && !tcp_more) break;
    if (tcp_more) got = receive_tcp(*tcp_->take_arrival());
    if (!got && zmq_more) got = receive_one(&zmq_more);
  }
  run_timers();
  return got;
}

// Reads one message if there is one (*read tells); returns it when it is data
// of the current or next op.
std::optional<collective::Message> ZmqRing::receive_one(bool* read) {
  zmq::message_t header;
  *read = in_.recv(header, zmq::recv_flags::dontwait).has_value();
  if (!*read) return std::nullopt;
  counters_.bytes_received += header.size();
  std::optional<zmq::message_t> payload;
  bool extra_frames = false;
  if (header.more()) {
    payload.emplace();
    (void)in_.recv(*payload);  // the parts of a message arrive together
    counters_.bytes_received += payload->size();
    while (payload->more()) {
      zmq::message_t extra;
      (void)in_.recv(extra);
      extra_frames = true;
      if (!extra.more()) break;
    }
  }
  if (extra_frames) {
    drop("a message of more than two frames", true);
    return std::nullopt;
  }
  RingHeader decoded;
  try {
    decoded = wire::decode_ring_header(header.data<std::uint8_t>(), header.size());
  } catch (const Error& e) {
    drop(e.what(), true);
    return std::nullopt;
  }
  // With CurveZMQ, the ZAP handler named the member whose key sent this.
  std::optional<std::size_t> authenticated;
  if (options_.curve) {
    const char* user = zmq_msg_gets(header.handle(), "User-Id");
    const auto member =
        user ? std::find(options_.names.begin(), options_.names.end(), user) : options_.names.end();
    if (member == options_.names.end()) {
      drop("a message without a ring member's CurveZMQ identity", false);
      return std::nullopt;
    }
    authenticated = static_cast<std::size_t>(member - options_.names.begin());
  }
  std::optional<collective::Bytes> bytes;
  if (payload) {
    auto owner = std::make_shared<zmq::message_t>(std::move(*payload));
    bytes = collective::Bytes(owner->data<std::uint8_t>(), owner->size(), owner);
  }
  std::optional<collective::Message> got =
      dispatch(std::move(decoded), std::move(bytes), authenticated, false);
  apply_membership();
  return got;
}

// A message a peer sent on its TCP connection, in its order (tcp_data.hpp).
std::optional<collective::Message> ZmqRing::receive_tcp(TcpArrival arrival) {
  RingHeader decoded;
  try {
    decoded = wire::decode_ring_header(arrival.header.data(), arrival.header.size());
  } catch (const Error& e) {
    drop(e.what(), true);
    return std::nullopt;
  }
  if (decoded.sender != arrival.peer) {
    drop("a message on " + label(arrival.peer) + "'s TCP connection claiming to come from node #" +
             std::to_string(decoded.sender),
         false);
    return std::nullopt;
  }
  std::optional<collective::Bytes> payload;
  if (arrival.has_payload) payload = std::move(arrival.payload);
  std::optional<collective::Message> got =
      dispatch(std::move(decoded), std::move(payload), std::nullopt, true);
  apply_membership();
  return got;
}

std::optional<collective::Message> ZmqRing::dispatch(RingHeader header,
                                                     std::optional<collective::Bytes> payload,
                                                     std::optional<std::size_t> authenticated,
                                                     bool via_tcp) {
  if (authenticated && header.sender != *authenticated) {
    drop("a message signed by " + label(*authenticated) + "'s key claiming to come from node #" +
             std::to_string(header.sender),
         false);
    return std::nullopt;
  }
  if (header.sender >= listed() || header.sender == options_.self) {
    drop("a message claiming to come from node #" + std::to_string(header.sender) +
             ", which is not another node of the ring file",
         false);
    return std::nullopt;
  }
  if (header.kind == RingKind::data_via_tcp || header.kind == RingKind::data_via_zmq) {
    if (!tcp_ || via_tcp || payload) {
      drop("a marker of a TCP connection's change where none can come", false);
      return std::nullopt;
    }
  }
  // Which way this peer's messages come (only its markers say,
  // tcp_data.hpp), and where it takes them.
  if (tcp_ && !via_tcp && !tcp_->from_zmq(header.sender, header.kind, header.op)) {
    if (header.data_port != 0) tcp_->heard_port(header.sender, header.data_port, Clock::now());
    return std::nullopt;
  }
  if (header.kind != RingKind::data) {
    if (payload) {
      drop("a control message with a payload frame", true);
      return std::nullopt;
    }
    if (tcp_) tcp_->heard_port(header.sender, header.data_port, Clock::now());
    membership_.heard(header.sender, header, Clock::now());
    if (header.kind == RingKind::abort) on_abort(header);
    return std::nullopt;
  }
  if (!payload) {
    drop("a data message without its payload frame", true);
    return std::nullopt;
  }
  // A node is up once UP(g) has come round to it; the nodes before it on
  // UP's way may already send their summaries of op 0 straight to it, and
  // what goes right behind them. It adopted g (FORM), so it keeps them for
  // that op.
  const bool before_up =
      !up() && header.generation == generation() && (sent_straight(header) || sent_ahead(header));
  if (!before_up && (!up() || header.generation != generation())) {
    drop("data of another ring generation", false);
    return std::nullopt;
  }
  if (sent_straight(header) ? !from_its_origin(header)
      : sent_direct(header) ? !direct_from_its_sender(header)
                            : header.sender != membership_.predecessor()) {
    drop("data from node #" + std::to_string(header.sender) +
             ", which is not this node's predecessor in the ring (nor a summary or the data "
             "behind it from its own origin, nor values or sums of the direct schedule between "
             "a node and the owner of their segment)",
         false);
    return std::nullopt;
  }
  membership_.heard(header.sender, header, Clock::now());
  const bool current = op_ && header.op == *op_;
  const bool next = header.op == next_op_;
  if (!current && !next) {
    drop("data of op " + std::to_string(header.op) + " while this node is at op " +
             std::to_string(op_.value_or(next_op_)),
         false);
    return std::nullopt;
  }
  collective::Message msg{header.tag, std::move(*payload)};
  if (current) return msg;
  keep_early(header, std::move(msg));
  return std::nullopt;
}

// A summary or the data behind it that its origin sent to every node
// itself (collective::RingLink::send_to): hop 0. Also an affine op's later
// statistics (Phase::stats), which a node sends only once it knows every
// summary, this node's too: they never come before this node began the op.
bool ZmqRing::sent_straight(const RingHeader& header) noexcept {
  return header.tag.hop == 0 && (header.tag.phase == collective::Phase::manifest ||
                                 header.tag.phase == collective::Phase::blobs ||
                                 header.tag.phase == collective::Phase::stats);
}

bool ZmqRing::from_its_origin(const RingHeader& header) const noexcept {
  return position_of(header.sender) == std::optional<std::size_t>(header.tag.segment);
}

// What a node sends right behind its summary (ring_allreduce_send_ahead):
// its values to a chunk's owner, or hop 1 of its own segment.
bool ZmqRing::sent_ahead(const RingHeader& header) noexcept {
  return (header.tag.phase == collective::Phase::to_owner && header.tag.hop >= 1) ||
         (header.tag.phase == collective::Phase::reduce && header.tag.hop == 1);
}

// The direct schedule's messages (collective/ring_allreduce.hpp) go
// between a node and the owner of their segment, node segment - 1.
bool ZmqRing::sent_direct(const RingHeader& header) noexcept {
  return header.tag.phase == collective::Phase::to_owner ||
         header.tag.phase == collective::Phase::from_owner;
}

// A node's values (to_owner) come from the node at their place in the
// segment's order (hop: 1 for node segment, ..., N - 1) to the owner; the
// sums (from_owner, hop 0) from the owner.
bool ZmqRing::direct_from_its_sender(const RingHeader& header) const noexcept {
  const collective::ChunkTag& tag = header.tag;
  const std::size_t n = nodes();
  if (tag.segment >= n) return false;
  const std::size_t owner = (tag.segment + n - 1) % n;
  const std::optional<std::size_t> sender = position_of(header.sender);
  if (tag.phase == collective::Phase::from_owner)
    return tag.hop == 0 && sender == std::optional<std::size_t>(owner);
  return tag.hop >= 1 && tag.hop < n && node() == owner &&
         sender == std::optional<std::size_t>((tag.segment + tag.hop - 1) % n);
}

// Before this node begins an op, the others can only be in its first phase,
// the all-gather of every node's summary and the data the summaries
// announce (collective::ring_allgather_with_data), and have sent the
// messages of their schedule that go right behind their summary
// (collective::ring_allreduce_send_ahead: values to this node as the owner
// of their chunk, or hop 1 of the predecessor's own segment): no op gets
// further without this node's summary. A summary travels as one message
// (chunk 0) tagged with its origin and hop, and a node's data only behind
// its summary, on the same socket. So only those are kept for the op:
// other nodes' summaries, each once (at most nodes() - 1, however many
// frames claim to be for it), and data messages, each once, of a node
// whose summary is kept; kMaxEarly messages in all. (dispatch checked
// that each comes from the node its tag says.)
void ZmqRing::keep_early(const RingHeader& header, collective::Message msg) {
  const collective::ChunkTag& tag = header.tag;
  const std::size_t self = node();
  const bool from_other =
      tag.segment < nodes() && tag.segment != self &&
      (sent_straight(header) || tag.hop == (self + nodes() - tag.segment) % nodes());
  const bool summary = tag.phase == collective::Phase::manifest && tag.chunk == 0 && from_other;
  const std::optional<std::size_t> sender = position_of(header.sender);
  const bool ahead = sender && sent_ahead(header) &&
                     (tag.phase == collective::Phase::to_owner || tag.segment == *sender);
  const bool data = (tag.phase == collective::Phase::blobs && from_other) || ahead;
  // The node whose summary must be here first.
  const std::size_t origin =
      tag.phase == collective::Phase::blobs || !sender ? tag.segment : *sender;
  bool summary_kept = false;
  for (const auto& [op, kept] : early_) {
    if (op != header.op) continue;
    if (kept.tag == tag) {
      drop("a second copy of node #" + std::to_string(tag.segment) + "'s " +
               (summary ? "summary" : "data chunk " + std::to_string(tag.chunk)) + " for op " +
               std::to_string(header.op),
           false);
      return;
    }
    summary_kept = summary_kept ||
                   (kept.tag.phase == collective::Phase::manifest && kept.tag.segment == origin);
  }
  if (!summary && !(data && summary_kept)) {
    drop("data of phase " + std::to_string(static_cast<int>(tag.phase)) + " (segment " +
             std::to_string(tag.segment) + ", chunk " + std::to_string(tag.chunk) + ", hop " +
             std::to_string(tag.hop) + ") for op " + std::to_string(header.op) +
             ", which this node has not begun: only the other nodes' summaries and the data "
             "behind them can come before it",
         false);
    return;
  }
  if (early_.size() < kMaxEarly)
    early_.emplace_back(header.op, std::move(msg));
  else
    drop("too many messages for an op this node has not begun", false);
}

}  // namespace zring::transport
