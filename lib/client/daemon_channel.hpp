// daemon_channel.hpp - a connected client's requests to its zringd (internal).
//
// One DEALER socket to the daemon's ROUTER. Every request carries an id and
// every reply echoes it, so a late reply to a request that already timed
// out is recognised and ignored. Once greeted, requests go on the daemon's
// request socket instead (a plain Unix stream socket beside the IPC one,
// daemon/request_socket.hpp: the daemon's io thread reads it itself, where
// ZeroMQ would wake an I/O thread on each side first), tagged with this
// DEALER's routing id, and the daemon answers there too; when that socket
// is not there or breaks, requests and answers go on the DEALER. A client
// alone on its node (use_bell) sends the requests of ops in its shared
// buffer as datagrams on the daemon's bell instead (wire/bell.hpp), which
// its ring thread reads; the answers come as before. The deadline is one of silence:
// while an op runs the daemon sends a keepalive every heartbeat, so a long op on a slow ring is
// fine, and a daemon that froze is noticed within the timeout. One that died is noticed at once:
// its end of the socket closes (DaemonWatch), and a request that went out on that connection fails
// with peer_lost, as does one sent after it closed to a daemon that does not come back within a
// second.
#pragma once

#include <sys/un.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>
#include <zmq.hpp>
#include <zring/error.hpp>

#include "client/daemon_watch.hpp"
#include "client/staged_transfer.hpp"
#include "transport/staging_board.hpp"
#include "wire/tcp_frames.hpp"
#include "wire/wire.hpp"

namespace zring::client {

class DaemonChannel {
 public:
  using Clock = std::chrono::steady_clock;

  // A reply of the kind Answer and the frame after it (empty if none).
  template <class Answer>
  struct Reply {
    Answer message;
    zmq::message_t data;
  };

  // Connects to the zringd at endpoint. Throws connection_failed when an
  // ipc:// endpoint has no socket file, invalid_argument when ZeroMQ cannot
  // connect to it. given_up runs whenever a request is given up on (zringd
  // went silent, or its end of the socket closed), before the error is thrown.
  DaemonChannel(const std::string& endpoint, std::chrono::milliseconds timeout,
                std::function<void()> given_up);
  ~DaemonChannel();
  DaemonChannel(const DaemonChannel&) = delete;
  DaemonChannel& operator=(const DaemonChannel&) = delete;

  // Sends a request (a Hello, Submit or Attach) and waits for its reply, of
  // the kind Answer (for an op in the shared buffer, on `board`). Throws
  // the daemon's error, or timeout.
  template <class Answer, class Request>
  Reply<Answer> call(Request request, std::optional<zmq::message_t> data,
                     const transport::StagingBoard* board = nullptr) {
    constexpr bool hello = std::is_same_v<Request, wire::Hello>;
    Reply<Answer> reply =
        await<Answer>(send_request(std::move(request), std::move(data)), hello, nullptr, board);
    if constexpr (hello) open_request_stream();  // the daemon knows this DEALER now
    return reply;
  }

  // Sends a request with a new id (returned), and its values frame if any.
  template <class Request>
  std::uint64_t send_request(Request request, std::optional<zmq::message_t> data) {
    request.request = ++last_request_;
    request.wait = wait_from_now();
    // A hello goes on the DEALER: its answer comes there, and the daemon
    // must know the DEALER before answering anything.
    const std::vector<std::uint8_t> encoded = wire::encode_ipc(request);
    if constexpr (std::is_same_v<Request, wire::Submit>)
      if (!data && request.values != wire::ValuesIn::frame && ring_bell(encoded))
        return request.request;
    send(encoded, std::move(data), !std::is_same_v<Request, wire::Hello>);
    return request.request;
  }

  // Whether requests of ops in the shared buffer go on the bell (zringd's
  // welcome said this process is its node's one local rank).
  void use_bell(bool on) { use_bell_ = on && bell_address_.has_value(); }

