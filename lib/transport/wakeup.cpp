#include "transport/wakeup.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <zring/error.hpp>

namespace zring::transport {

Wakeup::Wakeup() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (fd_ < 0)
    throw Error(
        ErrorCode::internal,
        std::string("cannot make the ring thread's wake-up (eventfd): ") + std::strerror(errno));
}

Wakeup::~Wakeup() { ::close(fd_); }

void Wakeup::signal() noexcept {
  const std::uint64_t one = 1;
  // Fails only when the counter is full, and then it is readable anyway.
  (void)!::write(fd_, &one, sizeof one);
}

bool Wakeup::clear() noexcept {
  std::uint64_t count = 0;
  return ::read(fd_, &count, sizeof count) == static_cast<ssize_t>(sizeof count) && count > 0;
}

}  // namespace zring::transport
