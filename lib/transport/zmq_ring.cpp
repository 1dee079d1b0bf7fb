#include "transport/zmq_ring.hpp"

#include <algorithm>
#include <zring/error.hpp>

#include "config/endpoint.hpp"
#include "transport/zmq_calls.hpp"

namespace zring::transport {
namespace {

using collective::Clock;
using collective::Deadline;
using wire::RingHeader;
using wire::RingKind;

// A ZeroMQ message that shares the bytes (and keeps their owner alive until
// ZeroMQ has sent them): no copy of chunk payloads on the way out.
zmq::message_t share(const collective::Bytes& bytes) {
  if (bytes.size() == 0) return zmq::message_t();
  auto* keep = new std::shared_ptr<const void>(bytes.owner());
  return zmq::message_t(
      const_cast<std::uint8_t*>(bytes.data()), bytes.size(),
      [](void*, void* hint) { delete static_cast<std::shared_ptr<const void>*>(hint); }, keep);
}

}  // namespace

ZmqRing::ZmqRing(zmq::context_t& context, ZmqRingOptions options)
    : options_(std::move(options)),
      membership_(
          [&] {
            MembershipOptions m;
            m.names = options_.names;
            for (std::size_t n = 0; n < options_.names.size(); ++n)
              m.labels.push_back(label(n));  // options_ is set: label() reads only it
            m.self = options_.self;
            m.min_nodes =
                options_.min_nodes != 0 ? options_.min_nodes : options_.names.size() / 2 + 1;
            m.timeout = options_.timeout;
            m.heartbeat = options_.heartbeat;
            m.settings = options_.settings;
            m.settings.nodes = wire::ring_fingerprint(options_.names, options_.addresses);
            return m;
          }(),
          std::random_device{}(), Clock::now()),
      in_(context, zmq::socket_type::pull),
      monitor_(context, zmq::socket_type::pair),
      peers_(options_.names.size()) {
  const auto max_message = static_cast<std::int64_t>(options_.max_message_bytes);
  in_.set(zmq::sockopt::linger, 0);
  in_.set(zmq::sockopt::maxmsgsize, max_message);
  in_.set(zmq::sockopt::rcvhwm, 100000);
  set_connection_liveness(in_);
  for (std::size_t n = 0; n < listed(); ++n) {
    if (n == options_.self) continue;
    zmq::socket_t& out = peers_[n].out = zmq::socket_t(context, zmq::socket_type::push);
    out.set(zmq::sockopt::linger, 0);
    out.set(zmq::sockopt::maxmsgsize, max_message);  // a PUSH receives nothing; set all the same
    out.set(zmq::sockopt::sndhwm, 100000);
    out.set(zmq::sockopt::immediate, 1);  // never queue for a peer that is not there
    out.set(zmq::sockopt::reconnect_ivl, 100);
    out.set(zmq::sockopt::reconnect_ivl_max, 1000);
    set_connection_liveness(out);
    // A connect to a host that is cut off waits for the kernel's SYN
    // retries (1, 3, 7, 15 s ...); give up after a second and try again.
    out.set(zmq::sockopt::connect_timeout,
            static_cast<int>(std::max<std::int64_t>(1000, 2 * options_.heartbeat.count())));
  }
  watch_sockets(context);
  if (options_.curve) setup_curve(context);
  const std::string& address = options_.addresses.at(options_.self);
  try {
    in_.bind(address);
  } catch (const zmq::error_t& e) {
    throw Error(ErrorCode::connection_failed, "cannot bind the ring socket of " +
                                                  label(options_.self) + ": " + e.what() +
                                                  " (is another zringd using the port?)");
  }
  if (options_.tcp_data && !options_.curve) {
    // On the host ZeroMQ bound to (a name in the ring file is resolved there).
    TcpDataOptions tcp;
    tcp.self = options_.self;
    for (const std::string& node_address : options_.addresses)
      tcp.hosts.push_back(config::parse_tcp_address(node_address).host);
    tcp.bind_host = config::parse_tcp_address(in_.get(zmq::sockopt::last_endpoint)).host;
    tcp.ring = wire::ring_fingerprint(options_.names, options_.addresses);
    tcp.max_message_bytes = options_.max_message_bytes;
    tcp.timeout = options_.timeout;
    tcp.congestion = options_.tcp_congestion;
    tcp_ = std::make_unique<TcpData>(std::move(tcp));
  }
  for (std::size_t n = 0; n < listed(); ++n)
    if (n != options_.self) peers_[n].out.connect(options_.addresses.at(n));
  apply_membership();
}

// ZMTP heartbeats on every connection: one that carries nothing back for
// timeout_ms (a cut link, a host gone) is closed and connected anew. Without
// them a connection cut for a while stays open in the kernel and carries
// traffic again only at TCP's next retransmission, which backs off while the
// link is down (21 s after a cut of a few seconds in the netns test): the
// node would rejoin that late.
void ZmqRing::set_connection_liveness(zmq::socket_t& socket) const {
  socket.set(zmq::sockopt::heartbeat_ivl, static_cast<int>(options_.heartbeat.count()));
  socket.set(zmq::sockopt::heartbeat_timeout, static_cast<int>(options_.timeout.count()));
}

std::size_t ZmqRing::member_at(std::size_t position) const noexcept {
  const std::vector<std::uint32_t>& ring = op_ ? op_members_ : membership_.members();
  return position < ring.size() ? ring[position] : listed();
}

std::optional<std::size_t> ZmqRing::position_of(std::size_t listed_index) const noexcept {
  const std::vector<std::uint32_t>& ring = op_ ? op_members_ : membership_.members();
  const auto at = std::find(ring.begin(), ring.end(), listed_index);
  if (at == ring.end()) return std::nullopt;
  return static_cast<std::size_t>(at - ring.begin());
}

std::size_t ZmqRing::node() const noexcept { return position_of(options_.self).value_or(0); }

std::size_t ZmqRing::nodes() const noexcept {
  const std::size_t n = (op_ ? op_members_ : membership_.members()).size();
  return n == 0 ? 1 : n;
}

std::string ZmqRing::label(std::size_t listed_index) const {
  if (listed_index >= listed()) return "node #" + std::to_string(listed_index);
  return "node '" + options_.names[listed_index] + "' (" + options_.addresses[listed_index] + ")";
}

std::string ZmqRing::describe(std::size_t position) const { return label(member_at(position)); }

std::string ZmqRing::down_reason() const {
  if (up()) return std::string();
  std::string text = membership_.down_reason();
  for (const Peer& peer : peers_)
    if (!peer.problem.empty()) text += "; " + peer.problem;
  return text;
}

// --- sending -------------------------------------------------------------------

// Data of the running op, to its successor; nothing once the ring that op
// ran on has ended (the op fails at its next receive).
void ZmqRing::send(const collective::ChunkTag& tag, collective::Bytes payload) {
  send_to((node() + 1) % nodes(), tag, std::move(payload));
}

// The same to ring position `to` (the summaries and the data behind them).
void ZmqRing::send_to(std::size_t to, const collective::ChunkTag& tag, collective::Bytes payload) {
  if (!op_ || membership_.generation() != op_generation_) return;
  RingHeader header;
  header.kind = RingKind::data;
  header.generation = op_generation_;
  header.op = *op_;
  header.sender = static_cast<std::uint32_t>(options_.self);
  header.tag = tag;
  // Data before every summary is known (the data behind a summary, what a
  // schedule sends ahead) can let another node finish the op.
  if (!summaries_known_ && tag.phase != collective::Phase::manifest) data_ahead_ = true;
  const std::size_t peer = member_at(to);
  enqueue(peer, header, std::move(payload));
  flush(peer);
}

// Control messages wait behind data (FORM and UP must not overtake it), but
// a peer that is away gets at most a few of them: heartbeats only when
// nothing else waits (anything it receives proves this node alive). Once a
// peer takes this node's messages on a TCP connection, all of them go there.
void ZmqRing::enqueue(std::size_t peer, RingHeader header,
                      std::optional<collective::Bytes> payload) {
  if (peer >= listed() || peer == options_.self) return;
  send_switches();  // a change of way goes before anything else
  const bool tcp = tcp_ && tcp_->via_tcp(peer);
  std::deque<Outgoing>& outbox = peers_[peer].outbox;
  const std::size_t waiting = tcp ? tcp_->queued(peer) : outbox.size();
  const bool last_has_payload =
      tcp ? tcp_->last_has_payload(peer) : !outbox.empty() && outbox.back().has_payload;
  if (!payload &&
      (header.kind == RingKind::heartbeat ? waiting != 0 : waiting >= 64 && !last_has_payload))
    return;
  if (header.kind != RingKind::data) header.data_port = tcp_ ? tcp_->port() : 0;
  const std::vector<std::uint8_t> bytes = wire::encode_ring_header(header);
  if (tcp) {
    tcp_->send(peer, bytes, std::move(payload));
    send_switches();  // the connection may have failed on the way
    return;
  }
  Outgoing out;
  out.header = zmq::message_t(bytes.data(), bytes.size());
  out.has_payload = payload.has_value();
  if (payload) out.payload = share(*payload);
  outbox.push_back(std::move(out));
}

// Only the TCP connections hold their writes: ZeroMQ's I/O thread already
// writes what a peer's socket queued meanwhile in one go.
void ZmqRing::hold_sends() noexcept {
  if (tcp_) tcp_->hold(true);
}

void ZmqRing::release_sends() noexcept {
  if (!tcp_) return;
  try {
    tcp_->hold(false);
    send_switches();  // a connection may have failed on the way
  } catch (const std::exception&) {
    // Only a ZeroMQ context that is ending throws here; the ring thread
    // learns of that at its next poll.
  }
}

// The markers go on ZeroMQ whatever waits there: they are never dropped.
void ZmqRing::send_switches() {
  if (!tcp_) return;
  for (std::vector<TcpSwitch> switches = tcp_->take_switches(); !switches.empty();
       switches = tcp_->take_switches()) {
    for (const TcpSwitch& change : switches) {
      RingHeader marker;
      marker.kind = change.to_tcp ? RingKind::data_via_tcp : RingKind::data_via_zmq;
      marker.generation = generation();
      marker.op = change.nonce;
      marker.sender = static_cast<std::uint32_t>(options_.self);
      marker.data_port = tcp_->port();
      const std::vector<std::uint8_t> bytes = wire::encode_ring_header(marker);
      Outgoing out;
      out.header = zmq::message_t(bytes.data(), bytes.size());
      peers_[change.peer].outbox.push_back(std::move(out));
      flush(change.peer);
    }
  }
}

void ZmqRing::flush(std::size_t peer) {
  Peer& p = peers_[peer];
  while (!p.outbox.empty()) {
    Outgoing& out = p.outbox.front();
    const std::size_t size = out.header.size() + out.payload.size();
    if (!out.header_sent) {
      const auto more = out.has_payload ? zmq::send_flags::sndmore : zmq::send_flags::none;
      if (!p.out.send(out.header, more | zmq::send_flags::dontwait)) return;  // peer busy or away
      out.header_sent = true;
    }
    if (out.has_payload && !p.out.send(out.payload, zmq::send_flags::dontwait)) return;
    counters_.bytes_sent += size;
    p.outbox.pop_front();
  }
}

// ABORT comes straight from the member whose op failed.
void ZmqRing::on_abort(const RingHeader& header) {
  if (header.generation != generation() || !membership_.is_member(header.sender)) return;
  const std::string why = "op " + std::to_string(header.op) + " was aborted by node '" +
                          options_.names[header.sender] + "': " + header.text;
  // A member that met a change of the ring says so: the op can run again.
  const ErrorCode code = header.error_code == static_cast<std::uint32_t>(ErrorCode::ring_changed)
                             ? ErrorCode::ring_changed
                             : ErrorCode::aborted;
  if (op_ && header.op == *op_) {
    if (!op_failure_) op_failure_ = Status{code, why};
  } else if (!op_ && header.op == next_op_) {
    poisoned_ = Status{code, why};  // this node's ranks are late for it: fail theirs too
  }
}

// A ring thread that did not run for a timeout sent nothing for that long:
// every other node has dropped this one and failed the ops it was in. What
// it read meanwhile belongs to that ring, which is over: it goes down before
// reading on, its op in flight fails without running again (the others'
// copy of it is over too), and it asks for a new ring.
void ZmqRing::check_stall(Deadline now, Clock::duration waited) {
  const std::optional<Deadline> since = std::exchange(alive_, now);
  if (!since || now - *since - waited < options_.timeout || listed() == 1) return;
  const std::string why = "zringd did not run for " + ms_text(now - *since - waited) +
                          " (it was stopped or starved), longer than timeout_ms " +
                          std::to_string(options_.timeout.count()) +
                          ": the other nodes have dropped this one";
  stall_ = Stall{why, Clock::now()};
  // peer_lost, not ring_changed: a client that retries on a ring change
  // would pair this op with the others' next one.
  if (op_) {
    op_failure_ = Status{ErrorCode::peer_lost, why};
    retry_ = false;
  }
  membership_.fail(why, true, now);
  apply_membership();
}

void ZmqRing::run_timers() {
  const auto now = Clock::now();
  for (std::size_t n = 0; n < listed(); ++n)
    if (peers_[n].reconnect_at && now >= *peers_[n].reconnect_at) reconnect(n);
  membership_.tick(now);
  apply_membership();
}

// What the membership protocol decided: its messages go out, a broken ring
// fails the op in flight, and a new generation starts counting ops afresh.
void ZmqRing::apply_membership() {
  std::vector<std::size_t> touched;
  for (MembershipSend& out : membership_.take_sends()) {
    enqueue(out.to, out.header, std::nullopt);
    touched.push_back(out.to);
  }
  if (std::optional<Status> broken = membership_.take_break()) {
    if (op_ && !op_failure_) {
      op_failure_ = std::move(broken);
      retry_ = !summaries_known_;
    }
  }
  if (membership_.take_adopted()) {
    next_op_ = 0;
    poisoned_.reset();  // an abort of the old generation's op says nothing about the new one
    early_.clear();
    ++counters_.formations;
    // Data of the old generation that has not started out never will.
    if (tcp_) tcp_->drop_unstarted_payloads();
    for (Peer& peer : peers_) {
      std::deque<Outgoing> kept;
      for (Outgoing& out : peer.outbox)
        if (!out.has_payload || out.header_sent) kept.push_back(std::move(out));
      peer.outbox = std::move(kept);
    }
  }
  for (const std::size_t n : touched) flush(n);
}

// --- ops -------------------------------------------------------------------------

std::uint64_t ZmqRing::begin_op(bool short_op) {
  if (!up()) throw Error(ErrorCode::peer_lost, "the ring is not up: " + down_reason());
  const std::uint64_t op = next_op_++;
  if (poisoned_) {
    Status why = *std::move(poisoned_);
    poisoned_.reset();
    early_.clear();
    // The others are re-forming the ring; wait for that before the next op.
    membership_.fail(
        "waiting for the ring to re-form after op " + std::to_string(op) + " was aborted", false,
        Clock::now());
    apply_membership();
    why.text += " (before this node's ranks had all submitted it)";
    why.raise();
  }
  op_members_ = membership_.members();
  op_generation_ = generation();
  op_ = op;
  short_op_ = short_op;
  op_failure_.reset();
  summaries_known_ = retry_ = data_ahead_ = false;
  membership_.op_began();
  while (!early_.empty() && early_.front().first != op) early_.pop_front();
  return op;
}

void ZmqRing::end_op(const std::optional<Status>& failure) {
  const std::uint64_t op = op_.value_or(0);
  const bool aborted_by_others = op_failure_.has_value();
  const bool ring_changed = op_failure_ && retry_;
  const std::vector<std::uint32_t> ring = std::move(op_members_);
  if (std::exchange(short_op_, false)) busy_until_ = Clock::now() + options_.busy_poll;
  op_.reset();
  put_back_.clear();
  op_failure_.reset();
  summaries_known_ = retry_ = data_ahead_ = false;
  membership_.op_ended();
  // A ring change before the summaries: the ring is re-forming already.
  if (!failure || failure->everyone_knows || listed() == 1 || ring_changed) return;
  // Our ranks and the others' may now disagree on what the next op is:
  // start a new generation, and tell the others to fail this op now.
  if (!aborted_by_others && op_generation_ == generation()) {
    RingHeader abort;
    abort.kind = RingKind::abort;
    abort.generation = op_generation_;
    abort.op = op;
    abort.sender = abort.origin = static_cast<std::uint32_t>(options_.self);
    abort.error_code = static_cast<std::uint32_t>(failure->code);
    abort.text = failure->text;
    for (const std::uint32_t m : ring) enqueue(m, abort, std::nullopt);
  }
  if (op_generation_ == generation())
    membership_.fail("op " + std::to_string(op) + " failed: " + failure->text, !aborted_by_others,
                     Clock::now());
  apply_membership();
  for (const std::uint32_t m : ring)
    if (m != options_.self) flush(m);
}

RingCounters ZmqRing::counters() const {
  RingCounters counters = counters_;
  if (tcp_) {
    counters.bytes_sent += tcp_->counters().bytes_sent;
    counters.bytes_received += tcp_->counters().bytes_received;
    counters.data_refused = tcp_->counters().refused;
    counters.last_data_refusal = tcp_->counters().last_refusal;
  }
  return counters;
}

void ZmqRing::count_drops(std::uint64_t count, const std::string& last) {
  if (count == 0) return;
  counters_.dropped += count;
  counters_.last_drop = last;
}

void ZmqRing::drop(const std::string& why, bool malformed) {
  ++counters_.dropped;
  if (malformed) ++counters_.malformed;
  counters_.last_drop = why;
}

}  // namespace zring::transport
