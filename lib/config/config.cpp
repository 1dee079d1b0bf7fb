// lib/config/config.cpp - the one place in zring that reads YAML: the ring file
// becomes a validated RingConfig, or a config_invalid Error of the form
// "<source>: <key path>: <problem>".
//
// Every check exists so that a mistake in the file stops zringd at start-up with
// a message naming the file, the key and the fix, rather than a ring that forms
// wrongly or hangs later. docs/configuration.md lists every key and limit.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>
#include <zring/config.hpp>
#include <zring/error.hpp>

#include "config/endpoint.hpp"
#include "config/keys.hpp"

namespace zring {
namespace {

constexpr std::uint64_t KiB = 1024;
constexpr std::uint64_t MiB = 1024 * KiB;
constexpr std::uint64_t GiB = 1024 * MiB;

// Inclusive bounds of an integer key; `bytes` adds a KiB/MiB/GiB reading to messages.
struct Range {
  std::uint64_t min;
  std::uint64_t max;
  bool bytes = false;
};

constexpr Range kLocalRanks{1, 1024};
constexpr Range kTimeoutMs{100, 3'600'000};
// Below 10 ms heartbeats would only add load; the upper bound that matters,
// half of timeout_ms, is checked once the timeout is known.
constexpr Range kHeartbeatMs{10, 3'600'000};
constexpr Range kChunkBytes{64 * KiB, 64 * MiB, true};
// The lower bound that matters, chunk_bytes + kHeaderRoom, is checked against
// chunk_bytes; 4 GiB keeps every length within msgpack's 32-bit sizes.
constexpr std::uint64_t kHeaderRoom = 64 * KiB;
constexpr Range kMaxMessageBytes{kChunkBytes.min + kHeaderRoom, 4 * GiB, true};
constexpr Range kGatherBytes{0, 64 * MiB, true};
constexpr Range kDirectBytes{0, 1 * GiB, true};

// A ring file is a few kilobytes; anything much larger is the wrong file.
constexpr std::size_t kMaxFileBytes = 1 * MiB;

// The membership protocol names nodes in a bitmap of at most this many (wire::kMaxRingNodes).
constexpr std::size_t kMaxNodes = 4096;

constexpr std::array<std::string_view, 16> kTopKeys{"nodes",
                                                    "self",
                                                    "ipc",
                                                    "local_ranks",
                                                    "min_nodes",
                                                    "timeout_ms",
                                                    "heartbeat_ms",
                                                    "chunk_bytes",
                                                    "gather_bytes",
                                                    "direct_bytes",
                                                    "max_message_bytes",
                                                    "log_level",
                                                    "metrics",
                                                    "curve",
                                                    "tcp_data",
                                                    "tcp_congestion"};
constexpr std::array<std::string_view, 5> kNodeKeys{"name", "address", "ipc", "public_key",
                                                    "secret_key_file"};
constexpr std::array<std::string_view, 1> kMetricsKeys{"listen"};
constexpr std::array<std::string_view, 1> kCurveKeys{"secret_key_file"};
constexpr std::array<std::string_view, 4> kLogLevels{"error", "warn", "info", "debug"};

// ---------------------------------------------------------------- messages --

// The text being read and the key being looked at, so that every check can
// fail with "<source>: <key path>: <problem>".
struct Where {
  std::string_view source;
  std::string path;  // empty at the top level

  [[nodiscard]] Where key(std::string_view name) const {
    return {source, path.empty() ? std::string(name) : path + "." + std::string(name)};
  }
  [[nodiscard]] Where index(std::size_t i) const {
    return {source, path + "[" + std::to_string(i) + "]"};
  }
  [[noreturn]] void fail(const std::string& problem) const {
    const std::string at = path.empty() ? "top level" : path;
    throw Error(ErrorCode::config_invalid, std::string(source) + ": " + at + ": " + problem);
  }
};

using config::quote;

template <typename Strings>
std::string join(const Strings& items) {
  std::string out;
  for (const auto& item : items) {
    out += out.empty() ? "" : ", ";
    out += item;
  }
  return out;
}

// "65536 (64 KiB)" for byte sizes that are a whole number of KiB/MiB/GiB.
std::string show_number(std::uint64_t value, bool bytes) {
  std::string text = std::to_string(value);
  if (!bytes || value == 0) return text;
  for (auto [unit, name] :
       {std::pair{GiB, " GiB"}, std::pair{MiB, " MiB"}, std::pair{KiB, " KiB"}}) {
    if (value % unit == 0) return text + " (" + std::to_string(value / unit) + name + ")";
  }
  return text;
}

std::string kind_of(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return "the value " + quote(node.Scalar());
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      break;
  }
  return "nothing";
}

// Edit distance, for "did you mean" on misspelt keys.
std::size_t distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t replace = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, replace});
    }
  }
  return row[b.size()];
}

