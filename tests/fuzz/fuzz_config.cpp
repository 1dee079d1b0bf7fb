// fuzz_config.cpp - libFuzzer target for the YAML ring configuration loader,
// zring::parse_config (lib/config/config.cpp).
//
// The input is the YAML text; when it holds a NUL byte, the text ends there
// and what follows is a node override (zringd --node). parse_config must
// either throw zring::Error(config_invalid) or return a RingConfig that keeps
// every rule of docs/configuration.md. An accepted file is then parsed again
// with each of its node names as the override: that must select that node
// and change nothing else.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <zring/config.hpp>

#include "fuzz_check.hpp"

namespace {

namespace fuzz = zring::fuzz;
using zring::ErrorCode;
using zring::RingConfig;

constexpr std::string_view kSource = "fuzz.yaml";

// parse_config, or nothing when it threw zring::Error, which must be a
// config_invalid one. Any other exception is a bug.
std::optional<RingConfig> parse(std::string_view text, const std::optional<std::string>& node) {
  std::optional<RingConfig> config;
  ErrorCode code = ErrorCode::config_invalid;
  const bool ok = fuzz::accepted([&] {
    try {
      config = zring::parse_config(text, kSource, node);
    } catch (const zring::Error& e) {
      code = e.code();
      throw;
    }
  });
  if (!ok && code != ErrorCode::config_invalid) {
    std::fprintf(stderr, "fuzz: parse_config threw %s, not config_invalid\n",
                 zring::to_string(code));
    std::abort();
  }
  return config;
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

bool is_ipc_endpoint(const std::string& e) {
  return e.rfind("ipc:///", 0) == 0 && e.size() < 6 + 100 && e.back() != '/';
}

void check_valid(const RingConfig& c) {
  ZRING_FUZZ_CHECK(c.source == kSource);
  ZRING_FUZZ_CHECK(!c.nodes.empty());
  ZRING_FUZZ_CHECK(c.self_index < c.nodes.size());
  ZRING_FUZZ_CHECK(c.self == c.nodes[c.self_index].name);
  std::set<std::string> names;
  for (const zring::NodeConfig& node : c.nodes) {
    ZRING_FUZZ_CHECK(!node.name.empty() && node.name.size() <= 64);
    ZRING_FUZZ_CHECK(std::all_of(node.name.begin(), node.name.end(), is_name_char));
    ZRING_FUZZ_CHECK(names.insert(node.name).second);
    ZRING_FUZZ_CHECK(node.address.rfind("tcp://", 0) == 0);
    ZRING_FUZZ_CHECK(!node.host.empty() && node.port >= 1);
    ZRING_FUZZ_CHECK(node.ipc.empty() || is_ipc_endpoint(node.ipc));
  }
  const std::string& own = c.nodes[c.self_index].ipc;
  ZRING_FUZZ_CHECK(is_ipc_endpoint(c.ipc) && (own.empty() || c.ipc == own));
  ZRING_FUZZ_CHECK(c.local_ranks >= 1 && c.local_ranks <= 1024);
  ZRING_FUZZ_CHECK(c.timeout.count() >= 100 && c.timeout.count() <= 3'600'000);
  ZRING_FUZZ_CHECK(c.heartbeat.count() >= 10 && 2 * c.heartbeat < c.timeout);
  ZRING_FUZZ_CHECK(c.chunk_bytes >= (64u << 10) && c.chunk_bytes <= (64u << 20));
  ZRING_FUZZ_CHECK(c.chunk_bytes % 4 == 0);
  ZRING_FUZZ_CHECK(c.max_message_bytes >= c.chunk_bytes + (64u << 10));
  ZRING_FUZZ_CHECK(c.max_message_bytes <= (std::uint64_t{4} << 30));
  ZRING_FUZZ_CHECK(c.log_level == "error" || c.log_level == "warn" || c.log_level == "info" ||
                   c.log_level == "debug");
}

// Everything but the choice of self (and the ipc endpoint that follows it).
bool same_ring(const RingConfig& a, const RingConfig& b) {
  if (a.nodes.size() != b.nodes.size()) return false;
  for (std::size_t i = 0; i < a.nodes.size(); ++i) {
    const zring::NodeConfig& x = a.nodes[i];
    const zring::NodeConfig& y = b.nodes[i];
    if (x.name != y.name || x.address != y.address || x.host != y.host || x.port != y.port ||
        x.ipc != y.ipc)
      return false;
  }
  return a.local_ranks == b.local_ranks && a.timeout == b.timeout && a.heartbeat == b.heartbeat &&
         a.chunk_bytes == b.chunk_bytes && a.max_message_bytes == b.max_message_bytes &&
         a.log_level == b.log_level;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = input.find('\0');
  const std::string_view text = input.substr(0, nul);
  std::optional<std::string> override_node;
  if (nul != std::string_view::npos) override_node = std::string(input.substr(nul + 1));

  const std::optional<RingConfig> config = parse(text, std::nullopt);
  if (config) check_valid(*config);
  if (override_node) {
    if (const auto overridden = parse(text, override_node)) {
      check_valid(*overridden);
      ZRING_FUZZ_CHECK(overridden->self == *override_node);
      ZRING_FUZZ_CHECK(!config || same_ring(*config, *overridden));
    }
  }
  if (!config) return 0;
  // Each node of an accepted file can be selected with --node, and only
  // with its exact name.
  for (std::size_t i = 0; i < config->nodes.size() && i < 4; ++i) {
    const auto chosen = parse(text, config->nodes[i].name);
    ZRING_FUZZ_CHECK(chosen && chosen->self_index == i && same_ring(*config, *chosen));
    check_valid(*chosen);
  }
  ZRING_FUZZ_CHECK(!parse(text, config->self + "\n"));
  return 0;
}
