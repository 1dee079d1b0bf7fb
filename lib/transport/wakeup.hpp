// wakeup.hpp - a signal another thread can send the ring thread's poll
// (internal): an eventfd, which a zmq_poll item watches by its descriptor.
#pragma once

namespace zring::transport {

class Wakeup {
 public:
  // Throws zring::Error(internal) when the kernel gives no eventfd.
  Wakeup();
  ~Wakeup();
  Wakeup(const Wakeup&) = delete;
  Wakeup& operator=(const Wakeup&) = delete;

  // From any thread: the descriptor becomes readable until clear().
  void signal() noexcept;
  // On the polling thread: whether it was signalled since the last clear.
  bool clear() noexcept;
  [[nodiscard]] int fd() const noexcept { return fd_; }

 private:
  int fd_ = -1;
};

}  // namespace zring::transport
