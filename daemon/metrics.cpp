#include "metrics.hpp"

#include <boost/asio/ip/address.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdio>
#include <zring/error.hpp>
#include <zring/version.hpp>

#include "log.hpp"

namespace zring::daemon {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using boost::asio::ip::tcp;

constexpr std::size_t kMaxSessions = 32;  // concurrent scrapers; more are turned away
constexpr auto kIdleTimeout = std::chrono::seconds(30);

std::int64_t unix_seconds(DaemonStats::Time t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", value);
  return text;
}

// Error texts can name many tensors; the report keeps their start.
std::string clip(const std::string& text, std::size_t limit = 2048) {
  return text.size() <= limit ? text : text.substr(0, limit) + "...";
}

wire::MemberState member_state(transport::PeerState state) {
  switch (state) {
    case transport::PeerState::self:
      return wire::MemberState::self;
    case transport::PeerState::member:
      return wire::MemberState::up;
    case transport::PeerState::live:
      return wire::MemberState::live;
    case transport::PeerState::silent:
      return wire::MemberState::down;
    case transport::PeerState::mismatched:
      return wire::MemberState::mismatched;
    case transport::PeerState::unknown:
      break;
  }
  return wire::MemberState::unknown;
}

// --- Prometheus text ------------------------------------------------------------

std::string label(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

struct Exposition {
  std::string text;
  void family(const char* name, const char* type, const char* help) {
    text += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  void sample(const std::string& name, const std::string& labels, const std::string& value) {
    text += name + (labels.empty() ? "" : "{" + labels + "}") + " " + value + "\n";
  }
};

void ring_families(Exposition& e, const DaemonStats& stats, const RingConfig& config) {
  const RingState& ring = stats.ring;
  e.family("zring_ring_up", "gauge",
           "1 while this node's ring is formed and every member reachable.");
  e.sample("zring_ring_up", "", ring.up ? "1" : "0");
  e.family("zring_ring_members", "gauge",
           "Nodes in the ring this node is up in (0 while it is down).");
  e.sample("zring_ring_members", "", std::to_string(ring.up ? ring.members.size() : 0));
  e.family("zring_ring_min_nodes", "gauge",
           "The quorum: the fewest nodes a ring may have (min_nodes).");
  e.sample("zring_ring_min_nodes", "", std::to_string(config.min_nodes));
  e.family("zring_peer_up", "gauge",
           "1 while the listed node is a member of the ring this node is up in; this node counts "
           "as up.");
  for (std::size_t n = 0; n < config.nodes.size(); ++n) {
    const bool up = n == config.self_index ||
                    (n < ring.peers.size() && ring.peers[n] == transport::PeerState::member);
    e.sample("zring_peer_up",
             "peer=" + label(config.nodes[n].name) + ",address=" + label(config.nodes[n].address),
             up ? "1" : "0");
  }
  e.family("zring_peer_mismatched", "gauge",
           "1 while the listed node's ring file differs from this node's in a setting every node "
           "must share: it is left out of the ring (the log and zringctl status say what "
           "differs).");
  for (std::size_t n = 0; n < config.nodes.size(); ++n)
    e.sample("zring_peer_mismatched",
             "peer=" + label(config.nodes[n].name) + ",address=" + label(config.nodes[n].address),
             n < ring.mismatches.size() && !ring.mismatches[n].empty() ? "1" : "0");
  e.family("zring_peer_data_on_tcp", "gauge",
           "1 while this node's ring messages to the listed node go on a TCP connection to its "
           "data port (tcp_data), 0 while they go on ZeroMQ (or it is this node).");
  for (std::size_t n = 0; n < config.nodes.size(); ++n)
    e.sample("zring_peer_data_on_tcp",
             "peer=" + label(config.nodes[n].name) + ",address=" + label(config.nodes[n].address),
             n < ring.data_on_tcp.size() && ring.data_on_tcp[n] ? "1" : "0");
  e.family("zring_ring_formations_total", "counter", "Ring generations this node adopted.");
  e.sample("zring_ring_formations_total", "", std::to_string(ring.counters.formations));
  e.family("zring_ring_messages_dropped_total", "counter",
           "Ring messages thrown away: stale, stray, oversized or malformed.");
  e.sample("zring_ring_messages_dropped_total", "", std::to_string(ring.counters.dropped));
  e.family("zring_ring_messages_malformed_total", "counter", "Ring messages that did not decode.");
  e.sample("zring_ring_messages_malformed_total", "", std::to_string(ring.counters.malformed));
  e.family("zring_ring_auth_rejected_total", "counter",
           "CurveZMQ clients refused at the ring port: their key is not one of the ring's.");
  e.sample("zring_ring_auth_rejected_total", "", std::to_string(ring.counters.auth_rejected));
  e.family("zring_ring_handshakes_failed_total", "counter",
           "Connections to the ring port that failed the handshake (no or wrong keys, another "
           "protocol).");
  e.sample("zring_ring_handshakes_failed_total", "",
           std::to_string(ring.counters.handshakes_failed));
  e.family("zring_ring_disconnects_total", "counter",
           "Connections to the ring port closed: a peer went away or broke the protocol (oversized "
           "frame).");
  e.sample("zring_ring_disconnects_total", "", std::to_string(ring.counters.disconnects));
  e.family("zring_ring_idle_bytes_total", "counter",
           "Bytes on the ring between ops (heartbeats, membership), by direction.");
  e.sample("zring_ring_idle_bytes_total", "direction=\"sent\"",
           std::to_string(stats.idle_bytes_sent));
  e.sample("zring_ring_idle_bytes_total", "direction=\"received\"",
           std::to_string(stats.idle_bytes_received));
}

void op_families(Exposition& e, const DaemonStats& stats) {
  e.family("zring_ops_total", "counter",
           "Ops this node finished, by method (\"broadcast\" for broadcasts) and result.");
  for (const auto& [method, m] : stats.methods) {
    e.sample("zring_ops_total", "method=" + label(method) + ",result=\"ok\"",
             std::to_string(m.ops));
    e.sample("zring_ops_total", "method=" + label(method) + ",result=\"error\"",
             std::to_string(m.failed));
  }
  e.family("zring_ops_rung_total", "counter",
           "Successful ops whose request came on the bell and which the ring thread started "
           "itself (a client alone on its node repeating an op).");
  e.sample("zring_ops_rung_total", "", std::to_string(stats.ops_rung));
  e.family("zring_op_errors_total", "counter", "Failed ops by error kind (see docs/errors.md).");
  for (const ErrorCode code : kErrorCodes) {
    const auto it = stats.errors.find(to_string(code));
    e.sample("zring_op_errors_total", std::string("kind=\"") + to_string(code) + "\"",
             std::to_string(it == stats.errors.end() ? 0 : it->second));
  }
  e.family("zring_op_duration_seconds", "histogram",
           "Time from an op's last local submission to its result, successful ops.");
  std::uint64_t cumulative = 0;
  const auto& d = stats.durations;
  for (std::size_t b = 0; b < d.bounds.size(); ++b) {
    cumulative += d.counts[b];
    e.sample("zring_op_duration_seconds_bucket", "le=\"" + number(d.bounds[b]) + "\"",
             std::to_string(cumulative));
  }
  e.sample("zring_op_duration_seconds_bucket", "le=\"+Inf\"", std::to_string(d.count));
  e.sample("zring_op_duration_seconds_sum", "", number(d.sum));
  e.sample("zring_op_duration_seconds_count", "", std::to_string(d.count));
  e.family(
      "zring_raw_bytes_total", "counter",
      "Bytes a dense float32 ring would have moved for the same ops, by method and direction.");
  for (const auto& [method, m] : stats.methods)
    for (const char* direction : {"sent", "received"})
      e.sample("zring_raw_bytes_total",
               "method=" + label(method) + ",direction=\"" + direction + "\"",
               std::to_string(m.raw_bytes));
  e.family("zring_wire_bytes_total", "counter",
           "Bytes this node put on (sent) and took off (received) the ring during ops, by method.");
  for (const auto& [method, m] : stats.methods) {
    e.sample("zring_wire_bytes_total", "method=" + label(method) + ",direction=\"sent\"",
             std::to_string(m.wire_bytes_sent));
    e.sample("zring_wire_bytes_total", "method=" + label(method) + ",direction=\"received\"",
             std::to_string(m.wire_bytes_received));
  }
}

}  // namespace

wire::DaemonStatus status_report(const DaemonStats& stats, const RingConfig& config) {
  const RingState& ring = stats.ring;
  const transport::RingCounters& counted = ring.counters;
  wire::DaemonStatus s;
  s.node = config.self;
  s.version = version();
  s.started = unix_seconds(stats.started);
  s.now = unix_seconds(std::chrono::system_clock::now());
  s.world_size = config.world_size();
  s.local_ranks = config.local_ranks;
  s.first_rank = config.self_index * config.local_ranks;
  s.ring_up = ring.up;
  s.generation = ring.generation;
  s.ring_reason = clip(ring.reason);
  s.ring_since = unix_seconds(stats.ring_since);
  s.ring_members = ring.members;
  s.min_nodes = config.min_nodes;
  s.last_change = clip(ring.last_change, 512);
  s.formations = counted.formations;
  s.dropped = counted.dropped;
  s.malformed = counted.malformed;
  s.last_drop = clip(counted.last_drop, 512);
  s.curve = config.curve.has_value();
  s.auth_rejected = counted.auth_rejected;
  s.handshakes_failed = counted.handshakes_failed;
  s.disconnects = counted.disconnects;
  s.last_rejection = clip(counted.last_rejection, 512);
  s.last_handshake_failure = clip(counted.last_handshake_failure, 512);
  for (std::size_t n = 0; n < config.nodes.size(); ++n) {
    const wire::MemberState state = n < ring.peers.size()    ? member_state(ring.peers[n])
                                    : n == config.self_index ? wire::MemberState::self
                                                             : wire::MemberState::unknown;
    const bool on_tcp = n < ring.data_on_tcp.size() && ring.data_on_tcp[n];
    const std::string mismatch = n < ring.mismatches.size() ? clip(ring.mismatches[n], 512) : "";
    s.members.push_back({config.nodes[n].name, config.nodes[n].address, n * config.local_ranks,
                         state, on_tcp, mismatch});
  }
  s.ops_done = stats.ops_done;
  s.ops_failed = stats.ops_failed;
  s.ops_rung = stats.ops_rung;
  for (const auto& [kind, count] : stats.errors) s.errors.push_back({kind, count});
  s.last_error = clip(stats.last_error);
  s.last_error_at = stats.last_error.empty() ? 0 : unix_seconds(stats.last_error_at);
  for (const auto& [name, m] : stats.methods)
    s.methods.push_back(
        {name, m.ops, m.failed, m.raw_bytes, m.wire_bytes_sent, m.wire_bytes_received});
  s.idle_bytes_sent = stats.idle_bytes_sent;
  s.idle_bytes_received = stats.idle_bytes_received;
  s.metrics = config.metrics ? config.metrics->listen : "";
  return s;
}

std::string render_prometheus(const DaemonStats& stats, const RingConfig& config) {
  Exposition e;
  e.family("zring_info", "gauge", "zringd's version and node name (always 1).");
  e.sample("zring_info", "node=" + label(config.self) + ",version=" + label(version()), "1");
  e.family("zring_start_time_seconds", "gauge", "When zringd started, in seconds since the epoch.");
  e.sample("zring_start_time_seconds", "", std::to_string(unix_seconds(stats.started)));
  ring_families(e, stats, config);
  op_families(e, stats);
  return std::move(e.text);
}

// --- the HTTP server -------------------------------------------------------------

// One connection: read a request, answer it, repeat while the client keeps
// the connection alive; any error, an oversized request or 30 s idle closes it.
class MetricsServer::Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, MetricsServer::Render render)
      : stream_(std::move(socket)), render_(std::move(render)) {}

