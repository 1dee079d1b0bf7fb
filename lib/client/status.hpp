// status.hpp - ask a zringd how it is doing (internal; zringctl and tests).
#pragma once

#include <chrono>
#include <string>

namespace zring::client {
// Sends a status request to the daemon at endpoint; returns its JSON report.
// Throws zring::Error(connection_failed / timeout) when it does not answer.
std::string query_status(const std::string& endpoint, std::chrono::milliseconds timeout);
}  // namespace zring::client
