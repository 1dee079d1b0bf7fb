// bell_socket.hpp - zringd's bell: a Unix datagram socket beside the IPC
// socket, read by the ring thread (daemon-internal).
//
// Clients alone on their node ring it with the requests of their ops in the
// shared buffer (wire/bell.hpp says what a datagram holds and why). This
// class only binds it and reads datagrams; RingWorker judges them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zring::daemon {

class BellSocket {
 public:
  // Binds a datagram socket at path (a stale socket file there is
  // replaced), mode 0660 as the IPC socket beside it. Throws
  // zring::Error(connection_failed) when it cannot.
  explicit BellSocket(std::string path);
  ~BellSocket();  // closes it and removes the file
  BellSocket(const BellSocket&) = delete;
  BellSocket& operator=(const BellSocket&) = delete;

  [[nodiscard]] int fd() const noexcept { return fd_; }
  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  // The next datagram into buffer (resized to hold wire::kMaxBellBytes and
  // one more), without waiting: its whole size (more than the buffer holds
  // when it was cut), or nothing when none is there.
  [[nodiscard]] std::optional<std::size_t> receive(std::vector<std::uint8_t>& buffer);

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace zring::daemon
