// lib/config/endpoint.hpp - the rules for node names and for the tcp:// and
// ipc:// endpoints of a ring file. Plain string checks, kept apart from the
// YAML reading in config.cpp so each reads (and is tested) on its own.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace zring::config {

// What is wrong with a value, worded to end a message of the form
// "<source>: <key path>: <problem>"; empty when the value is fine.
using Problem = std::string;

// tcp://HOST:PORT split into its parts, or the reason it cannot be.
struct TcpAddress {
  std::string host;        // as written; an IPv6 literal without its brackets
  std::uint16_t port = 0;  // 1..65535
  Problem problem;         // empty when the address is valid
};

// HOST is an IPv4 literal, a host name or an [IPv6] literal, never a wildcard
// (*, 0.0.0.0, [::]): a node's address is where its peers reach it.
[[nodiscard]] TcpAddress parse_tcp_address(std::string_view address);

// HOST:PORT where an HTTP server listens (the metrics endpoint): HOST is an
// IPv4 literal, a host name or an [IPv6] literal, and may be a wildcard
// (0.0.0.0, [::]) to listen on every interface. No scheme, no path.
[[nodiscard]] TcpAddress parse_listen_address(std::string_view address);

// 1..64 characters of A-Z a-z 0-9 _ . -
[[nodiscard]] Problem check_node_name(std::string_view name);

// ipc:///ABSOLUTE/PATH, the path shorter than 100 bytes so it fits sun_path.
[[nodiscard]] Problem check_ipc_endpoint(std::string_view endpoint);

// 'text' in quotes for a message, control characters (a NUL, a newline from a
// double-quoted YAML string) shown as \xNN so the message stays one line.
[[nodiscard]] std::string quote(std::string_view text);

// One spelling per host, so that "LOCALHOST" and "localhost", or "::1" and
// "0:0::1", compare equal when looking for two nodes on one host.
[[nodiscard]] std::string canonical_host(std::string_view host);

}  // namespace zring::config
