// zmq_payload.hpp - a ZeroMQ message over bytes read from a stream (internal).
//
// Frames read from a plain socket (wire/tcp_frames.hpp) hand over their
// payload as a shared buffer; zringd and the client pass values on as
// zmq::message_t. This makes one from the other without a copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <zmq.hpp>

namespace zring::transport {

// A message over `size` bytes of `payload`, keeping the payload alive as long
// as the message lives; an empty message when size is 0.
inline zmq::message_t message_over(std::shared_ptr<std::uint8_t[]> payload, std::size_t size) {
  if (size == 0) return zmq::message_t();
  auto* keep = new std::shared_ptr<std::uint8_t[]>(std::move(payload));
  return zmq::message_t(
      keep->get(), size,
      [](void*, void* hint) { delete static_cast<std::shared_ptr<std::uint8_t[]>*>(hint); }, keep);
}

}  // namespace zring::transport
