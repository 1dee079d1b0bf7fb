// sd_notify.hpp - tells systemd how the daemon is doing (daemon-internal).
#pragma once

#include <string>

namespace zring::daemon {
// Sends state lines ("READY=1", "STATUS=...") to $NOTIFY_SOCKET when the
// service manager set one; does nothing otherwise.
void sd_notify_status(const std::string& state);
}  // namespace zring::daemon
