#include "client/status.hpp"

#include <optional>
#include <zmq.hpp>
#include <zring/error.hpp>

#include "transport/zmq_calls.hpp"
#include "wire/wire.hpp"

namespace zring::client {

namespace {

struct Reply {
  wire::IpcHeader header;               // of kind error when the daemon refused
  std::optional<zmq::message_t> frame;  // what follows the header, if anything
};

Reply ask(const std::string& endpoint, wire::IpcKind kind, std::chrono::milliseconds timeout) {
  zmq::context_t context(1);
  zmq::socket_t socket(context, zmq::socket_type::dealer);
  socket.set(zmq::sockopt::linger, 0);
  // A status is a few KiB, a full timeline about 1 MiB.
  socket.set(zmq::sockopt::maxmsgsize, std::int64_t{64} << 20);
  transport::retry_interrupted([&] { socket.connect(endpoint); });
  wire::IpcHeader request;
  request.kind = kind;
  request.request = 1;
  const auto bytes = wire::encode_ipc_header(request);
  transport::retry_interrupted(
      [&] { return socket.send(zmq::buffer(bytes.data(), bytes.size()), zmq::send_flags::none); });
  zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
  if (transport::poll_items(&item, 1, timeout) == 0)
    throw Error(ErrorCode::timeout, "no answer from zringd at " + endpoint + " within " +
                                        std::to_string(timeout.count()) + " ms");
  zmq::message_t frame;
  (void)transport::retry_interrupted([&] { return socket.recv(frame, zmq::recv_flags::none); });
  Reply reply{wire::decode_ipc_header(frame.data<std::uint8_t>(), frame.size()), std::nullopt};
  if (frame.more()) {  // the parts of a message arrive together: this does not wait
    reply.frame.emplace();
    (void)transport::retry_interrupted(
        [&] { return socket.recv(*reply.frame, zmq::recv_flags::none); });
  }
  return reply;
}

Error refusal(const wire::IpcHeader& error, const std::string& hint = "") {
  return Error(static_cast<ErrorCode>(error.error_code), error.text + hint);
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

}  // namespace

std::string query_status(const std::string& endpoint, std::chrono::milliseconds timeout) {
  const Reply reply =
      asking("status", endpoint, [&] { return ask(endpoint, wire::IpcKind::status, timeout); });
  if (reply.header.kind == wire::IpcKind::error) throw refusal(reply.header);
  return reply.header.text;
}

wire::Trace query_trace(const std::string& endpoint, std::chrono::milliseconds timeout) {
  const Reply reply =
      asking("trace", endpoint, [&] { return ask(endpoint, wire::IpcKind::trace, timeout); });
  // A zringd older than trace requests cannot read this one's header.
  if (reply.header.kind == wire::IpcKind::error)
    throw refusal(reply.header, reply.header.error_code ==
                                        static_cast<std::uint32_t>(ErrorCode::malformed_message)
                                    ? " (a zringd older than this zringctl keeps no timeline)"
                                    : "");
  if (reply.header.kind != wire::IpcKind::trace || !reply.frame)
    throw Error(ErrorCode::malformed_message,
                "trace: zringd at '" + endpoint + "' answered with an IPC message of kind " +
                    std::to_string(static_cast<int>(reply.header.kind)) +
                    (reply.frame ? "" : " and no trace frame"));
  return wire::decode_trace(reply.frame->data<std::uint8_t>(), reply.frame->size());
}

}  // namespace zring::client
