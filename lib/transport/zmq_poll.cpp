// zmq_poll.cpp - poll_items (zmq_calls.hpp): ZeroMQ sockets and plain
// descriptors in one poll(2).
//
// A ZeroMQ socket's ZMQ_FD only signals that its commands changed; whether
// it can be read or written is ZMQ_EVENTS, which must be asked before
// sleeping (what it signalled earlier and was not read does not signal
// again) and after its descriptor woke the poll.
#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <vector>

#include "transport/zmq_calls.hpp"

namespace zring::transport {
namespace {

// The events a ZeroMQ socket has now, as revents for `wanted`.
short zmq_events(void* socket, short wanted) {
  for (;;) {
    std::uint32_t events = 0;
    std::size_t size = sizeof events;
    if (zmq_getsockopt(socket, ZMQ_EVENTS, &events, &size) == 0)
      return static_cast<short>(events & static_cast<std::uint32_t>(wanted) &
                                (ZMQ_POLLIN | ZMQ_POLLOUT));
    if (zmq_errno() != EINTR) throw zmq::error_t();
  }
}

int socket_fd(void* socket) {
  int fd = -1;
  std::size_t size = sizeof fd;
  if (zmq_getsockopt(socket, ZMQ_FD, &fd, &size) != 0) throw zmq::error_t();
  return fd;
}

}  // namespace

int poll_items(zmq::pollitem_t* items, std::size_t count, std::chrono::milliseconds timeout,
               std::chrono::microseconds busy) {
  thread_local std::vector<pollfd> fds;  // the ring thread polls often: no allocation a poll
  fds.resize(count);
  int ready = 0;
  for (std::size_t i = 0; i < count; ++i) {
    zmq::pollitem_t& item = items[i];
    item.revents = 0;
    if (item.socket) {
      fds[i] = {socket_fd(item.socket), POLLIN, 0};
      item.revents = zmq_events(item.socket, item.events);
      if (item.revents) ++ready;
    } else {
      short events = 0;
      if (item.events & ZMQ_POLLIN) events |= POLLIN;
      if (item.events & ZMQ_POLLOUT) events |= POLLOUT;
      if (item.events & ZMQ_POLLPRI) events |= POLLPRI;
      fds[i] = {item.fd, events, 0};
    }
  }
  const auto began = std::chrono::steady_clock::now();
  const auto until = began + timeout;
  // Looks without sleeping until then (never past the time given).
  const auto busy_until = busy.count() <= 0     ? began
                          : timeout.count() < 0 ? began + busy
                                                : std::min(began + busy, until);
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - now);
    const int wait = ready ? 0
                     : timeout.count() < 0
                         ? -1  // as zmq::poll: no end
                         : static_cast<int>(std::max<std::int64_t>(left.count(), 0));
    int rc = 0;
    if (wait != 0 && now < busy_until) {
      rc = ::poll(fds.data(), fds.size(), 0);
      if (rc == 0) {
        sched_yield();  // whoever else can run, a woken sender among them
        continue;
      }
    } else {
      rc = ::poll(fds.data(), fds.size(), wait);
    }
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) throw zmq::error_t();
    for (std::size_t i = 0; i < count; ++i) {
      zmq::pollitem_t& item = items[i];
      const short got = fds[i].revents;
      if (item.socket) {
        if (got && !item.revents) {  // its commands changed: ask again
          item.revents = zmq_events(item.socket, item.events);
          if (item.revents) ++ready;
        }
        continue;
      }
      short revents = 0;
      if (got & POLLIN) revents |= ZMQ_POLLIN;
      if (got & POLLOUT) revents |= ZMQ_POLLOUT;
      if (got & POLLPRI) revents |= ZMQ_POLLPRI;
      if (got & ~(POLLIN | POLLOUT | POLLPRI)) revents |= ZMQ_POLLERR;
      item.revents = revents;
      if (revents) ++ready;
    }
    if (ready || rc == 0 || (timeout.count() >= 0 && left.count() <= 0))
      return ready;  // ready, or the time is up
    // A ZeroMQ socket's descriptor woke the poll for commands that made
    // nothing readable: sleep again for what is left.
  }
}

}  // namespace zring::transport
