// ipc_server.hpp - where local training processes meet their daemon (daemon-internal).
//
// A ZeroMQ ROUTER socket on the config's ipc:// endpoint, driven by the
// daemon's io_context (ZMQ_FD watched by asio). It greets clients, collects
// one submission from each local rank into an op for the ring thread,
// notices local ranks that are late (the stall inspector: the error names
// them), keeps waiting clients alive with keepalives, and hands every rank
// the result. All of its state lives on the io thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <zmq.hpp>

#include <zring/config.hpp>

#include "ring_worker.hpp"
#include "wire/wire.hpp"

namespace zring::daemon {

// What `zringctl status` and the logs report.
struct DaemonStats {
  std::uint64_t ops_done = 0;
  std::uint64_t ops_failed = 0;
  std::string last_error;
  struct PerMethod {
    std::uint64_t ops = 0;
    std::uint64_t wire_bytes = 0;   // this node's ring traffic
    std::uint64_t dense_bytes = 0;  // what dense float32 would have cost
  };
  std::map<std::string, PerMethod> methods;
  RingState ring;
};

class IpcServer {
 public:
  IpcServer(boost::asio::io_context& io, zmq::context_t& context, const RingConfig& config,
            RingWorker& worker);
  ~IpcServer();

  // Binds the endpoint (mode 0660) and starts serving. Throws zring::Error.
  void start();
  // Fails every pending request with `why` and closes the socket.
  void stop(const std::string& why);

  // Called on the io thread.
  void on_op_done(OpDone done);
  void on_ring_state(const RingState& state);
  [[nodiscard]] const DaemonStats& stats() const noexcept { return stats_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Request {
    std::string client;   // ZeroMQ routing id
    std::uint64_t id = 0; // the client's request id
    std::size_t local_rank = 0;
    collective::Manifest manifest;
    CompressionMethod method;
    std::shared_ptr<zmq::message_t> values;
    Clock::time_point at;
  };

  void arm();
  void drain();
  void handle(std::vector<zmq::message_t>& frames);
  void on_hello(const std::string& client, const wire::IpcHeader& header);
  void on_submit(const std::string& client, const wire::IpcHeader& header,
                 std::optional<zmq::message_t> values);
  void on_status(const std::string& client, const wire::IpcHeader& header);
  void assemble();
  void arm_stall_timer();
  void on_stall();
  [[nodiscard]] Clock::time_point stall_deadline() const;
  void arm_keepalive();
  void send(const std::string& client, const wire::IpcHeader& header,
            std::optional<zmq::message_t> values = std::nullopt);
  void send_error(const std::string& client, std::uint64_t id, ErrorCode code,
                  const std::string& text);
  [[nodiscard]] std::string rank_name(std::size_t local_rank) const;

  boost::asio::io_context& io_;
  const RingConfig& config_;
  RingWorker& worker_;
  zmq::socket_t socket_;
  boost::asio::posix::stream_descriptor fd_;
  boost::asio::steady_timer stall_timer_;
  boost::asio::steady_timer keepalive_timer_;
  bool running_ = false;

  std::vector<std::deque<Request>> waiting_;          // per local rank
  std::vector<std::string> owners_;                   // per local rank: its client
  std::vector<std::optional<std::string>> owes_;      // per local rank: fail its next op
  std::map<std::uint64_t, std::vector<Request>> running_ops_;  // job id -> its requests
  std::uint64_t next_job_ = 1;
  DaemonStats stats_;
};

}  // namespace zring::daemon
