// zring/config.hpp - the ring configuration (the YAML file), typed and validated.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zring {

// One member of the ring, in ring order.
struct NodeConfig {
  std::string name;     // unique, [A-Za-z0-9_.-]+
  std::string address;  // tcp://HOST:PORT this node's ring socket binds to
  std::string host;     // HOST part of address (an IPv6 literal without brackets)
  std::uint16_t port = 0;
  std::string ipc;              // this node's own ipc:// endpoint, overriding the top-level
                                // `ipc` (several daemons on one host); empty if not set
  std::string public_key;       // CurveZMQ public key, Z85 (40 characters); empty
                                // when the ring runs without CurveZMQ
  std::string secret_key_file;  // this node's own secret key file, overriding
                                // curve.secret_key_file; empty if not set
};

// CurveZMQ on the ring (`curve:` and the nodes' `public_key`): every ring
// socket encrypts, and a node accepts connections only from the ring's keys.
struct CurveConfig {
  std::string secret_key_file;  // this node's secret key file (absolute path)
  std::string secret_key;       // the key read from it, Z85 (40 characters); empty
                                // when the config was read with SecretKey::skip
};

// Whether reading a config also reads this node's secret key file. zringd
// and `check-config` read it (and check it); a tool that only needs the ipc
// endpoint (`zringctl status`) skips it, so users who may not read the key
// can still use it.
enum class SecretKey { read, skip };

// The optional Prometheus endpoint (`metrics: {listen: HOST:PORT}`).
struct MetricsConfig {
  std::string listen;      // HOST:PORT as written in the file
  std::string host;        // HOST part (an IPv6 literal without brackets)
  std::uint16_t port = 0;  // 1..65535
};

// A validated ring description. See configs/ for examples and
// docs/configuration.md for every key.
struct RingConfig {
  std::vector<NodeConfig> nodes;  // ring order; at least one
  std::string self;               // the name of this node
  std::size_t self_index = 0;     // position of self in nodes
  std::string ipc;                // ipc:// endpoint local clients connect to: self's
                                  // nodes[i].ipc if set, else the top-level ipc
  std::size_t local_ranks = 1;    // training processes on each node (>= 1)
  std::size_t min_nodes = 1;      // the smallest ring that may form: a strict majority of nodes
                                  // unless the file says otherwise (1..nodes.size())
  std::chrono::milliseconds timeout{10000};    // deadline of every op phase
  std::chrono::milliseconds heartbeat{500};    // ring liveness interval
  std::chrono::microseconds busy_poll{200};    // a short op's waits look without sleeping first
  std::size_t chunk_bytes = 1 << 20;           // ring pipelining unit (64 KiB..64 MiB)
  std::size_t gather_bytes = 192 << 10;        // ops a node sends at most this for go in one round
  std::size_t direct_bytes = 512 << 10;        // larger sums (3+ nodes) go round the ring
  std::size_t max_message_bytes = 256u << 20;  // ZMQ_MAXMSGSIZE on ring and IPC sockets
  std::string log_level = "info";              // error | warn | info | debug
  std::optional<MetricsConfig> metrics;        // HTTP /metrics; none unless configured
  std::optional<CurveConfig> curve;            // none unless the nodes have public keys
  bool tcp_data = true;  // ring messages over plain TCP connections (never with curve)
  // Their TCP congestion control: a kernel algorithm's name, or "system" for
  // the kernel's default (net.ipv4.tcp_congestion_control).
  std::string tcp_congestion = "cubic";
  std::string source;  // where the config came from (for messages)

  [[nodiscard]] std::size_t world_size() const noexcept { return nodes.size() * local_ranks; }
  [[nodiscard]] const NodeConfig& self_node() const { return nodes.at(self_index); }
};

// Parses and validates YAML text. source names the text in error messages
// (usually the file path). node, when given, overrides the file's `self`.
// Throws zring::Error(config_invalid) whose message names the source, the key
// and the problem, for example:
//   "zring.yaml: nodes[2].address: 'tcp://10.0.0.3' has no port (expected tcp://HOST:PORT)"
RingConfig parse_config(std::string_view yaml_text, std::string_view source,
                        const std::optional<std::string>& node = std::nullopt,
                        SecretKey secret = SecretKey::read);

// Reads path and parses it as above.
RingConfig load_config(const std::string& path,
                       const std::optional<std::string>& node = std::nullopt,
                       SecretKey secret = SecretKey::read);

}  // namespace zring
