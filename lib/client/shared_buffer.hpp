// shared_buffer.hpp - the buffer a connected client shares with its zringd
// (internal).
//
// Values travel through a SharedRegion that zringd made for this rank and
// maps as its buffer in one of two slots (wire::Attach, wire::SharedSlot):
// the ops slot's buffer takes the values of ops of caller memory, and
// SharedTensors stand in the tensors slot's, lent: zringd then reads their
// values there and writes the averages back over them. Once that buffer is
// let go of (newer SharedTensors made, or zringd restarted or given up
// on), they go through a copy instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "client/daemon_channel.hpp"
#include "client/shared_storage.hpp"
#include "transport/shared_region.hpp"
#include "wire/wire.hpp"

namespace zring::client {

class SharedBuffer {
 public:
  // A buffer in `slot` of this process's local rank (zringd keeps one per slot).
  explicit SharedBuffer(wire::SharedSlot slot) : slot_(slot) {}
  // The SharedTensors in this buffer are no longer where a zringd looks
  // for this process: zero_copy() says so from now on.
  ~SharedBuffer();
  SharedBuffer(const SharedBuffer&) = delete;
  SharedBuffer& operator=(const SharedBuffer&) = delete;

  // A new buffer of `bytes` asked of zringd over `channel`, which zringd
  // takes for local_rank's slot instead of the last one there. With room,
  // it has room to grow, so slightly larger ops do not need another one.
  void attach(DaemonChannel& channel, std::uint32_t local_rank, std::size_t bytes, bool room);
  // Places `tensors` in the buffer: they stand in it from now on.
  void lend(const std::shared_ptr<SharedTensors::Storage>& tensors);
  // Lets go of the buffer (zringd takes another or has lost it); the
  // SharedTensors standing in it, if any, go through a copy from now on.
  void drop();
  // zringd may still write the averages of an abandoned op into the buffer:
  // the next op takes a new one, and SharedTensors in it become private
  // memory (the same addresses, the same values).
  void give_up();

  // Whether these SharedTensors stand in this buffer now (zringd reads
  // and writes them where they are).
  [[nodiscard]] bool holds(const SharedTensors::Storage& tensors) const noexcept;
  // The buffer, once attached (null before, and once let go of).
  [[nodiscard]] const std::shared_ptr<transport::SharedRegion>& region() const noexcept {
    return region_;
  }

 private:
  wire::SharedSlot slot_;
  std::shared_ptr<transport::SharedRegion> region_;  // once attached
  std::weak_ptr<SharedTensors::Storage> lent_;       // the SharedTensors standing in region_
};

}  // namespace zring::client
