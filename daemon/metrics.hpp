// metrics.hpp - the daemon's numbers for people and for Prometheus (daemon-internal).
//
// DaemonStats (kept by the IPC server on the io thread) is shown two ways:
// as the status report (a wire::DaemonStatus) that `zringctl status` asks
// for over IPC and renders itself, and as Prometheus text on an optional
// HTTP endpoint (`metrics: {listen: HOST:PORT}`):
//
//   curl http://127.0.0.1:9464/metrics
//
// The HTTP server runs on the daemon's io_context, so rendering reads the
// stats on the thread that changes them.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include <zring/config.hpp>

#include "daemon_stats.hpp"
#include "wire/daemon_status.hpp"

namespace zring::daemon {

// The status report zringctl renders (`zringctl status`, its --json).
[[nodiscard]] wire::DaemonStatus status_report(const DaemonStats& stats, const RingConfig& config);

// The Prometheus text exposition format, version 0.0.4.
[[nodiscard]] std::string render_prometheus(const DaemonStats& stats, const RingConfig& config);

// GET /metrics over HTTP/1.1 (Boost.Beast). Every other path is 404, every
// other method 405; requests are small, connections few and idle ones closed.
class MetricsServer {
 public:
  using Render = std::function<std::string()>;

  MetricsServer(boost::asio::io_context& io, MetricsConfig config, Render render);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Resolves and binds config.listen, then accepts. Throws zring::Error
  // (connection_failed) naming the address when it cannot.
  void start();
  // Stops accepting and closes every connection. Idempotent.
  void stop() noexcept;
  // The port bound.
  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }

  class Session;

 private:
  void accept();

  boost::asio::io_context& io_;
  MetricsConfig config_;
  Render render_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::vector<std::weak_ptr<Session>> sessions_;
  std::uint16_t port_ = 0;
};

}  // namespace zring::daemon