  void read() {
    parser_.emplace();
    parser_->header_limit(8 * 1024);
    parser_->body_limit(4 * 1024);
    stream_.expires_after(kIdleTimeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) {
                       if (ec) return self->close();
                       self->answer(self->parser_->get());
                     });
  }

  void close() noexcept {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

 private:
  void answer(const http::request<http::string_body>& request) {
    response_ = {};
    response_.version(request.version());
    response_.keep_alive(request.keep_alive());
    response_.set(http::field::server, std::string("zringd/") + version());
    const std::string_view target(request.target().data(), request.target().size());
    const std::string_view path = target.substr(0, target.find('?'));
    if (request.method() != http::verb::get) {
      response_.result(http::status::method_not_allowed);
      response_.set(http::field::allow, "GET");
      response_.body() = "only GET\n";
    } else if (path == "/metrics") {
      response_.result(http::status::ok);
      response_.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
      response_.body() = render_();
    } else {
      response_.result(http::status::not_found);
      response_.body() = "zringd serves Prometheus metrics at /metrics\n";
    }
    if (response_.result() != http::status::ok)
      response_.set(http::field::content_type, "text/plain");
    response_.prepare_payload();
    http::async_write(stream_, response_,
                      [self = shared_from_this()](beast::error_code ec, std::size_t) {
                        if (ec || !self->response_.keep_alive()) return self->close();
                        self->read();
                      });
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> response_;
  MetricsServer::Render render_;
};

MetricsServer::MetricsServer(boost::asio::io_context& io, MetricsConfig config, Render render)
    : io_(io), config_(std::move(config)), render_(std::move(render)), acceptor_(io) {}

MetricsServer::~MetricsServer() { stop(); }

void MetricsServer::start() {
  const auto fail = [&](const std::string& why) {
    throw Error(ErrorCode::connection_failed, "cannot serve metrics on " + config_.listen + ": " +
                                                  why + " (metrics.listen in the configuration)");
  };
  boost::system::error_code ec;
  tcp::endpoint endpoint;
  const auto address = boost::asio::ip::make_address(config_.host, ec);
  if (!ec) {
    endpoint = tcp::endpoint(address, config_.port);
  } else {
    // A host name: its first address (no AI_ADDRCONFIG, which needs netlink).
    tcp::resolver resolver(io_);
    const auto results = resolver.resolve(config_.host, std::to_string(config_.port),
                                          tcp::resolver::flags::numeric_service, ec);
    if (ec || results.empty()) fail("cannot resolve " + config_.host + ": " + ec.message());
    endpoint = results.begin()->endpoint();
  }
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(boost::asio::socket_base::max_listen_connections, ec);
  if (ec) {
    acceptor_.close();
    fail(ec.message());
  }
  port_ = acceptor_.local_endpoint().port();
  accept();
}

void MetricsServer::stop() noexcept {
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  for (const auto& weak : sessions_)
    if (const auto session = weak.lock()) session->close();
  sessions_.clear();
}

void MetricsServer::accept() {
  acceptor_.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
    if (ec == boost::asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (!ec) {
      std::erase_if(sessions_, [](const std::weak_ptr<Session>& s) { return s.expired(); });
      if (sessions_.size() >= kMaxSessions) {
        log_warn("metrics: turned a connection away (" + std::to_string(kMaxSessions) +
                 " already open)");
      } else {
        auto session = std::make_shared<Session>(std::move(socket), render_);
        sessions_.push_back(session);
        session->read();
      }
    }
    accept();
  });
}

}  // namespace zring::daemon
