#include "request_socket.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <boost/asio/buffer.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <cstring>
#include <deque>
#include <optional>
#include <zring/error.hpp>

#include "transport/zmq_payload.hpp"
#include "wire/tcp_frames.hpp"

namespace zring::daemon {
namespace {

// A ZeroMQ routing id is 1..255 bytes.
constexpr std::size_t kMaxRoutingId = 255;
// Answers waiting to go out on one connection, at most (then they wait in
// IpcServer's backlog, as for a full ZeroMQ pipe).
constexpr std::size_t kMaxQueuedBytes = std::size_t{64} << 20;

}  // namespace

struct RequestSocket::Connection {
  Connection(boost::asio::io_context& io, std::size_t max_message_bytes)
      : socket(io), reader(max_message_bytes, max_message_bytes) {}
  struct Answer {
    std::array<std::uint8_t, wire::kTcpPrefixBytes> prefix;
    std::vector<std::uint8_t> header;
    std::optional<zmq::message_t> values;
    bool echo = false;  // of the routing id: for this connection only
  };
  boost::asio::local::stream_protocol::socket socket;
  wire::TcpFrameReader reader;
  std::optional<std::string> routing_id;  // from its first frame
  std::deque<Answer> answers;             // the first is being written
  std::size_t queued_bytes = 0;
};

RequestSocket::RequestSocket(boost::asio::io_context& io, std::size_t max_message_bytes,
                             std::size_t max_connections, Handler handler, Undelivered undelivered)
    : io_(io),
      max_message_bytes_(max_message_bytes),
      max_connections_(max_connections),
      handler_(std::move(handler)),
      undelivered_(std::move(undelivered)),
      acceptor_(io) {}

RequestSocket::~RequestSocket() { stop(); }

void RequestSocket::start(const std::string& path) {
  path_ = path;
  ::unlink(path.c_str());  // a socket a zringd that died left
  boost::system::error_code ec;
  const boost::asio::local::stream_protocol::endpoint endpoint(path);
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(boost::asio::socket_base::max_listen_connections, ec);
  if (ec) {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    throw Error(ErrorCode::connection_failed,
                "cannot listen for requests on " + path + ": " + ec.message());
  }
  (void)::chmod(path.c_str(), 0660);  // as the IPC socket beside it
  accept();
}

void RequestSocket::stop() {
  if (!acceptor_.is_open()) return;
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  for (const auto& weak : connections_)
    if (const auto c = weak.lock()) {
      c->socket.close(ignored);
      c->answers.clear();  // zringd stops: nothing goes out any more
    }
  connections_.clear();
  by_client_.clear();
  ::unlink(path_.c_str());
}

void RequestSocket::accept() {
  auto connection = std::make_shared<Connection>(io_, max_message_bytes_);
  acceptor_.async_accept(
      connection->socket, [this, connection](const boost::system::error_code& ec) {
        if (ec == boost::asio::error::operation_aborted || !acceptor_.is_open()) return;
        if (!ec) {
          std::erase_if(connections_, [](const auto& weak) { return weak.expired(); });
          if (connections_.size() >= max_connections_) {
            refuse(*connection, "more connections than local ranks and tools make");
          } else {
            connections_.push_back(connection);
            read(connection);
          }
        }
        accept();
      });
}

void RequestSocket::refuse(Connection& connection, const std::string& why) {
  ++refused_;
  last_refusal_ = why;
  boost::system::error_code ignored;
  connection.socket.close(ignored);
}

// Reads what is there, hands on every whole request, and reads on; the
// connection's end (the client went away) ends it quietly.
void RequestSocket::read(const std::shared_ptr<Connection>& connection) {
  const auto [at, room] = connection->reader.room();
  connection->socket.async_read_some(
      boost::asio::buffer(at, room),
      [this, connection](const boost::system::error_code& ec, std::size_t n) {
        if (!connection->socket.is_open()) return;
        if (ec) return close(connection);  // the client went away
        connection->reader.filled(n);
        try {
          while (std::optional<wire::TcpFrame> frame = connection->reader.next()) {
            if (!connection->routing_id) {
              if (frame->has_payload || frame->header.size() > kMaxRoutingId)
                return refuse(*connection,
                              "request socket: the first frame is not a ZeroMQ routing id");
              connection->routing_id.emplace(frame->header.begin(), frame->header.end());
              by_client_[*connection->routing_id] = connection;  // a newer one replaces it
              // Taken: the client's requests go here from now (it waits for this).
              std::optional<zmq::message_t> none;
              queue(connection, frame->header, none);
              connection->answers.back().echo = true;
              continue;
            }
            std::vector<zmq::message_t> frames;
            frames.emplace_back(connection->routing_id->data(), connection->routing_id->size());
            frames.emplace_back(frame->header.data(), frame->header.size());
            if (frame->has_payload)
              frames.push_back(
                  transport::message_over(std::move(frame->payload), frame->payload_bytes));
            handler_(frames);
            if (!connection->socket.is_open()) return;  // stopped meanwhile
          }
        } catch (const Error& e) {
          return refuse(*connection, std::string("request socket: ") + e.what());
        }
        read(connection);
      });
}

}  // namespace zring::daemon