std::string suggestion(std::string_view unknown, std::span<const std::string_view> known) {
  for (std::string_view candidate : known) {
    const bool prefix =
        unknown.size() >= 3 && (candidate.starts_with(unknown) || unknown.starts_with(candidate));
    if (prefix || distance(unknown, candidate) <= 2)
      return "; did you mean " + quote(candidate) + "?";
  }
  return "";
}

// ------------------------------------------------------------ YAML access --

// Rejects non-word keys, unknown keys and repeated keys: yaml-cpp keeps both
// copies of a repeated key and lookups see only the first, so a later edit
// would silently not apply.
void check_keys(const YAML::Node& map, const Where& where,
                std::span<const std::string_view> known) {
  std::map<std::string, std::size_t, std::less<>> line_of;
  for (const auto& entry : map) {
    if (!entry.first.IsScalar())
      where.fail("a key must be a plain word, got " + kind_of(entry.first));
    const std::string& name = entry.first.Scalar();
    const Where at = where.key(name);
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      at.fail("unknown key" + suggestion(name, known) + " (known keys: " + join(known) + ")");
    }
    const auto line = static_cast<std::size_t>(entry.first.Mark().line) + 1;
    const auto [first, inserted] = line_of.emplace(name, line);
    if (!inserted) {
      at.fail("duplicate key (lines " + std::to_string(first->second) + " and " +
              std::to_string(line) + ")");
    }
  }
}

// The value of `name` in `map`, or nothing when the key is absent. A key with
// no value is an error: it is usually a half-finished edit.
std::optional<YAML::Node> value_of(const YAML::Node& map, std::string_view name,
                                   const Where& where) {
  const YAML::Node value = map[std::string(name)];
  if (!value.IsDefined()) return std::nullopt;
  if (value.IsNull()) where.fail("has no value (give one, or remove the key to use the default)");
  return value;
}

std::optional<std::string> read_string(const YAML::Node& map, std::string_view name,
                                       const Where& parent) {
  const Where where = parent.key(name);
  const auto value = value_of(map, name, where);
  if (!value) return std::nullopt;
  if (!value->IsScalar()) where.fail("expected a string, got " + kind_of(*value));
  return value->Scalar();
}

std::string require_string(const YAML::Node& map, std::string_view name, const Where& parent,
                           std::string_view hint) {
  auto value = read_string(map, name, parent);
  if (!value) parent.key(name).fail("missing" + std::string(hint));
  return *std::move(value);
}

std::uint64_t to_integer(const YAML::Node& value, const Where& where, Range range) {
  if (!value.IsScalar()) where.fail("expected an integer, got " + kind_of(value));
  const std::string& text = value.Scalar();
  // yaml-cpp tags quoted scalars "!": "10" is a string in YAML, and a typed
  // config should not guess.
  if (value.Tag() == "!")
    where.fail(quote(text) + " is quoted, so it is a string, not an integer (remove the quotes)");
  const bool negative = text.starts_with('-');
  const std::string_view digits = std::string_view(text).substr(negative ? 1 : 0);
  if (digits.empty() ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    where.fail(quote(text) + " is not an integer");
  }
  if (digits.size() > 1 && digits[0] == '0') {
    where.fail(quote(text) +
               " has a leading zero, which YAML 1.1 tools read as octal (write it without)");
  }
  if (negative) where.fail(text + " is below " + show_number(range.min, range.bytes));
  std::uint64_t number = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), number);
  if (error == std::errc::result_out_of_range || number > range.max) {
    where.fail(text + " is above " + show_number(range.max, range.bytes));
  }
  if (number < range.min) where.fail(text + " is below " + show_number(range.min, range.bytes));
  return number;
}

std::optional<std::uint64_t> read_integer(const YAML::Node& map, std::string_view name,
                                          const Where& parent, Range range) {
  const Where where = parent.key(name);
  const auto value = value_of(map, name, where);
  if (!value) return std::nullopt;
  return to_integer(*value, where, range);
}

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

// -------------------------------------------------------------- documents --

std::string position(const YAML::Mark& mark) {
  return "line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1);
}

// yaml-cpp's message for a tab in indentation ("illegal block entry", ...)
// does not say what is wrong; tabs are a common slip in hand-edited files.
std::string tab_hint(std::string_view text, const YAML::Mark& mark) {
  if (mark.is_null()) return "";
  std::size_t start = 0;
  for (int i = 0; i < mark.line && start != std::string_view::npos; ++i) {
    start = text.find('\n', start);
    if (start != std::string_view::npos) ++start;
  }
  if (start == std::string_view::npos) return "";
  const std::string_view line = text.substr(start);
  const std::string_view indent = line.substr(0, line.find_first_not_of(" \t"));
  return indent.find('\t') == std::string_view::npos
             ? ""
             : " (this line is indented with a tab; YAML needs spaces)";
}

