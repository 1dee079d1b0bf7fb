// ipc_server.hpp - where local training processes meet their daemon (daemon-internal).
//
// A ZeroMQ ROUTER socket on the config's ipc:// endpoint, driven by the
// daemon's io_context (ZMQ_FD watched by asio). It greets clients, collects
// one submission from each local rank into an op for the ring thread,
// notices local ranks that are late (the stall inspector: the error names
// them), keeps waiting clients alive with keepalives, and hands every rank
// the result. All of its state lives on the io thread.
#pragma once

#include <algorithm>
#include <array>
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

#include "answer_backlog.hpp"
#include "op_timeline.hpp"
#include "ring_worker.hpp"
#include "transport/shared_region.hpp"
#include "wire/wire.hpp"

namespace zring::daemon {

// What `zringctl status`, the metrics endpoint and the logs report. Lives on
// the io thread; daemon/metrics.cpp renders it as JSON and Prometheus text.
struct DaemonStats {
  using Time = std::chrono::system_clock::time_point;
  Time started = std::chrono::system_clock::now();
  std::uint64_t ops_done = 0;
  std::uint64_t ops_failed = 0;
  std::string last_error;
  Time last_error_at{};
  struct PerMethod {
    std::uint64_t ops = 0;                  // succeeded
    std::uint64_t failed = 0;
    std::uint64_t raw_bytes = 0;            // what a dense float32 ring would have sent (and
                                            // received): 2 (N-1) / N of the gradients per op
    std::uint64_t wire_bytes_sent = 0;      // ring frames sent while ops of this method ran
    std::uint64_t wire_bytes_received = 0;  // ring frames received while they ran
  };
  std::map<std::string, PerMethod> methods;   // by method text ("quant:8")
  std::map<std::string, std::uint64_t> errors;  // failed ops by error kind ("timeout")
  // Ring traffic between ops: heartbeats and membership.
  std::uint64_t idle_bytes_sent = 0;
  std::uint64_t idle_bytes_received = 0;
  // Seconds from an op's last local submission to its result, successful ops only.
  struct Durations {
    static constexpr std::array<double, 14> bounds{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                   0.25,  0.5,    1,     2.5,  5,     10,   30};
    std::array<std::uint64_t, bounds.size()> counts{};  // per bucket, not cumulative
    std::uint64_t count = 0;                            // also those above the last bound
    double sum = 0;
  } durations;
  RingState ring;
  Time ring_since = started;                  // when ring.up last changed
  std::optional<std::string> traffic_owner;   // method of the op that ended since the last report

  void op_succeeded(const std::string& method, std::uint64_t gradient_bytes, std::size_t nodes,
                    double seconds) {
    PerMethod& m = methods[method];
    ++m.ops;
    ++ops_done;
    if (nodes > 1) m.raw_bytes += gradient_bytes * 2 * (nodes - 1) / nodes;
    std::size_t b = 0;
    while (b < Durations::bounds.size() && seconds > Durations::bounds[b]) ++b;
    if (b < Durations::bounds.size()) ++durations.counts[b];
    ++durations.count;
    durations.sum += seconds;
    traffic_owner = method;
  }
  void op_failed(const std::string& method, const Failure& failure) {
    ++methods[method].failed;
    ++ops_failed;
    ++errors[to_string(failure.code)];
    last_error = failure.text;
    last_error_at = std::chrono::system_clock::now();
    traffic_owner = method;
  }
  // The ring thread reports after every op and every membership change: the
  // bytes counted since the previous report belong to the op that ended in
  // between, if one did.
  void ring_reported(const RingState& state) {
    const std::uint64_t sent = state.bytes_sent - std::min(state.bytes_sent, ring.bytes_sent);
    const std::uint64_t received = state.bytes_received - std::min(state.bytes_received, ring.bytes_received);
    if (traffic_owner) {
      methods[*traffic_owner].wire_bytes_sent += sent;
      methods[*traffic_owner].wire_bytes_received += received;
    } else {
      idle_bytes_sent += sent;
      idle_bytes_received += received;
    }
    traffic_owner.reset();
    if (state.up != ring.up) ring_since = std::chrono::system_clock::now();
    ring = state;
  }
};

class IpcServer {
 public:
  IpcServer(boost::asio::io_context& io, zmq::context_t& context, const RingConfig& config,
            RingWorker& worker);
  ~IpcServer();

  // Binds the endpoint (mode 0660) and starts serving. Throws zring::Error.
  void start();
  // Fails every pending request with `why` (as `code`) and closes the socket.
  void stop(const std::string& why, ErrorCode code = ErrorCode::aborted);

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
    collective::Bytes values;
    std::shared_ptr<transport::SharedRegion> region;  // answer there (submit_shared)
    bool staged = false;  // submit_staged: the values arrive in region while the op runs
    Clock::time_point at;
    std::optional<std::string> given_up;  // why its client no longer waits: the op fails
  };

  void arm();
  void drain();
  void handle(std::vector<zmq::message_t>& frames);
  void on_hello(const std::string& client, const wire::IpcHeader& header);
  void on_submit(const std::string& client, const wire::IpcHeader& header,
                 std::optional<zmq::message_t> values);
  void on_status(const std::string& client, const wire::IpcHeader& header);
  void on_trace(const std::string& client, const wire::IpcHeader& header);
  void on_attach(const std::string& client, const wire::IpcHeader& header);
  bool check_owner(const std::string& client, const wire::IpcHeader& header);
  [[nodiscard]] bool given_up(const wire::IpcHeader& header) const;
  void reply_result(const Request& r, const OpDone& done, std::uint64_t dense);
  void record(const std::vector<Request>& requests, const OpDone& done);
  void assemble();
  void arm_stall_timer();
  void on_stall();
  [[nodiscard]] Clock::time_point stall_deadline() const;
  void arm_keepalive();
  void send(const std::string& client, const wire::IpcHeader& header,
            std::optional<zmq::message_t> values = std::nullopt);
  AnswerBacklog::Sent try_send(const std::string& client, AnswerBacklog::Answer& answer);
  void park(const std::string& client, AnswerBacklog::Answer answer);
  void arm_backlog_timer();
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
  boost::asio::steady_timer backlog_timer_;
  bool running_ = false;

  // Answers to clients whose pipe is full, up to this much per client.
  static constexpr std::size_t kBacklogBytes = std::size_t{64} << 20;
  AnswerBacklog backlog_;
  bool backlog_armed_ = false;
  std::chrono::milliseconds backlog_retry_{1};
  std::uint64_t answers_dropped_ = 0;
  std::optional<Clock::time_point> drop_logged_;

  std::vector<std::deque<Request>> waiting_;          // per local rank
  std::vector<std::string> owners_;                   // per local rank: its client
  std::vector<std::optional<std::string>> owes_;      // per local rank: fail its next op
  std::vector<std::shared_ptr<transport::SharedRegion>> regions_;  // per local rank
  std::vector<bool> clock_shared_;  // per local rank: its hello's send time read as ours
  std::uint64_t regions_made_ = 0;
  std::string region_prefix_;  // shared buffers are region_prefix_<pid>.<rank>.<n>
  std::map<std::uint64_t, std::vector<Request>> running_ops_;  // job id -> its requests
  std::uint64_t next_job_ = 1;
  std::optional<Clock::time_point> refusal_logged_;  // last warning about refused connections
  DaemonStats stats_;
  OpTimeline timeline_;  // the last ops' phases, for zringctl trace
};

}  // namespace zring::daemon
