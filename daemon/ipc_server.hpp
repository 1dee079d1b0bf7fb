// ipc_server.hpp - where local training processes meet their daemon (daemon-internal).
//
// A ZeroMQ ROUTER socket on the config's ipc:// endpoint, driven by the
// daemon's io_context (ZMQ_FD watched by asio), and beside it the request
// socket (request_socket.hpp) on which greeted clients send their requests
// and get their answers without ZeroMQ's I/O threads (the ROUTER carries
// those of clients without such a connection). It greets clients, collects
// one submission from each local rank into an op for the ring thread,
// notices local ranks that are late (the stall inspector: the error names
// them), keeps waiting clients alive with keepalives, and hands every rank
// the result. All of its state lives on the io thread.
#pragma once

#include <algorithm>
#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>
#include <zring/config.hpp>

#include "answer_backlog.hpp"
#include "daemon_stats.hpp"
#include "local_ranks.hpp"
#include "op_timeline.hpp"
#include "request_socket.hpp"
#include "ring_worker.hpp"
#include "transport/shared_region.hpp"
#include "wire/wire.hpp"

namespace zring::daemon {

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
  // Accounts for the rung ops the ring thread left in its books
  // (RingWorker::take_books): before anything reads the stats.
  void take_books();
  [[nodiscard]] const DaemonStats& stats() const noexcept { return stats_; }

 private:
  using Clock = std::chrono::steady_clock;
  void arm();
  void drain();
  void handle(std::vector<zmq::message_t>& frames);
  void on_hello(const std::string& client, const wire::Hello& hello);
  void on_submit(const std::string& client, const wire::Submit& submit,
                 std::optional<zmq::message_t> values);
  void on_status(const std::string& client, const wire::StatusQuery& query);
  void on_trace(const std::string& client, const wire::TraceQuery& query);
  void on_attach(const std::string& client, const wire::Attach& attach);
  bool check_owner(const std::string& client, std::uint32_t local_rank, std::uint64_t request);
  // Whether the client had given up on it when zringd read it (request_age.hpp).
  [[nodiscard]] bool given_up(const wire::ClientWait& wait) const;
  [[nodiscard]] std::optional<std::string> read_late(std::size_t local_rank,
                                                     const wire::ClientWait& wait,
                                                     const std::string& what) const;
  void reply_results(const std::vector<Request>& requests, const OpDone& done, std::uint64_t dense);
  void record(const std::vector<Request>& requests, const OpDone& done);
  [[nodiscard]] std::vector<Request> rung_requests(const Rung& rung) const;
  void account(OpDone done);  // an op's answers (when the ring thread did not give them) and books
  void ring_reported(const RingState& state);
  void assemble();
  void take(LocalRanks::Made made);
  void arm_stall_timer();
  void on_stall();
  void arm_keepalive();
  void send(const std::string& client, const wire::IpcMessage& message,
            std::optional<zmq::message_t> values = std::nullopt);
  AnswerBacklog::Sent try_send(const std::string& client, AnswerBacklog::Answer& answer);
  void resend(const std::string& client, AnswerBacklog::Answer answer);
  void park(const std::string& client, AnswerBacklog::Answer answer);
  void arm_backlog_timer();
  void send_error(const std::string& client, std::uint64_t id, ErrorCode code,
                  const std::string& text);
  void refuse(const Refusal& refusal);

  boost::asio::io_context& io_;
  const RingConfig& config_;
  RingWorker& worker_;
  zmq::socket_t socket_;
  boost::asio::posix::stream_descriptor fd_;
  RequestSocket requests_;  // <ipc path>.req
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

  LocalRanks ranks_;  // who holds each local rank, what waits and what runs
  std::uint64_t regions_made_ = 0;
  std::string region_prefix_;  // shared buffers are region_prefix_<pid>.<rank>.<n>
  std::optional<Clock::time_point> refusal_logged_;  // last warning about refused connections
  DaemonStats stats_;
  OpTimeline timeline_;  // the last ops' phases, for zringctl trace
};

}  // namespace zring::daemon
