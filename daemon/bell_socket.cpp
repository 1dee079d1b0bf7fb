#include "bell_socket.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <zring/error.hpp>

#include "wire/bell.hpp"

namespace zring::daemon {

BellSocket::BellSocket(std::string path) : path_(std::move(path)) {
  sockaddr_un address{};
  if (path_.size() >= sizeof address.sun_path)
    throw Error(ErrorCode::connection_failed,
                "cannot listen on the bell " + path_ + ": the path is longer than " +
                    std::to_string(sizeof address.sun_path - 1) + " bytes");
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path_.c_str(), path_.size() + 1);
  fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0)
    throw Error(ErrorCode::connection_failed,
                "cannot make the bell socket: " + std::string(std::strerror(errno)));
  ::unlink(path_.c_str());  // a socket a zringd that died left
  if (::bind(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    const int error = errno;
    ::close(fd_);
    fd_ = -1;
    throw Error(ErrorCode::connection_failed,
                "cannot listen on the bell " + path_ + ": " + std::strerror(error));
  }
  (void)::chmod(path_.c_str(), 0660);  // as the IPC socket beside it
}

BellSocket::~BellSocket() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(path_.c_str());
}

std::optional<std::size_t> BellSocket::receive(std::vector<std::uint8_t>& buffer) {
  buffer.resize(wire::kMaxBellBytes + 1);
  for (;;) {
    // MSG_TRUNC: the datagram's whole size, also when it did not fit.
    const ssize_t got = ::recv(fd_, buffer.data(), buffer.size(), MSG_DONTWAIT | MSG_TRUNC);
    if (got >= 0) return static_cast<std::size_t>(got);
    if (errno == EINTR) continue;
    return std::nullopt;  // EAGAIN: none there (nothing else befalls a bound datagram socket)
  }
}

}  // namespace zring::daemon
