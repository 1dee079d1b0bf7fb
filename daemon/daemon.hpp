// daemon.hpp - zringd's wiring: config, io_context, signals, IPC, ring (daemon-internal).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <zmq.hpp>

#include <zring/config.hpp>

#include "ipc_server.hpp"
#include "metrics.hpp"
#include "ring_worker.hpp"

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
  void shutdown(const std::string& why);
  void notify_ring_state(const RingState& state);

  RingConfig config_;
  std::string config_path_;
  std::optional<std::string> node_;
  std::optional<std::string> log_level_override_;
  boost::asio::io_context io_;
  boost::asio::signal_set signals_;
  zmq::context_t zmq_;
  RingWorker worker_;
  IpcServer ipc_;
  std::optional<MetricsServer> metrics_;  // when the config has metrics.listen
  bool ipc_bound_ = false;  // the IPC socket file is ours to remove
  bool ready_sent_ = false;
  std::optional<std::pair<bool, std::string>> notified_;  // the ring state systemd last heard
  bool stopping_ = false;
};

}  // namespace zring::daemon
