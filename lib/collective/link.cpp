#include "collective/link.hpp"

#include <cstring>

#include "wire/buffer_pool.hpp"

namespace zring::collective {

Bytes Bytes::copy_of(const void* data, std::size_t size) {
  auto buffer = std::make_shared<std::vector<std::uint8_t>>(size);
  if (size != 0) std::memcpy(buffer->data(), data, size);
  return take(std::move(buffer));
}

Bytes Bytes::take(std::shared_ptr<std::vector<std::uint8_t>> buffer) {
  const std::uint8_t* data = buffer->data();
  const std::size_t size = buffer->size();
  return Bytes(data, size, std::move(buffer));
}

OwnedBuffer allocate(std::size_t size) {
  // Used again op after op (wire/buffer_pool.hpp); the bytes are written next.
  return OwnedBuffer{wire::pooled_buffer(size), size};
}

}  // namespace zring::collective
