#include "daemon.hpp"

#include <csignal>

#include <boost/asio/post.hpp>

#include <zring/error.hpp>

#include "log.hpp"
#include "sd_notify.hpp"

namespace zring::daemon {

Daemon::Daemon(RingConfig config, std::string config_path, std::optional<std::string> node)
    : config_(std::move(config)), config_path_(std::move(config_path)), node_(std::move(node)),
      signals_(io_, SIGINT, SIGTERM, SIGHUP), zmq_(1),
      worker_(zmq_, config_,
              [this](OpDone done) {
                boost::asio::post(io_, [this, done = std::move(done)]() mutable {
                  ipc_.on_op_done(std::move(done));
                });
              },
              [this](RingState state) {
                boost::asio::post(io_, [this, state] {
                  ipc_.on_ring_state(state);
                  notify_ring_state(state);
                });
              }),
      ipc_(io_, zmq_, config_, worker_) {}

Daemon::~Daemon() {
  worker_.stop();
  ipc_.stop("zringd is shutting down");
  zmq_.shutdown();
}

int Daemon::run() {
  worker_.start();
  ipc_.start();
  log_info("listening on " + config_.ipc + ", ring socket " + config_.self_node().address + ", " +
           std::to_string(config_.nodes.size()) + " nodes x " +
           std::to_string(config_.local_ranks) + " local ranks");
  sd_notify_status("STATUS=waiting for the ring to form");
  signals_.async_wait([this](const boost::system::error_code& ec, int signal) {
    if (!ec) on_signal(signal);
  });
  io_.run();
  return 0;
}

void Daemon::on_signal(int signal) {
  if (signal == SIGHUP) {
    reload();
    signals_.async_wait([this](const boost::system::error_code& ec, int s) {
      if (!ec) on_signal(s);
    });
    return;
  }
  shutdown(signal == SIGTERM ? "SIGTERM" : "SIGINT");
}

// What can change without a restart: the log level.
void Daemon::reload() {
  try {
    RingConfig fresh = load_config(config_path_, node_);
    set_log_level(parse_log_level(fresh.log_level));
    log_info("SIGHUP: re-read " + config_path_ + "; log level " + fresh.log_level +
             " (ring membership, addresses and the IPC endpoint need a restart)");
  } catch (const Error& e) {
    log_error(std::string("SIGHUP: kept the running configuration: ") + e.what());
  }
}

// Stop intake, fail what is pending, stop the ring thread (aborting its op),
// close every socket with linger 0, end the io_context.
void Daemon::shutdown(const std::string& why) {
  if (stopping_) return;
  stopping_ = true;
  log_info(why + ": shutting down");
  sd_notify_status("STOPPING=1\nSTATUS=shutting down");
  ipc_.stop("zringd is shutting down (" + why + ")");
  worker_.stop();
  signals_.cancel();
  io_.stop();
}

void Daemon::notify_ring_state(const RingState& state) {
  if (state.up && !ready_sent_) {
    ready_sent_ = true;
    sd_notify_status("READY=1\nSTATUS=ring up (" + std::to_string(config_.nodes.size()) + " nodes)");
  } else if (state.up) {
    sd_notify_status("STATUS=ring up (" + std::to_string(config_.nodes.size()) + " nodes)");
  } else {
    sd_notify_status("STATUS=ring down: " + state.reason);
  }
}

}  // namespace zring::daemon
