// request_socket.hpp - clients' requests on a plain Unix stream socket beside
// the ZeroMQ IPC socket (daemon-internal).
//
// A request through ZeroMQ wakes the client's ZeroMQ I/O thread, then
// zringd's, then its io thread; on a busy host those wake-ups cost more
// than the request. So zringd also listens on `<ipc path>.req` (same mode
// as the IPC socket), and a connected client, once greeted, writes its
// requests there: the io thread reads them itself. The stream carries
// frames (wire/tcp_frames.hpp): first one whose header is the client's
// ZeroMQ routing id (1..255 bytes) and no payload, then one per request,
// its header an IPC message and its payload the values frame if any.
// They are handed on as if the ROUTER had read them from that client, and
// the answers go back through the ROUTER, so a client's requests and
// answers keep one order. A connection that sends anything else is closed
// and counted; zringd goes on.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include <zmq.hpp>

namespace zring::daemon {

class RequestSocket {
 public:
  // ROUTER-like frames: [routing id, IPC message, values frame (if any)].
  using Handler = std::function<void(std::vector<zmq::message_t>& frames)>;

  RequestSocket(boost::asio::io_context& io, std::size_t max_message_bytes,
                std::size_t max_connections, Handler handler);
  ~RequestSocket();
  RequestSocket(const RequestSocket&) = delete;
  RequestSocket& operator=(const RequestSocket&) = delete;

  // Listens at path (a stale socket file there is replaced), mode 0660.
  // Throws zring::Error(connection_failed) when it cannot.
  void start(const std::string& path);
  // Closes the listener and every connection, and removes the file.
  void stop();

  [[nodiscard]] std::uint64_t refused() const noexcept { return refused_; }
  [[nodiscard]] const std::string& last_refusal() const noexcept { return last_refusal_; }

 private:
  struct Connection;
  void accept();
  void read(const std::shared_ptr<Connection>& connection);
  void refuse(Connection& connection, const std::string& why);

  boost::asio::io_context& io_;
  std::size_t max_message_bytes_;
  std::size_t max_connections_;
  Handler handler_;
  boost::asio::local::stream_protocol::acceptor acceptor_;
  std::string path_;
  std::vector<std::weak_ptr<Connection>> connections_;
  std::uint64_t refused_ = 0;
  std::string last_refusal_;
};

}  // namespace zring::daemon