namespace zring::daemon {

RequestSocket::Sent RequestSocket::send(const std::string& client,
                                        const std::vector<std::uint8_t>& header,
                                        std::optional<zmq::message_t>& values) {
  const auto at = by_client_.find(client);
  if (at == by_client_.end()) return Sent::no_connection;
  const std::shared_ptr<Connection> connection = at->second.lock();
  if (!connection || !connection->socket.is_open()) {
    by_client_.erase(at);
    return Sent::no_connection;
  }
  if (connection->queued_bytes > kMaxQueuedBytes) return Sent::full;
  queue(connection, header, values);
  return Sent::queued;
}

void RequestSocket::queue(const std::shared_ptr<Connection>& connection,
                          const std::vector<std::uint8_t>& header,
                          std::optional<zmq::message_t>& values) {
  Connection::Answer answer;
  const std::size_t value_bytes = values ? values->size() : 0;
  answer.prefix = wire::encode_tcp_prefix(header.size(), values.has_value(), value_bytes);
  answer.header = header;
  answer.values = std::move(values);
  values.reset();
  connection->queued_bytes += header.size() + value_bytes;
  connection->answers.push_back(std::move(answer));
  if (connection->answers.size() == 1) write(connection);
}

// Writes the first queued answer, then the next. When the connection
// breaks, what was not written whole goes another way (undelivered_).
void RequestSocket::write(const std::shared_ptr<Connection>& connection) {
  Connection::Answer& answer = connection->answers.front();
  std::array<boost::asio::const_buffer, 3> buffers{
      boost::asio::buffer(answer.prefix), boost::asio::buffer(answer.header),
      answer.values ? boost::asio::buffer(answer.values->data(), answer.values->size())
                    : boost::asio::const_buffer()};
  boost::asio::async_write(connection->socket, buffers,
                           [this, connection](const boost::system::error_code& ec, std::size_t) {
                             if (ec) return close(connection);
                             const Connection::Answer& done = connection->answers.front();
                             connection->queued_bytes -=
                                 done.header.size() + (done.values ? done.values->size() : 0);
                             connection->answers.pop_front();
                             if (!connection->answers.empty()) write(connection);
                           });
}

// The connection ends: no answer goes on it any more, and those still
// queued go another way.
void RequestSocket::close(const std::shared_ptr<Connection>& connection) {
  boost::system::error_code ignored;
  connection->socket.close(ignored);
  if (connection->routing_id) {
    const auto at = by_client_.find(*connection->routing_id);
    if (at != by_client_.end() && at->second.lock() == connection) by_client_.erase(at);
  }
  std::deque<Connection::Answer> left = std::exchange(connection->answers, {});
  connection->queued_bytes = 0;
  if (!connection->routing_id) return;
  for (Connection::Answer& a : left)
    if (!a.echo) undelivered_(*connection->routing_id, std::move(a.header), std::move(a.values));
}

}  // namespace zring::daemon
