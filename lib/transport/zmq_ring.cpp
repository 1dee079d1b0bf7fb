#include "transport/zmq_ring.hpp"

#include <algorithm>

#include <zring/error.hpp>

#include "transport/zmq_calls.hpp"

namespace zring::transport {
namespace {

using collective::Clock;
using collective::Deadline;
using wire::RingHeader;
using wire::RingKind;

// Messages of the next op kept while this node has not begun it.
constexpr std::size_t kMaxEarly = 1024;

std::string ms_text(Clock::duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
}

RingHeader control(RingKind kind, std::uint64_t generation, std::uint64_t op = 0) {
  RingHeader header;
  header.kind = kind;
  header.generation = generation;
  header.op = op;
  return header;
}

// A ZeroMQ message that shares the bytes (and keeps their owner alive until
// ZeroMQ has sent them): no copy of chunk payloads on the way out.
zmq::message_t share(const collective::Bytes& bytes) {
  if (bytes.size() == 0) return zmq::message_t();
  auto* keep = new std::shared_ptr<const void>(bytes.owner());
  return zmq::message_t(const_cast<std::uint8_t*>(bytes.data()), bytes.size(),
                        [](void*, void* hint) { delete static_cast<std::shared_ptr<const void>*>(hint); },
                        keep);
}

}  // namespace

ZmqRing::ZmqRing(zmq::context_t& context, ZmqRingOptions options)
    : options_(std::move(options)), in_(context, zmq::socket_type::pull),
      out_(context, zmq::socket_type::push), monitor_(context, zmq::socket_type::pair),
      out_monitor_(context, zmq::socket_type::pair),
      random_(std::random_device{}()) {
  const auto now = Clock::now();
  last_heard_ = next_heartbeat_ = next_form_ = now;
  const auto max_message = static_cast<std::int64_t>(options_.max_message_bytes);
  in_.set(zmq::sockopt::linger, 0);
  in_.set(zmq::sockopt::maxmsgsize, max_message);
  in_.set(zmq::sockopt::rcvhwm, 100000);
  out_.set(zmq::sockopt::linger, 0);
  out_.set(zmq::sockopt::maxmsgsize, max_message);  // a PUSH receives nothing; set all the same
  out_.set(zmq::sockopt::sndhwm, 100000);
  out_.set(zmq::sockopt::immediate, 1);  // never queue for a successor that is not there
  out_.set(zmq::sockopt::reconnect_ivl, 100);
  out_.set(zmq::sockopt::reconnect_ivl_max, 1000);
  watch_sockets();
  if (options_.curve) setup_curve(context);
  const std::string& address = options_.addresses.at(options_.self);
  try {
    in_.bind(address);
  } catch (const zmq::error_t& e) {
    throw Error(ErrorCode::connection_failed, "cannot bind the ring socket of " +
                                                  describe(options_.self) + ": " + e.what() +
                                                  " (is another zringd using the port?)");
  }
  if (nodes() == 1) {
    generation_ = random_() | 1;
    up_ = true;
    down_reason_.clear();
    return;
  }
  out_.connect(options_.addresses.at((options_.self + 1) % nodes()));
}

std::string ZmqRing::describe(std::size_t node) const {
  if (node >= nodes()) return "node #" + std::to_string(node);
  return "node '" + options_.names[node] + "' (" + options_.addresses[node] + ")";
}

std::string ZmqRing::down_reason() const {
  if (up_) return std::string();
  return successor_problem_.empty() ? down_reason_ : down_reason_ + "; " + successor_problem_;
}

// --- sending -------------------------------------------------------------------

void ZmqRing::send(const collective::ChunkTag& tag, collective::Bytes payload) {
  RingHeader header;
  header.kind = RingKind::data;
  header.generation = generation_;
  header.op = op_.value_or(0);
  header.sender = static_cast<std::uint32_t>(options_.self);
  header.tag = tag;
  enqueue(header, share(payload));
  flush();
}

void ZmqRing::send_control(RingHeader header) {
  header.sender = static_cast<std::uint32_t>(options_.self);
  if (header.kind == RingKind::heartbeat && !outbox_.empty()) return;  // data proves liveness
  enqueue(header, std::nullopt);
  flush();
}

void ZmqRing::enqueue(const RingHeader& header, std::optional<zmq::message_t> payload) {
  const std::vector<std::uint8_t> bytes = wire::encode_ring_header(header);
  Outgoing out;
  out.header = zmq::message_t(bytes.data(), bytes.size());
  out.has_payload = payload.has_value();
  if (payload) out.payload = std::move(*payload);
  outbox_.push_back(std::move(out));
}

void ZmqRing::flush() {
  while (!outbox_.empty()) {
    Outgoing& out = outbox_.front();
    const std::size_t size = out.header.size() + out.payload.size();
    if (!out.header_sent) {
      const auto more = out.has_payload ? zmq::send_flags::sndmore : zmq::send_flags::none;
      if (!out_.send(out.header, more | zmq::send_flags::dontwait)) return;  // successor busy or away
      out.header_sent = true;
    }
    if (out.has_payload && !out_.send(out.payload, zmq::send_flags::dontwait)) return;
    counters_.bytes_sent += size;
    outbox_.pop_front();
  }
}

// --- receiving -----------------------------------------------------------------

collective::Message ZmqRing::recv(Deadline deadline) {
  if (std::optional<collective::Message> msg = recv_until(deadline)) return std::move(*msg);
  std::string text = "op " + std::to_string(op_.value_or(0)) + ": timed out after " +
                     ms_text(options_.timeout) + " waiting for " + describe(predecessor());
  if (counters_.dropped != 0)
    text += " (" + std::to_string(counters_.dropped) + " messages dropped, last: " +
            counters_.last_drop + ")";
  throw Error(ErrorCode::timeout, text);
}

std::optional<collective::Message> ZmqRing::recv_until(Deadline deadline) {
  for (;;) {
    if (op_failure_) op_failure_->raise();
    if (!early_.empty() && op_ && early_.front().first == *op_) {
      collective::Message msg = std::move(early_.front().second);
      early_.pop_front();
      return msg;
    }
    if (auto msg = poll_once(deadline, nullptr, nullptr)) return msg;
    if (interrupted()) throw Error(ErrorCode::aborted, "zringd is shutting down");
    if (op_failure_) op_failure_->raise();
    if (Clock::now() >= deadline) return std::nullopt;
  }
}

void ZmqRing::service(Deadline until, zmq::socket_t* wake) {
  bool woken = false;
  const bool was_up = up_;
  while (!woken && !interrupted() && up_ == was_up && Clock::now() < until) {
    // Outside an op, data can only be for the next op: dispatch keeps it.
    (void)poll_once(until, wake, &woken);
  }
}

std::optional<collective::Message> ZmqRing::poll_once(Deadline until, zmq::socket_t* wake,
                                                      bool* woken) {
  const auto now = Clock::now();
  // Sleep until the earliest timer that can fire in this state.
  Deadline next = until;
  if (nodes() > 1) {
    next = std::min(next, next_heartbeat_);
    if (reconnect_at_) next = std::min(next, *reconnect_at_);
    next = std::min(next, up_ ? last_heard_ + options_.timeout : next_form_);
  }
  auto wait = std::max<Clock::duration>(next - now, Clock::duration::zero());
  if (interrupt_) wait = std::min<Clock::duration>(wait, std::chrono::milliseconds(100));
  std::array<zmq::pollitem_t, 6> items{};
  std::size_t count = 0;
  items[count++] = {in_.handle(), 0, ZMQ_POLLIN, 0};
  items[count++] = {out_.handle(), 0, static_cast<short>(outbox_.empty() ? 0 : ZMQ_POLLOUT), 0};
  items[count++] = {monitor_.handle(), 0, ZMQ_POLLIN, 0};
  items[count++] = {out_monitor_.handle(), 0, ZMQ_POLLIN, 0};
  const std::size_t zap_at = count;
  if (zap_) items[count++] = {zap_.handle(), 0, ZMQ_POLLIN, 0};
  const std::size_t wake_at = count;
  if (wake) items[count++] = {wake->handle(), 0, ZMQ_POLLIN, 0};
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(wait);
  (void)poll_items(items.data(), count, ms);
  if (items[1].revents & ZMQ_POLLOUT) flush();
  if (items[2].revents & ZMQ_POLLIN) read_monitor();
  if (items[3].revents & ZMQ_POLLIN) read_out_monitor();
  if (zap_ && (items[zap_at].revents & ZMQ_POLLIN)) answer_zap();
  if (wake && (items[wake_at].revents & ZMQ_POLLIN)) *woken = true;
  std::optional<collective::Message> got;
  if (items[0].revents & ZMQ_POLLIN) {
    // Drain what is queued, but hand over the first data message at once.
    for (int i = 0; i < 256 && !got; ++i) {
      bool more = false;
      got = receive_one(&more);
      if (!more) break;
    }
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
    const auto member = user ? std::find(options_.names.begin(), options_.names.end(), user) : options_.names.end();
    if (member == options_.names.end()) {
      drop("a message without a ring member's CurveZMQ identity", false);
      return std::nullopt;
    }
    authenticated = static_cast<std::size_t>(member - options_.names.begin());
  }
  return dispatch(std::move(decoded), std::move(payload), authenticated);
}

std::optional<collective::Message> ZmqRing::dispatch(RingHeader header,
                                                     std::optional<zmq::message_t> payload,
                                                     std::optional<std::size_t> authenticated) {
  if (authenticated && header.sender != *authenticated) {
    drop("a message signed by " + describe(*authenticated) + "'s key claiming to come from node #" +
             std::to_string(header.sender), false);
    return std::nullopt;
  }
  if (header.sender != predecessor()) {
    drop("a message claiming to come from node #" + std::to_string(header.sender) +
             ", which is not this node's predecessor", false);
    return std::nullopt;
  }
  last_heard_ = Clock::now();
  if (header.kind != RingKind::data) {
    if (payload) drop("a control message with a payload frame", true);
    else on_control(header);
    return std::nullopt;
  }
  if (!payload) {
    drop("a data message without its payload frame", true);
    return std::nullopt;
  }
  if (!up_ || header.generation != generation_) {
    drop("data of another ring generation", false);
    return std::nullopt;
  }
  const bool current = op_ && header.op == *op_;
  const bool next = header.op == next_op_;
  if (!current && !next) {
    drop("data of op " + std::to_string(header.op) + " while this node is at op " +
             std::to_string(op_.value_or(next_op_)), false);
    return std::nullopt;
  }
  auto owner = std::make_shared<zmq::message_t>(std::move(*payload));
  collective::Message msg{header.tag, collective::Bytes(owner->data<std::uint8_t>(), owner->size(), owner)};
  if (current) return msg;
  keep_early(header, std::move(msg));
  return std::nullopt;
}

// Before this node begins an op, the others can only be in its first phase,
// the all-gather of every node's summary and the data the summaries
// announce (collective::ring_allgather_with_data): no op gets further
// without this node's summary. A summary travels as one message (chunk 0)
// tagged with its origin and hop, and a node's data chunks only behind its
// summary. So only those are kept for the op: other nodes' summaries, each
// once (at most nodes() - 1, however many frames claim to be for it), and
// data chunks, each once, of a node whose summary is kept; kMaxEarly
// messages in all.
void ZmqRing::keep_early(const RingHeader& header, collective::Message msg) {
  const collective::ChunkTag& tag = header.tag;
  const bool from_other = tag.segment < nodes() && tag.segment != options_.self &&
                          tag.hop == (options_.self + nodes() - tag.segment) % nodes();
  const bool summary = tag.phase == collective::Phase::manifest && tag.chunk == 0 && from_other;
  const bool data = tag.phase == collective::Phase::blobs && from_other;
  bool summary_kept = false;
  for (const auto& [op, kept] : early_) {
    if (op != header.op) continue;
    if (kept.tag == tag) {
      drop("a second copy of node #" + std::to_string(tag.segment) + "'s " +
               (summary ? "summary" : "data chunk " + std::to_string(tag.chunk)) + " for op " +
               std::to_string(header.op), false);
      return;
    }
    summary_kept = summary_kept || (kept.tag.phase == collective::Phase::manifest &&
                                    kept.tag.segment == tag.segment);
  }
  if (!summary && !(data && summary_kept)) {
    drop("data of phase " + std::to_string(static_cast<int>(tag.phase)) + " (segment " +
             std::to_string(tag.segment) + ", chunk " + std::to_string(tag.chunk) + ", hop " +
             std::to_string(tag.hop) + ") for op " + std::to_string(header.op) +
             ", which this node has not begun: only the other nodes' summaries and the data "
             "behind them can come before it", false);
    return;
  }
  if (early_.size() < kMaxEarly) early_.emplace_back(header.op, std::move(msg));
  else drop("too many messages for an op this node has not begun", false);
}

void ZmqRing::on_control(const RingHeader& header) {
  switch (header.kind) {
    case RingKind::heartbeat:
      if (up_ && header.generation != generation_)
        go_down(describe(predecessor()) + " is in another ring generation (it restarted?)", true);
      return;
    case RingKind::form:
      if (coordinator()) {
        if (header.generation != 0 && header.generation == forming_) {
          adopt(forming_, down_reason_);
          forming_ = 0;
          send_control(control(RingKind::up, generation_));
        }
        return;
      }
      if (header.generation != generation_ || up_) adopt(header.generation, header.text);
      {
        // Passed on with the coordinator's reason, so every node can name it.
        RingHeader form = control(RingKind::form, header.generation);
        form.text = header.text;
        send_control(form);
      }
      return;
    case RingKind::up:
      if (header.generation != generation_ || up_) return;
      up_ = true;
      down_reason_.clear();
      if (!coordinator()) send_control(control(RingKind::up, generation_));
      return;
    case RingKind::reform:
      if (coordinator()) {
        if (up_) go_down("node '" + options_.names[header.origin % nodes()] + "' asked for a new ring: " +
                             header.text, false);
        return;
      }
      send_control(header);
      return;
    case RingKind::abort:
      on_abort(header);
      return;
    case RingKind::data: return;
  }
}

void ZmqRing::on_abort(const RingHeader& header) {
  if (header.origin == options_.self) return;  // it went all the way round
  send_control(header);
  if (header.generation != generation_) return;
  const std::string why = "op " + std::to_string(header.op) + " was aborted by node '" +
                          options_.names[header.origin % nodes()] + "': " + header.text;
  if (op_ && header.op == *op_) {
    op_failure_ = Status{ErrorCode::aborted, why};
  } else if (!op_ && header.op == next_op_) {
    poisoned_ = Status{ErrorCode::aborted, why};  // this node's ranks are late for it: fail theirs too
  }
}

void ZmqRing::run_timers() {
  if (nodes() == 1) return;
  const auto now = Clock::now();
  if (reconnect_at_ && now >= *reconnect_at_) reconnect_successor();
  if (now >= next_heartbeat_) {
    send_control(control(RingKind::heartbeat, generation_));
    next_heartbeat_ = now + options_.heartbeat;
  }
  if (up_ && now - last_heard_ > options_.timeout) {
    go_down("nothing heard from " + describe(predecessor()) + " for " + ms_text(now - last_heard_) +
                " (is its zringd running?)", true);
  }
  if (!up_ && now >= next_form_) {
    next_form_ = now + std::max<Clock::duration>(options_.heartbeat, std::chrono::milliseconds(200));
    if (coordinator()) {
      forming_ = random_() | 1;  // never 0: 0 means "no generation"
      RingHeader form = control(RingKind::form, forming_);
      form.text = down_reason_;  // why the ring is re-forming: names the node
      send_control(form);
    } else {
      RingHeader reform = control(RingKind::reform, generation_);
      reform.origin = static_cast<std::uint32_t>(options_.self);
      reform.text = down_reason_;
      send_control(reform);
    }
  }
}

void ZmqRing::go_down(const std::string& why, bool request_reform) {
  up_ = false;
  down_reason_ = why;
  if (op_ && !op_failure_) op_failure_ = Status{ErrorCode::peer_lost, why};
  next_form_ = Clock::now();
  if (!request_reform || coordinator()) return;
  RingHeader reform = control(RingKind::reform, generation_);
  reform.origin = static_cast<std::uint32_t>(options_.self);
  reform.text = why;
  send_control(reform);
}

void ZmqRing::adopt(std::uint64_t generation, const std::string& why) {
  const std::string cause = why.empty() ? std::string("a node restarted or failed") : why;
  if (op_ && !op_failure_)
    op_failure_ = Status{ErrorCode::aborted, "the ring re-formed during the op: " + cause};
  generation_ = generation;
  up_ = false;
  down_reason_ = "the ring is re-forming: " + cause;
  next_op_ = 0;
  poisoned_.reset();  // an abort of the old generation's op says nothing about the new one
  early_.clear();
  ++counters_.formations;
}

// --- ops -------------------------------------------------------------------------

std::uint64_t ZmqRing::begin_op() {
  if (!up_) throw Error(ErrorCode::peer_lost, "the ring is not up: " + down_reason());
  const std::uint64_t op = next_op_++;
  if (poisoned_) {
    Status why = *std::move(poisoned_);
    poisoned_.reset();
    early_.clear();
    // The others are re-forming the ring; wait for that before the next op.
    go_down("waiting for the ring to re-form after op " + std::to_string(op) + " was aborted",
            false);
    why.text += " (before this node's ranks had all submitted it)";
    why.raise();
  }
  op_ = op;
  op_failure_.reset();
  while (!early_.empty() && early_.front().first != op) early_.pop_front();
  return op;
}

void ZmqRing::end_op(const std::optional<Status>& failure) {
  const std::uint64_t op = op_.value_or(0);
  const bool aborted_by_others = op_failure_.has_value();
  op_.reset();
  op_failure_.reset();
  if (!failure || failure->everyone_knows) return;
  // Our ranks and the others' may now disagree on what the next op is:
  // start a new generation, and tell the others to fail this op now.
  if (!aborted_by_others && nodes() > 1) {
    RingHeader abort = control(RingKind::abort, generation_, op);
    abort.origin = static_cast<std::uint32_t>(options_.self);
    abort.error_code = static_cast<std::uint32_t>(failure->code);
    abort.text = failure->text;
    send_control(abort);
  }
  if (nodes() > 1) go_down("op " + std::to_string(op) + " failed: " + failure->text, !aborted_by_others);
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
