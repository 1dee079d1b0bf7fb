#include "sd_notify.hpp"

#include <systemd/sd-daemon.h>

namespace zring::daemon {
void sd_notify_status(const std::string& state) { (void)sd_notify(0, state.c_str()); }
}  // namespace zring::daemon
