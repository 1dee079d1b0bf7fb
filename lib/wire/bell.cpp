#include "wire/bell.hpp"

#include <zring/error.hpp>

namespace zring::wire {
namespace {

[[noreturn]] void bad(const std::string& what) {
  throw Error(ErrorCode::malformed_message, "bell datagram: " + what);
}

}  // namespace

std::vector<std::uint8_t> encode_bell(const std::string& client,
                                      const std::vector<std::uint8_t>& message) {
  if (client.empty() || client.size() > 255) bad("a routing id of 1..255 bytes is needed");
  std::vector<std::uint8_t> out;
  out.reserve(1 + client.size() + message.size());
  out.push_back(static_cast<std::uint8_t>(client.size()));
  out.insert(out.end(), client.begin(), client.end());
  out.insert(out.end(), message.begin(), message.end());
  return out;
}

BellRequest decode_bell(const std::uint8_t* data, std::size_t size) {
  if (size > kMaxBellBytes)
    bad(std::to_string(size) + " bytes, more than " + std::to_string(kMaxBellBytes));
  if (size == 0) bad("empty");
  const std::size_t id_bytes = data[0];
  if (id_bytes == 0) bad("a routing id of 0 bytes");
  if (size < 1 + id_bytes)
    bad("a routing id of " + std::to_string(id_bytes) + " bytes in " + std::to_string(size - 1));
  if (size == 1 + id_bytes) bad("no IPC message after the routing id");
  BellRequest request;
  request.client.assign(reinterpret_cast<const char*>(data + 1), id_bytes);
  request.message = std::span<const std::uint8_t>(data + 1 + id_bytes, size - 1 - id_bytes);
  return request;
}

}  // namespace zring::wire
