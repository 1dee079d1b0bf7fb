// ring_guard.cpp - who may talk to the ring (part of ZmqRing): CurveZMQ keys
// and the ZAP handler that admits only the ring's members, and monitors on
// the ring sockets that count refused handshakes and closed connections and
// notice when the successor refuses this node.
#include <cstring>
#include <zring/error.hpp>

#include "config/keys.hpp"
#include "transport/zmq_ring.hpp"

namespace zring::transport {
namespace {

using collective::Clock;

// The ZAP endpoint libzmq asks (RFC 27); one handler per ZeroMQ context.
constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";
constexpr int kHandshakeFailed = ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                                 ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                 ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
constexpr int kMonitorEvents = kHandshakeFailed | ZMQ_EVENT_DISCONNECTED;

// How long after a failed handshake with the successor this node connects
// to it again (the successor's key or ring file may have been fixed).
constexpr auto kReconnectAfter = std::chrono::seconds(1);

// The event number of a monitor message, after reading all of its frames;
// nothing when no event is waiting.
std::optional<std::uint16_t> next_event(zmq::socket_t& monitor) {
  zmq::message_t event;
  if (!monitor.recv(event, zmq::recv_flags::dontwait)) return std::nullopt;
  std::uint16_t id = 0;
  if (event.size() >= sizeof id) std::memcpy(&id, event.data(), sizeof id);
  while (event.more()) {
    zmq::message_t rest;
    if (!monitor.recv(rest, zmq::recv_flags::dontwait)) break;
    event = std::move(rest);
  }
  return id;
}

void set_key(zmq::socket_t& socket, int option, const config::CurveKey& key) {
  if (zmq_setsockopt(socket.handle(), option, key.data(), key.size()) != 0)
    throw Error(ErrorCode::internal, std::string("cannot set a CurveZMQ key on a ring socket: ") +
                                         zmq_strerror(zmq_errno()));
}

std::string frame_text(const zmq::message_t& frame) { return frame.to_string(); }

}  // namespace

// Handshake failures and closed connections on the ring port, for the
// counters; each peer's verdict on this node's handshakes.
void ZmqRing::watch_sockets(zmq::context_t& context) {
  const std::string monitor_endpoint =
      "inproc://zring-ring-monitor-" + std::to_string(reinterpret_cast<std::uintptr_t>(this));
  if (zmq_socket_monitor(in_.handle(), monitor_endpoint.c_str(), kMonitorEvents) != 0)
    throw Error(ErrorCode::internal,
                std::string("cannot monitor the ring socket: ") + zmq_strerror(zmq_errno()));
  monitor_.set(zmq::sockopt::linger, 0);
  monitor_.set(zmq::sockopt::maxmsgsize, std::int64_t{64 * 1024});
  monitor_.connect(monitor_endpoint);
  for (std::size_t n = 0; n < listed(); ++n) {
    if (n == options_.self) continue;
    Peer& peer = peers_[n];
    const std::string out_endpoint = monitor_endpoint + "-out-" + std::to_string(n);
    if (zmq_socket_monitor(peer.out.handle(), out_endpoint.c_str(),
                           kHandshakeFailed | ZMQ_EVENT_HANDSHAKE_SUCCEEDED) != 0)
      throw Error(ErrorCode::internal,
                  std::string("cannot monitor the ring socket: ") + zmq_strerror(zmq_errno()));
    peer.monitor = zmq::socket_t(context, zmq::socket_type::pair);
    peer.monitor.set(zmq::sockopt::linger, 0);
    peer.monitor.set(zmq::sockopt::maxmsgsize, std::int64_t{64 * 1024});
    peer.monitor.connect(out_endpoint);
  }
}

ZmqRing::~ZmqRing() {
  (void)zmq_socket_monitor(in_.handle(), nullptr, 0);
  for (Peer& peer : peers_)
    if (peer.out) (void)zmq_socket_monitor(peer.out.handle(), nullptr, 0);
}

// The PULL socket becomes a CURVE server answering to this node's secret
// key, with this ring's ZAP handler; each PUSH socket a CURVE client that
// expects its peer's public key.
void ZmqRing::setup_curve(zmq::context_t& context) {
  const CurveKeys& keys = *options_.curve;
  if (keys.public_keys.size() != listed())
    throw Error(ErrorCode::internal, "CurveZMQ: " + std::to_string(keys.public_keys.size()) +
                                         " public keys for " + std::to_string(listed()) + " nodes");
  for (const std::string& key : keys.public_keys)
    member_keys_.push_back(config::decode_z85_key(key));
  const config::CurveKey secret = config::decode_z85_key(keys.secret_key);
  zap_ = zmq::socket_t(context, zmq::socket_type::rep);
  zap_.set(zmq::sockopt::linger, 0);
  zap_.set(zmq::sockopt::maxmsgsize, std::int64_t{64 * 1024});
  try {
    zap_.bind(kZapEndpoint);
  } catch (const zmq::error_t& e) {
    throw Error(ErrorCode::internal,
                std::string("cannot start the ring's CurveZMQ ZAP handler on ") + kZapEndpoint +
                    ": " + e.what() + " (another one in this ZeroMQ context?)");
  }
  in_.set(zmq::sockopt::curve_server, 1);
  in_.set(zmq::sockopt::zap_domain, "zring");
  set_key(in_, ZMQ_CURVE_SECRETKEY, secret);
  for (std::size_t n = 0; n < listed(); ++n) {
    if (n == options_.self) continue;
    zmq::socket_t& out = peers_[n].out;
    set_key(out, ZMQ_CURVE_SERVERKEY, member_keys_[n]);
    set_key(out, ZMQ_CURVE_PUBLICKEY, member_keys_[options_.self]);
    set_key(out, ZMQ_CURVE_SECRETKEY, secret);
  }
}

// One ZAP request (RFC 27): [version, request id, domain, address, routing
// id, mechanism, credentials...]. A CURVE client is admitted when its public
// key is a ring member's; its messages then carry the member's name as
// User-Id. Everything else is refused and counted.
void ZmqRing::answer_zap() {
  for (int i = 0; i < 64; ++i) {
    std::vector<zmq::message_t> request;
    zmq::message_t frame;
    if (!zap_.recv(frame, zmq::recv_flags::dontwait)) return;
    request.push_back(std::move(frame));
    while (request.back().more()) {
      zmq::message_t part;
      if (!zap_.recv(part, zmq::recv_flags::dontwait)) break;
      request.push_back(std::move(part));
    }
    std::string status = "400", text = "not a key of this ring", user;
    std::string who = "a client";
    if (request.size() >= 7 && frame_text(request[5]) == "CURVE" && request[6].size() == 32) {
      config::CurveKey key{};
      std::memcpy(key.data(), request[6].data(), key.size());
      const auto member = std::find(member_keys_.begin(), member_keys_.end(), key);
      if (member != member_keys_.end()) {
        status = "200";
        text = "OK";
        user = options_.names[static_cast<std::size_t>(member - member_keys_.begin())];
      }
      who = "a CurveZMQ client at " + frame_text(request[3]) + " with key " +
            config::encode_z85_key(key);
    } else if (request.size() >= 6) {
      who = "a " + frame_text(request[5]) + " client at " + frame_text(request[3]);
    }
    if (status != "200") {
      ++counters_.auth_rejected;
      counters_.last_rejection = who + ", which is not one of the ring's keys";
    }
    const std::string version = request.empty() ? "1.0" : frame_text(request[0]);
    const std::string id = request.size() > 1 ? frame_text(request[1]) : "";
    (void)zap_.send(zmq::buffer(version), zmq::send_flags::sndmore);
    (void)zap_.send(zmq::buffer(id), zmq::send_flags::sndmore);
    (void)zap_.send(zmq::buffer(status), zmq::send_flags::sndmore);
    (void)zap_.send(zmq::buffer(text), zmq::send_flags::sndmore);
    (void)zap_.send(zmq::buffer(user), zmq::send_flags::sndmore);
    (void)zap_.send(zmq::message_t(), zmq::send_flags::none);
  }
}

// Monitor events: [u16 event, u32 value] then the endpoint.
void ZmqRing::read_monitor() {
  for (int i = 0; i < 256; ++i) {
    const std::optional<std::uint16_t> id = next_event(monitor_);
    if (!id) return;
    if (*id == ZMQ_EVENT_DISCONNECTED) {
      ++counters_.disconnects;
    } else if (*id & kHandshakeFailed) {
      ++counters_.handshakes_failed;
      counters_.last_handshake_failure =
          *id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
              ? "a client refused by the ZAP handler (its key is not the ring's)"
          : *id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
              ? "a client that broke the handshake (no CurveZMQ keys, the wrong server key, or "
                "another protocol)"
              : "a client that went away or failed during the handshake";
    }
  }
}

// What a peer made of this node's handshake: said in down_reason, as a
// wrong key would otherwise only show as a ring that never forms.
void ZmqRing::read_out_monitor(std::size_t n) {
  Peer& peer = peers_[n];
  for (int i = 0; i < 256; ++i) {
    const std::optional<std::uint16_t> id = next_event(peer.monitor);
    if (!id) return;
    if (*id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
      peer.problem.clear();
      if (tcp_) {  // a marker the old connection still carried was lost with it
        tcp_->repeat_marker(n);
        send_switches();
      }
      continue;
    }
    if (!peer.reconnect_at) peer.reconnect_at = Clock::now() + kReconnectAfter;
    if (*id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
      peer.problem =
          label(n) +
          " refuses this node's CurveZMQ key (does its ring file have this node's current "
          "public_key?)";
    } else if (*id & kHandshakeFailed) {
      peer.problem =
          "the handshake with " + label(n) + " fails" +
          (options_.curve ? " (is its public_key in this node's ring file the right one, and does "
                            "it use CurveZMQ too?)"
                          : " (does it use CurveZMQ while this node does not?)");
    }
  }
}

void ZmqRing::reconnect(std::size_t n) {
  Peer& peer = peers_[n];
  peer.reconnect_at.reset();
  const std::string& address = options_.addresses.at(n);
  try {
    peer.out.disconnect(address);
  } catch (const zmq::error_t&) {
    // ZeroMQ already forgot the endpoint when it ended the session.
  }
  peer.out.connect(address);
}

}  // namespace zring::transport
