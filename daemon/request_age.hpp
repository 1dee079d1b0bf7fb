// request_age.hpp - how zringd judges a request by when it was sent
// (daemon-internal): the io thread for every request, the ring thread for
// those rung on the bell, the same way. Only for a rank whose send times
// are on zringd's clock (its hello said so).
#pragma once

#include <algorithm>
#include <chrono>

#include "wire/wire.hpp"

namespace zring::daemon {

// How long ago the client sent the request, on zringd's clock.
inline std::chrono::milliseconds request_age(const wire::ClientWait& wait) {
  using Clock = std::chrono::steady_clock;
  return std::chrono::duration_cast<std::chrono::milliseconds>(
      Clock::now() - Clock::time_point(std::chrono::nanoseconds(wait.sent_ns)));
}

// Whether zringd read it a ring timeout or more after it was sent: every
// node that waited for its op has failed it by then.
inline bool read_too_late(const wire::ClientWait& wait, std::chrono::milliseconds timeout) {
  return wait.sent_ns != 0 && request_age(wait) >= timeout;
}

// Whether the client had given up on the request by the time zringd read
// it, or will before the first keepalive for it (a heartbeat away) can
// reach it; the margin is at most a quarter of the client's timeout.
inline bool client_gave_up(const wire::ClientWait& wait, std::chrono::milliseconds heartbeat) {
  if (wait.timeout_ms == 0 || wait.sent_ns == 0) return false;
  const auto timeout = std::chrono::milliseconds(wait.timeout_ms);
  const auto margin = std::min<std::chrono::milliseconds>(heartbeat, timeout / 4);
  return request_age(wait) >= timeout - margin;
}

}  // namespace zring::daemon
