// lib/config/config.cpp - the ring file becomes a validated RingConfig, or a
// config_invalid Error of the form "<source>: <key path>: <problem>". How any
// key is read is yaml_reading.cpp's (the only other user of yaml-cpp); what
// each key means, and every check of it, is here.
//
// Every check exists so that a mistake in the file stops zringd at start-up with
// a message naming the file, the key and the fix, rather than a ring that forms
// wrongly or hangs later. docs/configuration.md lists every key and limit.

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>
#include <zring/config.hpp>
#include <zring/error.hpp>

#include "config/endpoint.hpp"
#include "config/keys.hpp"
#include "config/yaml_reading.hpp"

namespace zring {
namespace {

using config::check_keys;
using config::GiB;
using config::join;
using config::KiB;
using config::kind_of;
using config::MiB;
using config::quote;
using config::Range;
using config::read_integer;
using config::read_string;
using config::require_string;
using config::value_of;
using config::Where;

constexpr Range kLocalRanks{1, 1024};
constexpr Range kTimeoutMs{100, 3'600'000};
// Below 10 ms heartbeats would only add load; the upper bound that matters,
// half of timeout_ms, is checked once the timeout is known.
constexpr Range kHeartbeatMs{10, 3'600'000};
// Looking for messages without sleeping for longer than 10 ms is a core
// given to the ring, which CPUAffinity= says better.
constexpr Range kBusyPollUs{0, 10'000};
constexpr Range kChunkBytes{64 * KiB, 64 * MiB, true};
// The lower bound that matters, chunk_bytes + kHeaderRoom, is checked against
// chunk_bytes; 4 GiB keeps every length within msgpack's 32-bit sizes.
constexpr std::uint64_t kHeaderRoom = 64 * KiB;
constexpr Range kMaxMessageBytes{kChunkBytes.min + kHeaderRoom, 4 * GiB, true};
constexpr Range kGatherBytes{0, 64 * MiB, true};
constexpr Range kDirectBytes{0, 1 * GiB, true};

// The membership protocol names nodes in a bitmap of at most this many (wire::kMaxRingNodes).
constexpr std::size_t kMaxNodes = 4096;

constexpr std::array<std::string_view, 17> kTopKeys{
    "nodes",         "self",         "ipc",          "local_ranks",
    "min_nodes",     "timeout_ms",   "heartbeat_ms", "busy_poll_us",
    "chunk_bytes",   "gather_bytes", "direct_bytes", "max_message_bytes",
    "log_level",     "metrics",      "curve",        "tcp_data",
    "tcp_congestion"};
constexpr std::array<std::string_view, 5> kNodeKeys{"name", "address", "ipc", "public_key",
                                                    "secret_key_file"};
constexpr std::array<std::string_view, 1> kMetricsKeys{"listen"};
constexpr std::array<std::string_view, 1> kCurveKeys{"secret_key_file"};
constexpr std::array<std::string_view, 4> kLogLevels{"error", "warn", "info", "debug"};

// ------------------------------------------------------ names and addresses --

// The rules themselves live in endpoint.cpp; these attach the key path.
void check(const config::Problem& problem, const Where& where) {
  if (!problem.empty()) where.fail(problem);
}

void read_address(NodeConfig& node, const Where& where) {
  config::TcpAddress address = config::parse_tcp_address(node.address);
  check(address.problem, where);
  node.host = std::move(address.host);
  node.port = address.port;
}

// ------------------------------------------------------------------ nodes --

void check_key_path(const std::string& path, const Where& where) {
  if (path.empty() || path.front() != '/')
    where.fail(quote(path) + " is not an absolute path (expected /PATH/TO/NODE.key)");
}

NodeConfig read_node(const YAML::Node& entry, const Where& where) {
  if (!entry.IsMap())
    where.fail("expected a map like {name: a, address: tcp://HOST:PORT}, got " + kind_of(entry));
  check_keys(entry, where, kNodeKeys);
  NodeConfig node;
  node.name = require_string(entry, "name", where, " (every node needs a name)");
  check(config::check_node_name(node.name), where.key("name"));
  node.address = require_string(entry, "address", where, " (expected tcp://HOST:PORT)");
  read_address(node, where.key("address"));
  if (auto ipc = read_string(entry, "ipc", where)) {
    check(config::check_ipc_endpoint(*ipc), where.key("ipc"));
    node.ipc = *std::move(ipc);
  }
  if (auto key = read_string(entry, "public_key", where)) {
    const config::Problem problem = config::check_z85_key(*key);
    if (!problem.empty()) where.key("public_key").fail(quote(*key) + " " + problem);
    node.public_key = *std::move(key);
  }
  if (auto file = read_string(entry, "secret_key_file", where)) {
    check_key_path(*file, where.key("secret_key_file"));
    node.secret_key_file = *std::move(file);
  }
  return node;
}

void check_unique(const std::vector<NodeConfig>& nodes, const Where& where) {
  std::map<std::string, std::size_t, std::less<>> by_name;
  std::map<std::string, std::size_t, std::less<>> by_endpoint;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const NodeConfig& node = nodes[i];
    if (const auto [other, inserted] = by_name.emplace(node.name, i); !inserted) {
      where.index(i).key("name").fail("duplicate name " + quote(node.name) + " (also nodes[" +
                                      std::to_string(other->second) + "])");
    }
    const std::string endpoint =
        config::canonical_host(node.host) + "|" + std::to_string(node.port);
    if (const auto [other, inserted] = by_endpoint.emplace(endpoint, i); !inserted) {
      where.index(i).key("address").fail(quote(node.address) + " is the same endpoint as nodes[" +
                                         std::to_string(other->second) + "].address " +
                                         quote(nodes[other->second].address));
    }
  }
}

std::vector<NodeConfig> read_nodes(const YAML::Node& root, const Where& top) {
  const Where where = top.key("nodes");
  const auto list = value_of(root, "nodes", where);
  if (!list)
    where.fail(
        "missing (list the ring members in ring order, each {name: NAME, address: "
        "tcp://HOST:PORT})");
  if (!list->IsSequence())
    where.fail("expected a list of {name, address} maps, got " + kind_of(*list));
  if (list->size() == 0) where.fail("is empty; list at least one node");
  if (list->size() > kMaxNodes)
    where.fail("lists " + std::to_string(list->size()) + " nodes; a ring has at most " +
               std::to_string(kMaxNodes));
  std::vector<NodeConfig> nodes;
  for (const auto& entry : *list) nodes.push_back(read_node(entry, where.index(nodes.size())));
  check_unique(nodes, where);
  return nodes;
}

// Every node must end up with an ipc endpoint, and two daemons on one host
// cannot share one: the second would fail to bind, or steal the first's socket.
void check_ipc_endpoints(const std::vector<NodeConfig>& nodes,
                         const std::optional<std::string>& shared, const Where& top) {
  std::map<std::string, std::size_t, std::less<>> owner;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const Where where = top.key("nodes").index(i).key("ipc");
    if (nodes[i].ipc.empty() && !shared) {
      where.fail(
          "missing, and there is no top-level ipc (set ipc: ipc:///run/zring/zringd.sock, "
          "or an ipc for every node)");
    }
    const std::string& endpoint = nodes[i].ipc.empty() ? *shared : nodes[i].ipc;
    const std::string key = config::canonical_host(nodes[i].host) + "|" + endpoint;
    if (const auto [other, inserted] = owner.emplace(key, i); !inserted) {
      where.fail(quote(endpoint) + (nodes[i].ipc.empty() ? " (the top-level ipc)" : "") +
                 " is also the ipc endpoint of nodes[" + std::to_string(other->second) +
                 "] on host " + quote(nodes[i].host) +
                 "; daemons on one host need their own nodes[i].ipc");
    }
  }
}

std::size_t resolve_self(const YAML::Node& root, const std::vector<NodeConfig>& nodes,
                         const std::optional<std::string>& node_override, const Where& top) {
  const Where where = top.key("self");
  const std::optional<std::string> in_file = read_string(root, "self", top);
  const std::optional<std::string>& self = node_override ? node_override : in_file;
  if (!self) where.fail("missing (set it in the file or pass --node NAME)");
  const auto found = std::find_if(nodes.begin(), nodes.end(),
                                  [&](const NodeConfig& n) { return n.name == *self; });
  if (found == nodes.end()) {
    std::vector<std::string> names;
    for (const NodeConfig& n : nodes) names.push_back(n.name);
    where.fail(quote(*self) + (node_override ? " (from --node)" : "") +
               " is not one of the nodes (" + join(names) + ")");
  }
  return static_cast<std::size_t>(found - nodes.begin());
}

// ---------------------------------------------------------- scalar settings --

void read_timing(const YAML::Node& root, const Where& top, RingConfig& config) {
  const std::uint64_t timeout = read_integer(root, "timeout_ms", top, kTimeoutMs)
                                    .value_or(static_cast<std::uint64_t>(config.timeout.count()));
  const std::uint64_t heartbeat = read_integer(root, "heartbeat_ms", top, kHeartbeatMs)
                                      .value_or(std::min<std::uint64_t>(500, timeout / 4));
  // Two heartbeats must fit in one timeout, so a silent peer is noticed, and
  // reported, before an op's deadline passes.
  if (2 * heartbeat >= timeout) {
    top.key("heartbeat_ms")
        .fail(std::to_string(heartbeat) + " must be less than half of timeout_ms (" +
              std::to_string(timeout) + " / 2)");
  }
  config.timeout = std::chrono::milliseconds(timeout);
  config.heartbeat = std::chrono::milliseconds(heartbeat);
  config.busy_poll = std::chrono::microseconds(
      read_integer(root, "busy_poll_us", top, kBusyPollUs)
          .value_or(static_cast<std::uint64_t>(config.busy_poll.count())));
}

void read_sizes(const YAML::Node& root, const Where& top, RingConfig& config) {
  const std::uint64_t chunk =
      read_integer(root, "chunk_bytes", top, kChunkBytes).value_or(config.chunk_bytes);
  if (chunk % sizeof(float) != 0) {
    top.key("chunk_bytes")
        .fail(std::to_string(chunk) +
              " is not a multiple of 4 (a chunk holds whole float32 values)");
  }
  const std::uint64_t max_message = read_integer(root, "max_message_bytes", top, kMaxMessageBytes)
                                        .value_or(config.max_message_bytes);
  if (max_message < chunk + kHeaderRoom) {
    top.key("max_message_bytes")
        .fail(std::to_string(max_message) + " is below chunk_bytes + 64 KiB (" +
              std::to_string(chunk + kHeaderRoom) + "); a ring message is a chunk plus its header");
  }
  config.chunk_bytes = chunk;
  config.max_message_bytes = max_message;
  config.gather_bytes =
      read_integer(root, "gather_bytes", top, kGatherBytes).value_or(config.gather_bytes);
  config.direct_bytes =
      read_integer(root, "direct_bytes", top, kDirectBytes).value_or(config.direct_bytes);
}

void read_settings(const YAML::Node& root, const Where& top, RingConfig& config) {
  config.local_ranks =
      read_integer(root, "local_ranks", top, kLocalRanks).value_or(config.local_ranks);
  // A strict majority by default: the two sides of a partition can never both go on.
  const Range min_nodes{1, config.nodes.size()};
  config.min_nodes =
      read_integer(root, "min_nodes", top, min_nodes).value_or(config.nodes.size() / 2 + 1);
  read_timing(root, top, config);
  read_sizes(root, top, config);
  if (auto level = read_string(root, "log_level", top)) {
    if (std::find(kLogLevels.begin(), kLogLevels.end(), *level) == kLogLevels.end()) {
      top.key("log_level").fail(quote(*level) + " is not one of " + join(kLogLevels));
    }
    config.log_level = *std::move(level);
  }
}

// `metrics: {listen: HOST:PORT}`: the optional Prometheus endpoint.
std::optional<MetricsConfig> read_metrics(const YAML::Node& root, const Where& top) {
  const Where where = top.key("metrics");
  const auto map = value_of(root, "metrics", where);
  if (!map) return std::nullopt;
  if (!map->IsMap())
    where.fail("expected a map like {listen: 127.0.0.1:9464}, got " + kind_of(*map));
  check_keys(*map, where, kMetricsKeys);
  MetricsConfig metrics;
  metrics.listen =
      require_string(*map, "listen", where, " (expected HOST:PORT, such as 127.0.0.1:9464)");
  config::TcpAddress address = config::parse_listen_address(metrics.listen);
  check(address.problem, where.key("listen"));
  metrics.host = std::move(address.host);
  metrics.port = address.port;
  return metrics;
}

// ------------------------------------------------------------------ curve --

// CurveZMQ is on when any node has a public key or `curve` is set; then every
// node needs its own key, and this node its secret key file, which must hold
// the secret key of its public key.
std::optional<CurveConfig> read_curve(const YAML::Node& root, const Where& top,
                                      const RingConfig& ring, SecretKey secret) {
  const Where where = top.key("curve");
  const auto map = value_of(root, "curve", where);
  std::optional<std::string> shared_file;
  if (map) {
    if (!map->IsMap())
      where.fail("expected a map like {secret_key_file: /etc/zring/keys/NODE.key}, got " +
                 kind_of(*map));
    check_keys(*map, where, kCurveKeys);
    shared_file = read_string(*map, "secret_key_file", where);
    if (shared_file) check_key_path(*shared_file, where.key("secret_key_file"));
  }
  const auto& nodes = ring.nodes;
  const auto keyed = std::find_if(nodes.begin(), nodes.end(),
                                  [](const NodeConfig& n) { return !n.public_key.empty(); });
  const auto filed = std::find_if(nodes.begin(), nodes.end(),
                                  [](const NodeConfig& n) { return !n.secret_key_file.empty(); });
  if (!map && keyed == nodes.end() && filed == nodes.end()) return std::nullopt;
  std::string why = "curve is set";
  if (keyed != nodes.end())
    why = "nodes[" + std::to_string(keyed - nodes.begin()) + "] has one";
  else if (filed != nodes.end())
    why = "nodes[" + std::to_string(filed - nodes.begin()) + "].secret_key_file is set";
  std::map<std::string, std::size_t, std::less<>> owner;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const Where at = top.key("nodes").index(i).key("public_key");
    if (nodes[i].public_key.empty())
      at.fail(
          "missing; " + why +
          ", so the ring uses CurveZMQ and every node needs its public key "
          "(zringctl keygen makes a key pair; remove every key and curve to run without CurveZMQ)");
    if (const auto [other, inserted] = owner.emplace(nodes[i].public_key, i); !inserted)
      at.fail("the same key as nodes[" + std::to_string(other->second) +
              "].public_key; every node needs its own key pair (zringctl keygen)");
  }
  const NodeConfig& self = ring.self_node();
  const Where file_key = self.secret_key_file.empty()
                             ? where.key("secret_key_file")
                             : top.key("nodes").index(ring.self_index).key("secret_key_file");
  CurveConfig curve;
  curve.secret_key_file =
      self.secret_key_file.empty() ? shared_file.value_or("") : self.secret_key_file;
  if (curve.secret_key_file.empty())
    file_key.fail("missing; the ring uses CurveZMQ, so node " + quote(self.name) +
                  " needs its secret key file (set curve.secret_key_file, or nodes[" +
                  std::to_string(ring.self_index) + "].secret_key_file)");
  if (secret == SecretKey::skip) return curve;
  const config::SecretKeyFile file = config::read_secret_key_file(curve.secret_key_file);
  check(file.problem, file_key);
  const std::string public_key = config::public_key_of(file.secret_key);
  if (public_key != self.public_key)
    file_key.fail(quote(curve.secret_key_file) + " holds the secret key of public key " +
                  quote(public_key) + ", not of node " + quote(self.name) + "'s public_key " +
                  quote(self.public_key) + " (nodes[" + std::to_string(ring.self_index) +
                  "]): a key file of another node?");
  curve.secret_key = file.secret_key;
  return curve;
}