  // Waits for the reply to request id, of the kind Answer; connecting for
  // the hello's. With a staged op in flight, copies out what zringd
  // publishes meanwhile. An op whose averages are in the shared buffer is
  // answered on its board (StagingBoard::answer) instead of by a message;
  // errors and keepalives still come as messages.
  template <class Answer>
  Reply<Answer> await(std::uint64_t id, bool connecting, StagedTransfer* staged = nullptr,
                      const transport::StagingBoard* board = nullptr) {
    auto deadline = Clock::now() + timeout_;
    for (;;) {
      zmq::message_t data;
      wire::IpcMessage reply = next_reply(deadline, connecting, staged, Board{board, id}, data);
      if (wire::request_of(reply) != id) continue;  // a late answer to a request that timed out
      if (std::holds_alternative<wire::Keepalive>(reply)) {
        deadline = Clock::now() + timeout_;
        continue;
      }
      if (const auto* error = std::get_if<wire::ErrorReply>(&reply))
        throw Error(error->code, error->text);
      if (auto* answer = std::get_if<Answer>(&reply)) return {std::move(*answer), std::move(data)};
      throw unexpected(id, reply);
    }
  }

  // Whether `e` says that zringd restarted since the hello (connection_failed,
  // and not because this process gave up waiting): it is greeted again.
  [[nodiscard]] bool daemon_restarted(const Error& e) const {
    return e.code() == ErrorCode::connection_failed && !last_reply_was_silence_;
  }

  // The daemon's node, as its errors name it (from its welcome).
  void set_node(std::string node) { node_ = std::move(node); }

 private:
  // What a wait for the reply came to.
  enum class Waited { reply, on_board, silence, closed_during, gone };
  // Where the answer to request `id` may be written instead (none: nowhere).
  struct Board {
    const transport::StagingBoard* board;
    std::uint64_t id;
  };

  wire::ClientWait wait_from_now() const;
  void send(const std::vector<std::uint8_t>& header, std::optional<zmq::message_t> data,
            bool may_stream);
  // The request socket (request_socket.hpp): connected after each hello;
  // false when a request could not go whole on it (it is closed then).
  void open_request_stream();
  bool send_on_stream(const std::vector<std::uint8_t>& header, const zmq::message_t* data);
  bool stream_taken(const std::vector<std::uint8_t>& id);
  // How long a client waits for zringd to take its request socket connection.
  static constexpr std::chrono::milliseconds kStreamTaken{2000};
  void close_request_stream() noexcept;
  // The request as one datagram on the bell; false when it could not go
  // (too long, no bell there, its queue full): it goes the other way then.
  bool ring_bell(const std::vector<std::uint8_t>& message);
  // A new bell_fd_ connected to the bell's path; false (and -1) when there
  // is none to connect to.
  bool connect_bell();
  // Reads what the request socket brought (answers into stream_answers_),
  // to its end, or with stop_when_short until a read finds less than room.
  void read_request_stream(bool stop_when_short = false);
  std::optional<Waited> look(std::chrono::milliseconds wait);
  Waited wait_reply(std::chrono::milliseconds wait, StagedTransfer* staged, Board board);
  wire::IpcMessage next_reply(Clock::time_point deadline, bool connecting, StagedTransfer* staged,
                              Board board, zmq::message_t& data);
  Error unexpected(std::uint64_t id, const wire::IpcMessage& reply) const;
  Error silence(bool connecting) const;
  Error closed(bool connecting, Waited waited) const;

  std::string endpoint_;
  std::string requests_path_;  // the request socket's (none for a tcp:// endpoint)
  int requests_fd_ = -1;
  std::optional<sockaddr_un> bell_address_;  // the bell's (none for a tcp:// endpoint)
  int bell_fd_ = -1;  // a datagram socket connected to the bell (connect_bell), or -1
  bool use_bell_ = false;
  std::string routing_id_;  // the DEALER's
  std::optional<wire::TcpFrameReader> stream_reader_;
  std::deque<wire::TcpFrame> stream_answers_;  // read, not yet taken
  std::chrono::milliseconds timeout_;
  std::function<void()> given_up_;
  zmq::context_t context_{1};
  zmq::socket_t socket_;
  DaemonWatch watch_{context_, socket_};  // before socket_ connects
  std::string node_;
  std::uint64_t last_request_ = 0;
  bool last_reply_was_silence_ = false;
};

}  // namespace zring::client
