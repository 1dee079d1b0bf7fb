#include "client/status.hpp"

#include <optional>
#include <variant>
#include <zmq.hpp>
#include <zring/error.hpp>

#include "transport/zmq_calls.hpp"
#include "wire/wire.hpp"

namespace zring::client {

namespace {

// The one request of this exchange; its id is matched in the answer.
constexpr std::uint64_t kRequest = 1;

struct Reply {
  wire::IpcMessage message;             // an ErrorReply when the daemon refused
  std::optional<zmq::message_t> frame;  // what follows the message, if anything
};

// Sends `query` and waits up to `timeout` for the answer with its request id.
Reply ask(const std::string& endpoint, const wire::IpcMessage& query,
          std::chrono::milliseconds timeout) {
  zmq::context_t context(1);
  zmq::socket_t socket(context, zmq::socket_type::dealer);
  socket.set(zmq::sockopt::linger, 0);
  // A status is a few KiB, a full timeline about 1 MiB.
  socket.set(zmq::sockopt::maxmsgsize, std::int64_t{64} << 20);
  transport::retry_interrupted([&] { socket.connect(endpoint); });
  const auto bytes = wire::encode_ipc(query);
  transport::retry_interrupted(
      [&] { return socket.send(zmq::buffer(bytes.data(), bytes.size()), zmq::send_flags::none); });
  const auto give_up = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(give_up - std::chrono::steady_clock::now());
    zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
    if (left.count() <= 0 || transport::poll_items(&item, 1, left) == 0)
      throw Error(ErrorCode::timeout, "no answer from zringd at " + endpoint + " within " +
                                          std::to_string(timeout.count()) + " ms");
    zmq::message_t frame;
    (void)transport::retry_interrupted([&] { return socket.recv(frame, zmq::recv_flags::none); });
    Reply reply{wire::decode_ipc(frame.data<std::uint8_t>(), frame.size()), std::nullopt};
    if (frame.more()) {  // the parts of a message arrive together: this does not wait
      reply.frame.emplace();
      (void)transport::retry_interrupted(
          [&] { return socket.recv(*reply.frame, zmq::recv_flags::none); });
    }
    if (wire::request_of(reply.message) == kRequest) return reply;
  }
}

// ZeroMQ failures become connection_failed, naming what was asked and where.
template <typename F>
auto asking(const char* what, const std::string& endpoint, F&& f) {
  try {
    return f();
  } catch (const zmq::error_t& e) {
    throw Error(ErrorCode::connection_failed, std::string(what) + ": could not ask zringd at '" +
                                                  endpoint + "': ZeroMQ failed: " + e.what());
  }
}

// A reply that is neither an error nor the expected answer.
Error unexpected(const char* what, const std::string& endpoint, const Reply& reply) {
  return Error(ErrorCode::malformed_message,
               std::string(what) + ": zringd at '" + endpoint +
                   "' answered with an IPC message of kind " +
                   std::to_string(static_cast<int>(wire::kind_of(reply.message))));
}

}  // namespace

wire::DaemonStatus query_status(const std::string& endpoint, std::chrono::milliseconds timeout) {
  const Reply reply = asking("status", endpoint,
                             [&] { return ask(endpoint, wire::StatusQuery{kRequest}, timeout); });
  if (const auto* error = std::get_if<wire::ErrorReply>(&reply.message))
    throw Error(error->code, error->text);
  if (const auto* report = std::get_if<wire::StatusReport>(&reply.message)) return report->status;
  throw unexpected("status", endpoint, reply);
}

wire::Trace query_trace(const std::string& endpoint, std::chrono::milliseconds timeout) {
  const Reply reply =
      asking("trace", endpoint, [&] { return ask(endpoint, wire::TraceQuery{kRequest}, timeout); });
  // A zringd older than trace requests cannot read this one's message.
  if (const auto* error = std::get_if<wire::ErrorReply>(&reply.message))
    throw Error(error->code, error->text + (error->code == ErrorCode::malformed_message
                                                ? " (a zringd older than this zringctl keeps no "
                                                  "timeline)"
                                                : ""));
  if (!std::holds_alternative<wire::TraceReply>(reply.message) || !reply.frame)
    throw Error(ErrorCode::malformed_message,
                "trace: zringd at '" + endpoint + "' answered with an IPC message of kind " +
                    std::to_string(static_cast<int>(wire::kind_of(reply.message))) +
                    (reply.frame ? "" : " and no trace frame"));
  return wire::decode_trace(reply.frame->data<std::uint8_t>(), reply.frame->size());
}

}  // namespace zring::client