// `tcp_data: true | false`: ring messages between two nodes over a plain TCP
// connection of their own; on unless CurveZMQ is, which only ZeroMQ carries.
bool read_tcp_data(const YAML::Node& root, const Where& top, const RingConfig& ring) {
  const Where where = top.key("tcp_data");
  const auto value = value_of(root, "tcp_data", where);
  if (!value) return !ring.curve;
  if (!value->IsScalar()) where.fail("expected true or false, got " + kind_of(*value));
  const std::string& text = value->Scalar();
  if (value->Tag() == "!" || (text != "true" && text != "false"))
    where.fail(quote(text) + " is not true or false");
  if (text == "true" && ring.curve)
    where.fail(
        "true would send ring messages unencrypted beside CurveZMQ; with curve keys it must be "
        "false or left out");
  return text == "true";
}

// `tcp_congestion: <name> | system`: the congestion control of the TCP
// connections a node sends its ring messages on (tcp_data). Whether the
// kernel has it is known only when zringd asks for it, at start.
std::string read_tcp_congestion(const YAML::Node& root, const Where& top) {
  const Where where = top.key("tcp_congestion");
  std::optional<std::string> name = read_string(root, "tcp_congestion", top);
  if (!name) return RingConfig{}.tcp_congestion;
  // The kernel's names: at most 15 characters (TCP_CA_NAME_MAX less its NUL).
  const bool plain = std::all_of(name->begin(), name->end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
  if (name->empty() || name->size() > 15 || !plain)
    where.fail(quote(*name) +
               " is not a congestion control's name (1-15 of a-z, 0-9, '_' and '-', e.g. cubic, "
               "bbr, reno) nor system");
  return *std::move(name);
}

RingConfig build_config(const YAML::Node& root, const Where& top,
                        const std::optional<std::string>& node, SecretKey secret) {
  check_keys(root, top, kTopKeys);
  RingConfig ring;
  ring.source = std::string(top.source);
  ring.nodes = read_nodes(root, top);
  const std::optional<std::string> shared_ipc = read_string(root, "ipc", top);
  if (shared_ipc) check(config::check_ipc_endpoint(*shared_ipc), top.key("ipc"));
  check_ipc_endpoints(ring.nodes, shared_ipc, top);
  ring.self_index = resolve_self(root, ring.nodes, node, top);
  ring.self = ring.nodes[ring.self_index].name;
  // check_ipc_endpoints made sure that a node without its own ipc has the shared one.
  const std::string& own_ipc = ring.nodes[ring.self_index].ipc;
  ring.ipc = own_ipc.empty() ? *shared_ipc : own_ipc;
  read_settings(root, top, ring);
  ring.metrics = read_metrics(root, top);
  ring.curve = read_curve(root, top, ring, secret);
  ring.tcp_data = read_tcp_data(root, top, ring);
  ring.tcp_congestion = read_tcp_congestion(root, top);
  return ring;
}

}  // namespace

RingConfig parse_config(std::string_view yaml_text, std::string_view source,
                        const std::optional<std::string>& node, SecretKey secret) {
  const std::string name = source.empty() ? std::string("<config>") : std::string(source);
  const Where top{name, ""};
  try {
    return build_config(config::load_document(yaml_text, top, kTopKeys), top, node, secret);
  } catch (const YAML::Exception& e) {
    // The checks above look at node types before reading, so this is a
    // safety net: any yaml-cpp failure is still a config error, not a crash.
    throw Error(ErrorCode::config_invalid, name + ": " + e.msg);
  }
}

RingConfig load_config(const std::string& path, const std::optional<std::string>& node,
                       SecretKey secret) {
  return parse_config(config::read_text_file(path), path, node, secret);
}

}  // namespace zring
