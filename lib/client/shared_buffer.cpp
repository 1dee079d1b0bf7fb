// shared_buffer.cpp - attaching, lending and giving up the shared buffer.
#include "client/shared_buffer.hpp"

#include <bit>

namespace zring::client {

SharedBuffer::~SharedBuffer() { drop(); }

void SharedBuffer::attach(DaemonChannel& channel, std::uint32_t local_rank, std::size_t bytes,
                          bool room) {
  drop();
  wire::Attach request;
  request.local_rank = local_rank;
  request.buffer = slot_;
  request.bytes = room ? std::bit_ceil(bytes) : bytes;
  const auto reply = channel.call<wire::Attached>(request, std::nullopt);
  region_ = transport::SharedRegion::open(reply.message.path, reply.message.bytes);
}

void SharedBuffer::lend(const std::shared_ptr<SharedTensors::Storage>& tensors) {
  tensors->place_in(region_);
  lent_ = tensors;
}

void SharedBuffer::drop() {
  if (const auto tensors = lent_.lock()) tensors->current = false;
  lent_.reset();
  region_.reset();
}

void SharedBuffer::give_up() {
  if (const auto tensors = lent_.lock(); tensors && tensors->current) tensors->give_up();
  drop();
}

bool SharedBuffer::holds(const SharedTensors::Storage& tensors) const noexcept {
  return tensors.current && tensors.region && tensors.region == region_;
}

}  // namespace zring::client
