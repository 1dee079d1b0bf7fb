// bell.hpp - a request rung on zringd's bell (internal).
//
// A client alone on its node (local_ranks: 1) sends the requests of its ops
// in the shared buffer (a Submit with ValuesIn::shared_buffer or ::staged,
// its block statistics too, up to kMaxBellBytes in all)
// as datagrams on `<ipc path>.bell`, a Unix datagram socket that zringd's
// ring thread reads itself. An op the io thread has checked and run before
// for that client starts there, without the hop through the io thread
// (daemon/ring_worker.hpp: RepeatOp); anything else the ring thread hands
// to the io thread, as if it had come on the request socket. A datagram is
//
//   the length of the client's routing id (u8, 1..255), the routing id
//   (daemon/request_socket.hpp: the name of the client's DEALER), and one
//   IPC message (encode_ipc), nothing after it.
//
// The decoder faces untrusted bytes (anyone in zringd's group may write
// there): what is wrong is named.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace zring::wire {

// The largest datagram a client sends (a longer request goes on the
// request socket) and zringd reads whole.
inline constexpr std::size_t kMaxBellBytes = 64 * 1024;

struct BellRequest {
  std::string client;                     // the routing id
  std::span<const std::uint8_t> message;  // the IPC message, in the datagram's bytes
};

[[nodiscard]] std::vector<std::uint8_t> encode_bell(const std::string& client,
                                                    const std::vector<std::uint8_t>& message);
// Throws Error(malformed_message) naming what is wrong (an empty or cut
// routing id, no message, more than kMaxBellBytes); the message itself is
// decode_ipc's to judge.
[[nodiscard]] BellRequest decode_bell(const std::uint8_t* data, std::size_t size);

}  // namespace zring::wire
