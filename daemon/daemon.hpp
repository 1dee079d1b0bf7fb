// daemon.hpp - zringd's wiring: config, io_context, signals, IPC, ring (daemon-internal).
#pragma once

#include <boost/asio/io_context.hpp>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <zmq.hpp>
#include <zring/config.hpp>

#include "ipc_server.hpp"
#include "metrics.hpp"
#include "ring_worker.hpp"
#include "signal_thread.hpp"

namespace zring::daemon {

class Daemon {
 public:
  // config_path and node are kept so SIGHUP can re-read the file;
  // log_level_override (from --log-level) wins over the file's, then and on SIGHUP.
  Daemon(RingConfig config, std::string config_path, std::optional<std::string> node,
         std::optional<std::string> log_level_override = std::nullopt);
  ~Daemon();
  // Serves until SIGTERM or SIGINT; returns the process exit code.
  int run();

 private:
  void on_signal(int signal);
  void reload();
  // `failure` when zringd stops because a part of it failed: pending
  // requests get its code and text, and run() returns 1.
  void shutdown(const std::string& why, const std::optional<Status>& failure = std::nullopt);
  // What the ring thread reported, on the io thread: to the IPC side's
  // stats, and to systemd (notify_ring_state).
  void on_ring_state(const RingState& state);
  void notify_ring_state(const RingState& state);

  RingConfig config_;
  std::string config_path_;
  std::optional<std::string> node_;
  std::optional<std::string> log_level_override_;
  boost::asio::io_context io_;
  zmq::context_t zmq_;
  RingWorker worker_;
  IpcServer ipc_;
  std::optional<MetricsServer> metrics_;  // when the config has metrics.listen
  std::optional<SignalThread> signals_;   // SIGINT, SIGTERM, SIGHUP, from run() on
  bool ipc_bound_ = false;                // the IPC socket file is ours to remove
  bool ready_sent_ = false;
  std::optional<std::pair<bool, std::string>> notified_;  // the ring state systemd last heard
  bool stopping_ = false;
  int exit_status_ = 0;
};

}  // namespace zring::daemon
