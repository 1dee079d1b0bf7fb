// ipc_send.cpp - IpcServer's way out to clients (daemon-internal).
//
// Every answer, error and keepalive leaves through send(): at once when
// the client's pipe takes it (its request socket connection, if it has
// one, else the ROUTER), else parked in the answer backlog (up to
// kBacklogBytes a client) and retried on a timer.
#include <boost/asio/post.hpp>

#include "ipc_server.hpp"
#include "log.hpp"

namespace zring::daemon {

// An answer goes out at once unless the client's pipe is full or answers
// to it already wait: then it waits in the backlog, in order. A keepalive
// is not worth keeping: such a client has messages to read.
void IpcServer::send(const std::string& client, const wire::IpcMessage& message,
                     std::optional<zmq::message_t> values) {
  if (!running_) return;
  AnswerBacklog::Answer answer{wire::encode_ipc(message), std::move(values)};
  const bool keepalive = std::holds_alternative<wire::Keepalive>(message);
  if (backlog_.holds(client)) {
    if (!keepalive) park(client, std::move(answer));
  } else if (try_send(client, answer) == AnswerBacklog::Sent::full && !keepalive) {
    park(client, std::move(answer));
  }
  // Sending can swallow the edge of ZMQ_FD: look for input again.
  boost::asio::post(io_, [this] { drain(); });
}

AnswerBacklog::Sent IpcServer::try_send(const std::string& client, AnswerBacklog::Answer& answer) {
  // A client with a request socket connection gets its answers there.
  switch (requests_.send(client, answer.header, answer.values)) {
    case RequestSocket::Sent::queued:
      return AnswerBacklog::Sent::yes;
    case RequestSocket::Sent::full:
      return AnswerBacklog::Sent::full;
    case RequestSocket::Sent::no_connection:
      break;
  }
  try {
    if (!socket_.send(zmq::buffer(client), zmq::send_flags::sndmore | zmq::send_flags::dontwait))
      return AnswerBacklog::Sent::full;
    // The rest of a message whose first frame went in always follows it.
    socket_.send(zmq::buffer(answer.header.data(), answer.header.size()),
                 answer.values ? zmq::send_flags::sndmore : zmq::send_flags::none);
    if (answer.values) socket_.send(std::move(*answer.values), zmq::send_flags::none);
    return AnswerBacklog::Sent::yes;
  } catch (const zmq::error_t& e) {
    log_debug("could not answer a client (" + std::string(e.what()) + "): it has gone");
    return AnswerBacklog::Sent::gone;
  }
}

// An answer that did not go out whole on a client's request socket
// connection (it broke): on the ROUTER now, or into the backlog.
void IpcServer::resend(const std::string& client, AnswerBacklog::Answer answer) {
  if (backlog_.holds(client) || try_send(client, answer) == AnswerBacklog::Sent::full)
    park(client, std::move(answer));
  boost::asio::post(io_, [this] { drain(); });
}

void IpcServer::park(const std::string& client, AnswerBacklog::Answer answer) {
  if (!backlog_.park(client, std::move(answer))) {
    ++answers_dropped_;
    const auto now = Clock::now();
    if (!drop_logged_ || now - *drop_logged_ >= std::chrono::seconds(10)) {
      drop_logged_ = now;
      log_warn("a client that reads nothing has " + std::to_string(kBacklogBytes >> 20) +
               " MiB of answers waiting: further answers to it are dropped (" +
               std::to_string(answers_dropped_) + " so far)");
    }
    return;
  }
  if (!backlog_armed_) {
    backlog_retry_ = std::chrono::milliseconds(1);
    arm_backlog_timer();
  }
}

// Retries the backlog, sooner while it moves, up to every 50 ms while it does not.
void IpcServer::arm_backlog_timer() {
  backlog_armed_ = true;
  backlog_timer_.expires_after(backlog_retry_);
  backlog_timer_.async_wait([this](const boost::system::error_code& ec) {
    backlog_armed_ = false;
    if (ec || !running_) return;
    const std::size_t sent =
        backlog_.flush([this](const std::string& client, AnswerBacklog::Answer& answer) {
          return try_send(client, answer);
        });
    if (backlog_.empty()) return;
    backlog_retry_ = sent > 0 ? std::chrono::milliseconds(1)
                              : std::min(backlog_retry_ * 2, std::chrono::milliseconds(50));
    arm_backlog_timer();
    boost::asio::post(io_, [this] { drain(); });
  });
}

void IpcServer::refuse(const Refusal& refusal) {
  send_error(refusal.client, refusal.request, refusal.code, refusal.text);
}

void IpcServer::send_error(const std::string& client, std::uint64_t id, ErrorCode code,
                           const std::string& text) {
  send(client, wire::ErrorReply{id, code, text});
}

}  // namespace zring::daemon