// Counts the documents of a YAML stream, stopping at the second, and notes
// where that one's content starts. The text is not read with YAML::LoadAll:
// yaml-cpp 0.7 (Debian 12) never returns from it on some malformed streams,
// a lone "," for one (yaml-cpp issue #1040), and allocates an empty document
// per round until memory runs out.
class DocumentCounter final : public YAML::EventHandler {
 public:
  [[nodiscard]] std::size_t documents() const { return documents_; }
  [[nodiscard]] const YAML::Mark& second() const { return second_; }

  void OnDocumentStart(const YAML::Mark&) override { ++documents_; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { node_at(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { node_at(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    node_at(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    node_at(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    node_at(mark);
  }
  void OnMapEnd() override {}

 private:
  void node_at(const YAML::Mark& mark) {
    if (documents_ == 2 && !seen_second_) {
      second_ = mark;
      seen_second_ = true;
    }
  }

  std::size_t documents_ = 0;
  YAML::Mark second_ = YAML::Mark::null_mark();
  bool seen_second_ = false;
};

// The one YAML document of the text, which must be a map.
YAML::Node load_document(std::string_view text, const Where& top) {
  const std::string copy(text);
  DocumentCounter counter;
  YAML::Node document;
  try {
    std::istringstream stream(copy);
    YAML::Parser parser(stream);
    while (counter.documents() < 2 && parser.HandleNextDocument(counter)) {
    }
    document = YAML::Load(copy);
  } catch (const YAML::Exception& e) {
    const std::string at = e.mark.is_null() ? "" : position(e.mark) + ": ";
    throw Error(ErrorCode::config_invalid,
                std::string(top.source) + ": " + at + e.msg + tab_hint(text, e.mark));
  }
  if (document.IsNull()) {
    top.fail(
        "the configuration is empty; it needs at least nodes and ipc (see configs/ for examples)");
  }
  if (counter.documents() > 1) {
    throw Error(ErrorCode::config_invalid,
                std::string(top.source) + ": " + position(counter.second()) +
                    ": a second YAML document; a ring configuration is one document");
  }
  if (!document.IsMap()) {
    top.fail("expected a map of keys (" + join(kTopKeys) + "), got " + kind_of(document));
  }
  return document;
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

// ------------------------------------------------------------------ files --

[[noreturn]] void fail_file(const std::string& path, const std::string& problem) {
  throw Error(ErrorCode::config_invalid, path + ": " + problem);
}

// Closes a file descriptor on every path out of read_text_file.
struct FileDescriptor {
  int fd;
  explicit FileDescriptor(int descriptor) : fd(descriptor) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() { ::close(fd); }
};

std::string read_text_file(const std::string& path) {
  const auto why = [](int error) { return std::system_category().message(error); };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_file(path, "cannot open the configuration file: " + why(errno));
  const FileDescriptor file(fd);
  struct stat info {};
  if (::fstat(file.fd, &info) == 0 && S_ISDIR(info.st_mode)) {
    fail_file(path, "cannot read the configuration file: " + why(EISDIR));
  }
  std::string text;
  std::array<char, 4096> buffer{};
  for (;;) {
    const ssize_t got = ::read(file.fd, buffer.data(), buffer.size());
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail_file(path, "cannot read the configuration file: " + why(errno));
    if (got == 0) return text;
    text.append(buffer.data(), static_cast<std::size_t>(got));
    if (text.size() > kMaxFileBytes) {
      fail_file(path,
                "is larger than 1 MiB; a ring configuration is a few kilobytes (is this the right "
                "file?)");
    }
  }
}

}  // namespace

RingConfig parse_config(std::string_view yaml_text, std::string_view source,
                        const std::optional<std::string>& node, SecretKey secret) {
  const std::string name = source.empty() ? std::string("<config>") : std::string(source);
  const Where top{name, ""};
  try {
    return build_config(load_document(yaml_text, top), top, node, secret);
  } catch (const YAML::Exception& e) {
    // The checks above look at node types before reading, so this is a
    // safety net: any yaml-cpp failure is still a config error, not a crash.
    throw Error(ErrorCode::config_invalid, name + ": " + e.msg);
  }
}

RingConfig load_config(const std::string& path, const std::optional<std::string>& node,
                       SecretKey secret) {
  return parse_config(read_text_file(path), path, node, secret);
}

}  // namespace zring
