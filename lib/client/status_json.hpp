// status_json.hpp - a zringd's status report as the JSON object `zringctl
// status --json` prints (internal; zringctl, the Python module and tests).
#pragma once

#include <string>

#include "wire/daemon_status.hpp"

namespace zring::client {

// One JSON object with the fields docs/operations.md shows, well under
// 64 KiB: long method and member lists are cut short and say so
// (methods_cut, members_cut).
[[nodiscard]] std::string status_json(const wire::DaemonStatus& status);

}  // namespace zring::client
