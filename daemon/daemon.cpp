#include "daemon.hpp"

#include <unistd.h>

#include <boost/asio/post.hpp>
#include <csignal>
#include <cstring>
#include <zring/error.hpp>

#include "log.hpp"
#include "sd_notify.hpp"

namespace zring::daemon {

Daemon::Daemon(RingConfig config, std::string config_path, std::optional<std::string> node,
               std::optional<std::string> log_level_override)
    : config_(std::move(config)),
      config_path_(std::move(config_path)),
      node_(std::move(node)),
      log_level_override_(std::move(log_level_override)),
      zmq_(1),
      worker_(
          zmq_, config_,
          [this](OpDone done) {
            boost::asio::post(io_, [this, done = std::move(done)]() mutable {
              std::optional<RingState> state = std::move(done.state);
              ipc_.on_op_done(std::move(done));
              if (state) on_ring_state(*state);  // after the op's answer: its traffic counts to it
            });
          },
          [this](RingState state) {
            boost::asio::post(io_, [this, state] { on_ring_state(state); });
          },
          [this](Status failure) {
            boost::asio::post(io_,
                              [this, failure] { shutdown("the ring thread stopped", failure); });
          }),
      ipc_(io_, zmq_, config_, worker_) {
  if (config_.metrics)
    metrics_.emplace(io_, *config_.metrics, [this] {
      ipc_.take_books();
      return render_prometheus(ipc_.stats(), config_);
    });
}

Daemon::~Daemon() {
  if (metrics_) metrics_->stop();
  worker_.stop();
  ipc_.stop("zringd is shutting down");
  zmq_.shutdown();
}

int Daemon::run() {
  if (metrics_) {  // first: a port in use stops the start before the ring sees this node
    metrics_->start();
    log_info("metrics on http://" + config_.metrics->listen + "/metrics");
  }
  worker_.start();
  ipc_.start();
  ipc_bound_ = true;
  log_info("listening on " + config_.ipc + ", ring socket " + config_.self_node().address + ", " +
           std::to_string(config_.nodes.size()) + " nodes x " +
           std::to_string(config_.local_ranks) + " local ranks");
  sd_notify_status("STATUS=waiting for the ring to form");
  signals_.emplace(std::initializer_list<int>{SIGINT, SIGTERM, SIGHUP}, [this](int signal) {
    boost::asio::post(io_, [this, signal] { on_signal(signal); });
  });
  io_.run();
  return exit_status_;
}

void Daemon::on_signal(int signal) {
  if (stopping_) return;
  if (signal == SIGHUP) {
    reload();
    return;
  }
  shutdown(signal == SIGTERM ? "SIGTERM" : "SIGINT");
}

namespace {

// The keys of `fresh` that differ from the running configuration and only
// take effect after a restart.
std::string needs_restart(const RingConfig& running, const RingConfig& fresh) {
  const auto same_nodes = [&] {
    if (running.nodes.size() != fresh.nodes.size()) return false;
    for (std::size_t n = 0; n < running.nodes.size(); ++n) {
      const NodeConfig &a = running.nodes[n], &b = fresh.nodes[n];
      if (a.name != b.name || a.address != b.address || a.ipc != b.ipc ||
          a.public_key != b.public_key)
        return false;
    }
    return true;
  };
  const auto listen = [](const RingConfig& c) {
    return c.metrics ? c.metrics->listen : std::string();
  };
  std::string keys;
  const auto add = [&](bool changed, const char* key) {
    if (changed) keys += (keys.empty() ? "" : ", ") + std::string(key);
  };
  add(!same_nodes(), "nodes");
  add(running.self != fresh.self, "self");
  add(running.ipc != fresh.ipc, "ipc");
  add(running.local_ranks != fresh.local_ranks, "local_ranks");
  add(running.timeout != fresh.timeout, "timeout_ms");
  add(running.heartbeat != fresh.heartbeat, "heartbeat_ms");
  add(running.busy_poll != fresh.busy_poll, "busy_poll_us");
  add(running.chunk_bytes != fresh.chunk_bytes, "chunk_bytes");
  add(running.gather_bytes != fresh.gather_bytes, "gather_bytes");
  add(running.direct_bytes != fresh.direct_bytes, "direct_bytes");
  add(running.max_message_bytes != fresh.max_message_bytes, "max_message_bytes");
  add(running.tcp_data != fresh.tcp_data, "tcp_data");
  add(running.tcp_congestion != fresh.tcp_congestion, "tcp_congestion");
  add(listen(running) != listen(fresh), "metrics");
  const auto secret = [](const RingConfig& c) {
    return c.curve ? c.curve->secret_key : std::string();
  };
  add(running.curve.has_value() != fresh.curve.has_value() || secret(running) != secret(fresh),
      "curve");
  return keys;
}

}  // namespace

// What can change without a restart: the log level. Every other change is
// named in the log as waiting for a restart.
void Daemon::reload() {
  RingConfig fresh;
  try {
    fresh = load_config(config_path_, node_);
  } catch (const Error& e) {
    log_error(std::string("SIGHUP: kept the running configuration: ") + e.what());
    return;
  }
  std::string level = fresh.log_level;
  std::string from = "from " + config_path_;
  if (log_level_override_) {
    level = *log_level_override_;
    from = "from --log-level, which wins over the file's " + fresh.log_level;
  }
  const LogLevel before = log_level();
  set_log_level(parse_log_level(level));
  const std::string restart = needs_restart(config_, fresh);
  log_notice("SIGHUP: re-read " + config_path_ + "; log level " + level + " (" + from + ")" +
             (before == log_level() ? ", unchanged" : ", was " + std::string(to_string(before))) +
             (restart.empty() ? "; nothing else changed"
                              : "; changes to " + restart + " take effect after a restart"));
}

// Stop intake, fail what is pending, stop the ring thread (aborting its op),
// close every socket with linger 0, end the io_context.
void Daemon::shutdown(const std::string& why, const std::optional<Status>& failure) {
  if (stopping_) return;
  stopping_ = true;
  if (failure) {
    exit_status_ = 1;
    log_error(why + ": zringd exits with status 1 (under systemd it is restarted)");
  } else {
    log_info(why + ": shutting down");
  }
  sd_notify_status("STOPPING=1\nSTATUS=shutting down");
  if (metrics_) metrics_->stop();
  if (failure)
    ipc_.stop(failure->text + "; zringd exits and, under systemd, restarts", failure->code);
  else
    ipc_.stop("zringd is shutting down (" + why + ")");
  // ZeroMQ leaves the socket file behind; a client must find no daemon there.
  if (ipc_bound_) ::unlink(config_.ipc.substr(std::strlen("ipc://")).c_str());
  worker_.stop();
  io_.stop();
}

void Daemon::on_ring_state(const RingState& state) {
  ipc_.on_ring_state(state);
  notify_ring_state(state);
}

// READY=1 the first time the ring is up; a STATUS= line when it goes up or
// down (not for the reports that only carry new byte counts).
void Daemon::notify_ring_state(const RingState& state) {
  std::pair<bool, std::string> now{state.up, state.reason};
  if (notified_ == now) return;
  notified_ = std::move(now);
  if (state.up && !ready_sent_) {
    ready_sent_ = true;
    sd_notify_status("READY=1\nSTATUS=ring up (" + std::to_string(config_.nodes.size()) +
                     " nodes)");
  } else if (state.up) {
    sd_notify_status("STATUS=ring up (" + std::to_string(config_.nodes.size()) + " nodes)");
  } else {
    sd_notify_status("STATUS=ring down: " + state.reason);
  }
}

}  // namespace zring::daemon
