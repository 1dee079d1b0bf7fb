#include "client/status.hpp"

#include <zmq.hpp>

#include <zring/error.hpp>

#include "transport/zmq_calls.hpp"
#include "wire/wire.hpp"

namespace zring::client {

namespace {

std::string ask(const std::string& endpoint, std::chrono::milliseconds timeout) {
  zmq::context_t context(1);
  zmq::socket_t socket(context, zmq::socket_type::dealer);
  socket.set(zmq::sockopt::linger, 0);
  socket.set(zmq::sockopt::maxmsgsize, std::int64_t{64} << 20);  // a status is a few KiB
  transport::retry_interrupted([&] { socket.connect(endpoint); });
  wire::IpcHeader request;
  request.kind = wire::IpcKind::status;
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
  const wire::IpcHeader reply = wire::decode_ipc_header(frame.data<std::uint8_t>(), frame.size());
  if (reply.kind == wire::IpcKind::error)
    throw Error(static_cast<ErrorCode>(reply.error_code), reply.text);
  return reply.text;
}

}  // namespace

std::string query_status(const std::string& endpoint, std::chrono::milliseconds timeout) {
  try {
    return ask(endpoint, timeout);
  } catch (const zmq::error_t& e) {
    throw Error(ErrorCode::connection_failed, "status: could not ask zringd at '" + endpoint +
                                                  "': ZeroMQ failed: " + e.what());
  }
}

}  // namespace zring::client
