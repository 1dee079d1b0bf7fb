// status.hpp - ask a zringd how it is doing (internal; zringctl and tests).
#pragma once

#include <chrono>
#include <string>

namespace zring::wire {
struct Trace;         // wire/wire.hpp
struct DaemonStatus;  // wire/daemon_status.hpp
}  // namespace zring::wire

namespace zring::client {
// Sends a status request to the daemon at endpoint; returns its report
// (client/status_json.hpp renders it as JSON). Throws
// zring::Error(connection_failed / timeout) when it does not answer.
wire::DaemonStatus query_status(const std::string& endpoint, std::chrono::milliseconds timeout);

// Asks the daemon at endpoint for the timeline of its last ops (zringctl
// trace). Throws as query_status does, and malformed_message when the
// daemon is too old to keep one.
wire::Trace query_trace(const std::string& endpoint, std::chrono::milliseconds timeout);
}  // namespace zring::client
