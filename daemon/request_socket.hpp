// request_socket.hpp - clients' requests on a plain Unix stream socket beside
// the ZeroMQ IPC socket (daemon-internal).
//
// A request through ZeroMQ wakes the client's ZeroMQ I/O thread, then
// zringd's, then its io thread; on a busy host those wake-ups cost more
// than the request. So zringd also listens on `<ipc path>.req` (same mode
// as the IPC socket), and a connected client, once greeted, writes its
// requests there: the io thread reads them itself. The stream carries
// frames (wire/tcp_frames.hpp): first one whose header is the client's
// ZeroMQ routing id (1..255 bytes) and no payload, which zringd echoes
// when it takes the connection (the client writes no request before that:
// a connection refused, say for too many, loses none), then one per
// request, its header an IPC message and its payload the values frame if
// any.
// They are handed on as if the ROUTER had read them from that client, and
// the answers to a client with such a connection go back on it (send()),
// in the same frames, so that they do not cross ZeroMQ's I/O threads
// either. A connection that sends anything else is closed and counted;
// zringd goes on.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

namespace zring::daemon {

class RequestSocket {
 public:
  // ROUTER-like frames: [routing id, IPC message, values frame (if any)].
  using Handler = std::function<void(std::vector<zmq::message_t>& frames)>;
  // An answer whose connection broke before it went out whole (to send
  // another way): the client, the IPC message, the values frame.
  using Undelivered =
      std::function<void(const std::string& client, std::vector<std::uint8_t> header,
                         std::optional<zmq::message_t> values)>;

  RequestSocket(boost::asio::io_context& io, std::size_t max_message_bytes,
                std::size_t max_connections, Handler handler, Undelivered undelivered);
  ~RequestSocket();
  RequestSocket(const RequestSocket&) = delete;
  RequestSocket& operator=(const RequestSocket&) = delete;

  // Listens at path (a stale socket file there is replaced), mode 0660.
  // Throws zring::Error(connection_failed) when it cannot.
  void start(const std::string& path);
  // Closes the listener and every connection, and removes the file.
  void stop();

  // Queues an answer for the client of that routing id on its connection.
  enum class Sent { queued, full, no_connection };
  Sent send(const std::string& client, const std::vector<std::uint8_t>& header,
            std::optional<zmq::message_t>& values);

  [[nodiscard]] std::uint64_t refused() const noexcept { return refused_; }
  [[nodiscard]] const std::string& last_refusal() const noexcept { return last_refusal_; }

 private:
  struct Connection;
  void accept();
  void read(const std::shared_ptr<Connection>& connection);
  void refuse(Connection& connection, const std::string& why);
  void queue(const std::shared_ptr<Connection>& connection, const std::vector<std::uint8_t>& header,
             std::optional<zmq::message_t>& values);
  void write(const std::shared_ptr<Connection>& connection);
  void close(const std::shared_ptr<Connection>& connection);

  boost::asio::io_context& io_;
  std::size_t max_message_bytes_;
  std::size_t max_connections_;
  Handler handler_;
  Undelivered undelivered_;
  boost::asio::local::stream_protocol::acceptor acceptor_;
  std::string path_;
  std::vector<std::weak_ptr<Connection>> connections_;
  std::map<std::string, std::weak_ptr<Connection>> by_client_;  // by routing id
  std::uint64_t refused_ = 0;
  std::string last_refusal_;
};

}  // namespace zring::daemon
