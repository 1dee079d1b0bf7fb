// tests/config/test_config.cpp - the ring configuration: the shipped examples
// load, defaults apply, and every invalid file fails with config_invalid and a
// message naming the source, the key and the problem.
#define BOOST_TEST_MODULE zring config
#include <unistd.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>
#include <zring/config.hpp>
#include <zring/error.hpp>

namespace fs = std::filesystem;
using zring::parse_config;
using zring::RingConfig;

namespace {

// A valid ring: two nodes on two hosts sharing one ipc path. Tests append
// top-level keys to it; it sets none of the optional ones.
const std::string kRing =
    "nodes:\n"
    "  - {name: a, address: tcp://10.0.0.1:7101}\n"
    "  - {name: b, address: tcp://10.0.0.2:7101}\n"
    "self: a\n"
    "ipc: ipc:///run/zring/zringd.sock\n";

// A ring whose node list is `nodes` (YAML list items), self a.
std::string ring_of(const std::string& nodes) {
  return "nodes:\n" + nodes + "self: a\nipc: ipc:///run/zring/zringd.sock\n";
}

// A two-node ring whose second node has the given address.
std::string ring_with_address(const std::string& address) {
  return ring_of(
      "  - {name: a, address: tcp://10.0.0.1:7101}\n"
      "  - {name: b, address: \"" +
      address + "\"}\n");
}

boost::test_tools::predicate_result contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return true;
  boost::test_tools::predicate_result result(false);
  result.message() << "[" << part << "] not in [" << text << "]";
  return result;
}

boost::test_tools::predicate_result starts_with(const std::string& text,
                                                const std::string& prefix) {
  if (text.rfind(prefix, 0) == 0) return true;
  boost::test_tools::predicate_result result(false);
  result.message() << "[" << text << "] does not start with [" << prefix << "]";
  return result;
}

// The message of the config_invalid error parsing `yaml` must throw.
std::string error_of(const std::string& yaml,
                     const std::optional<std::string>& node = std::nullopt) {
  try {
    parse_config(yaml, "ring.yaml", node);
  } catch (const zring::Error& e) {
    BOOST_TEST(zring::to_string(e.code()) == std::string("config_invalid"));
    return e.what();
  }
  BOOST_FAIL("no error for:\n" + yaml);
  return "";
}

std::string load_error(const std::string& path) {
  try {
    zring::load_config(path);
  } catch (const zring::Error& e) {
    BOOST_TEST(zring::to_string(e.code()) == std::string("config_invalid"));
    return e.what();
  }
  BOOST_FAIL("no error loading " + path);
  return "";
}

// A scratch directory for files the tests write, removed afterwards.
struct TempDir {
  fs::path path = fs::temp_directory_path() / ("zring-test-config-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
  [[nodiscard]] std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name, std::ios::binary) << text;
    return (path / name).string();
  }
};

}  // namespace

// ------------------------------------------------------------------ examples --

BOOST_AUTO_TEST_SUITE(examples)

struct Example {
  std::vector<std::string> nodes;   // in ring order
  std::optional<std::string> self;  // as set in the file
};

// Every file under configs/ must be listed here, so a new example cannot slip
// past the test.
const std::map<std::string, Example> kExamples{
    {"zring.yaml", {{"local"}, "local"}},
    {"local-3.yaml", {{"a", "b", "c"}, std::nullopt}},
    {"local-4.yaml", {{"a", "b", "c", "d"}, std::nullopt}},
    {"two-host.yaml", {{"gpu-1", "gpu-2"}, "gpu-1"}},
    {"two-host-curve.yaml", {{"gpu-1", "gpu-2"}, "gpu-1"}},
};

const fs::path kConfigs = fs::path(ZRING_SOURCE_DIR) / "configs";

BOOST_AUTO_TEST_CASE(every_example_is_known) {
  std::size_t found = 0;
  for (const auto& entry : fs::directory_iterator(kConfigs)) {
    if (entry.path().extension() != ".yaml") continue;
    ++found;
    BOOST_TEST(kExamples.count(entry.path().filename().string()) == 1u,
               entry.path() << " is not in kExamples; add it there");
  }
  BOOST_TEST(found == kExamples.size());
}

BOOST_AUTO_TEST_CASE(every_example_parses_with_each_node_as_self) {
  for (const auto& [file, example] : kExamples) {
    BOOST_TEST_CONTEXT(file) {
      const std::string path = (kConfigs / file).string();
      std::set<std::string> ipc_endpoints;
      for (std::size_t i = 0; i < example.nodes.size(); ++i) {
        // The secret key files an example names exist on its nodes, not here.
        const RingConfig config =
            zring::load_config(path, example.nodes[i], zring::SecretKey::skip);
        BOOST_TEST(config.self == example.nodes[i]);
        BOOST_TEST(config.self_index == i);
        BOOST_TEST(config.self_node().name == example.nodes[i]);
        BOOST_TEST(config.nodes.size() == example.nodes.size());
        BOOST_TEST(config.source == path);
        BOOST_TEST(starts_with(config.ipc, "ipc:///"));
        BOOST_TEST(config.world_size() == example.nodes.size() * config.local_ranks);
        for (std::size_t j = 0; j < example.nodes.size(); ++j)
          BOOST_TEST(config.nodes[j].name == example.nodes[j]);
        ipc_endpoints.insert(config.ipc);
      }
      // Nodes sharing a host (all of them, in the local rings) need their own sockets.
      const RingConfig any = zring::load_config(path, example.nodes[0], zring::SecretKey::skip);
      const bool one_host =
          std::all_of(any.nodes.begin(), any.nodes.end(),
                      [&](const zring::NodeConfig& n) { return n.host == any.nodes[0].host; });
      if (one_host) BOOST_TEST(ipc_endpoints.size() == example.nodes.size());
    }
  }
}

BOOST_AUTO_TEST_CASE(examples_without_node_use_their_self_or_ask_for_it) {
  for (const auto& [file, example] : kExamples) {
    BOOST_TEST_CONTEXT(file) {
      const std::string path = (kConfigs / file).string();
      if (example.self) {
        BOOST_TEST(zring::load_config(path, std::nullopt, zring::SecretKey::skip).self ==
                   *example.self);
      } else {
        BOOST_TEST(load_error(path) ==
                   path + ": self: missing (set it in the file or pass --node NAME)");
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(local_3_is_three_loopback_ports) {
  const RingConfig config = zring::load_config((kConfigs / "local-3.yaml").string(), "b");
  BOOST_TEST(config.ipc == "ipc:///tmp/zring-b.sock");
  for (std::size_t i = 0; i < 3; ++i) {
    BOOST_TEST(config.nodes[i].host == "127.0.0.1");
    BOOST_TEST(config.nodes[i].port == 7101 + i);
  }
}

BOOST_AUTO_TEST_CASE(two_host_curve_names_a_key_per_node) {
  const std::string path = (kConfigs / "two-host-curve.yaml").string();
  for (const std::string node : {"gpu-1", "gpu-2"}) {
    const RingConfig config = zring::load_config(path, node, zring::SecretKey::skip);
    BOOST_TEST_REQUIRE(config.curve.has_value());
    BOOST_TEST(config.curve->secret_key_file == "/etc/zring/keys/" + node + ".key");
    BOOST_TEST(config.curve->secret_key.empty());
    BOOST_TEST(config.nodes[0].public_key.size() == 40u);
    BOOST_TEST(config.nodes[1].public_key.size() == 40u);
  }
  // Read for real, the key file must be there.
  BOOST_TEST(
      contains(load_error(path),
               path + ": nodes[0].secret_key_file: '/etc/zring/keys/gpu-1.key': cannot open"));
  BOOST_TEST(!zring::load_config((kConfigs / "two-host.yaml").string()).curve.has_value());
}

BOOST_AUTO_TEST_CASE(default_file_is_a_single_node_ring) {
  const RingConfig config = zring::load_config((kConfigs / "zring.yaml").string());
  BOOST_TEST(config.world_size() == 1u);
  BOOST_TEST(config.ipc == "ipc:///run/zring/zringd.sock");
  BOOST_TEST(config.nodes[0].address == "tcp://127.0.0.1:7101");
  BOOST_TEST(config.direct_bytes == 512u << 10);  // as the file says
}

BOOST_AUTO_TEST_SUITE_END()

// ------------------------------------------------------------------ defaults --

BOOST_AUTO_TEST_SUITE(values)

BOOST_AUTO_TEST_CASE(minimal_ring_gets_the_defaults) {
  const RingConfig config = parse_config(kRing, "ring.yaml");
  BOOST_TEST(config.source == "ring.yaml");
  BOOST_TEST(config.self == "a");
  BOOST_TEST(config.self_index == 0u);
  BOOST_TEST(config.ipc == "ipc:///run/zring/zringd.sock");
  BOOST_TEST(config.local_ranks == 1u);
  BOOST_TEST(config.timeout.count() == 10000);
  BOOST_TEST(config.heartbeat.count() == 500);
  BOOST_TEST(config.busy_poll.count() == 200);
  BOOST_TEST(config.chunk_bytes == 1u << 20);
  BOOST_TEST(config.gather_bytes == 192u << 10);
  BOOST_TEST(config.direct_bytes == 512u << 10);
  BOOST_TEST(config.max_message_bytes == 256u << 20);
  BOOST_TEST(config.log_level == "info");
  BOOST_TEST(config.world_size() == 2u);
  BOOST_TEST(config.min_nodes == 2u);  // a strict majority of 2
}

BOOST_AUTO_TEST_CASE(min_nodes_defaults_to_a_strict_majority) {
  std::string nodes;
  for (std::size_t n = 1; n <= 6; ++n) {
    nodes +=
        "  - {name: n" + std::to_string(n) + ", address: tcp://h" + std::to_string(n) + ":1}\n";
    std::string yaml = "nodes:\n" + nodes + "self: n1\nipc: ipc:///run/zring/zringd.sock\n";
    BOOST_TEST(parse_config(yaml, "r").min_nodes == n / 2 + 1, n << " nodes");
    BOOST_TEST(parse_config(yaml + "min_nodes: 1\n", "r").min_nodes == 1u);
    BOOST_TEST(parse_config(yaml + "min_nodes: " + std::to_string(n) + "\n", "r").min_nodes == n);
    BOOST_TEST(starts_with(
        error_of(yaml + "min_nodes: " + std::to_string(n + 1) + "\n"),
        "ring.yaml: min_nodes: " + std::to_string(n + 1) + " is above " + std::to_string(n)));
  }
}

BOOST_AUTO_TEST_CASE(nodes_keep_ring_order_host_and_port) {
  const RingConfig config = parse_config(kRing, "ring.yaml");
  BOOST_TEST(config.nodes[1].name == "b");
  BOOST_TEST(config.nodes[1].address == "tcp://10.0.0.2:7101");
  BOOST_TEST(config.nodes[1].host == "10.0.0.2");
  BOOST_TEST(config.nodes[1].port == 7101);
  BOOST_TEST(config.nodes[1].ipc.empty());
}

BOOST_AUTO_TEST_CASE(every_setting_is_read) {
  const RingConfig config =
      parse_config(kRing +
                       "local_ranks: 8\ntimeout_ms: 20000\nheartbeat_ms: 250\n"
                       "chunk_bytes: 65536\nmax_message_bytes: 131072\nlog_level: debug\n"
                       "gather_bytes: 0\ndirect_bytes: 4096\nbusy_poll_us: 0\n",
                   "ring.yaml");
  BOOST_TEST(config.local_ranks == 8u);
  BOOST_TEST(config.busy_poll.count() == 0);
  BOOST_TEST(config.timeout.count() == 20000);
  BOOST_TEST(config.heartbeat.count() == 250);
  BOOST_TEST(config.chunk_bytes == 65536u);
  BOOST_TEST(config.max_message_bytes == 131072u);
  BOOST_TEST(config.gather_bytes == 0u);
  BOOST_TEST(config.direct_bytes == 4096u);
  BOOST_TEST(config.log_level == "debug");
  BOOST_TEST(config.world_size() == 16u);
}

BOOST_AUTO_TEST_CASE(heartbeat_defaults_to_min_of_500_and_a_quarter_timeout) {
  const std::map<int, int> heartbeat_for_timeout{
      {100, 25}, {1000, 250}, {2000, 500}, {3600000, 500}};
  for (const auto& [timeout, heartbeat] : heartbeat_for_timeout) {
    const auto config =
        parse_config(kRing + "timeout_ms: " + std::to_string(timeout) + "\n", "ring.yaml");
    BOOST_TEST(config.heartbeat.count() == heartbeat, "timeout_ms " << timeout);
  }
}

BOOST_AUTO_TEST_CASE(world_size_is_nodes_times_local_ranks) {
  const std::string three = ring_of(
      "  - {name: a, address: tcp://h1:1}\n"
      "  - {name: b, address: tcp://h2:1}\n"
      "  - {name: c, address: tcp://h3:1}\n");
  BOOST_TEST(parse_config(three + "local_ranks: 4\n", "r").world_size() == 12u);
  BOOST_TEST(parse_config(ring_of("  - {name: a, address: tcp://h1:1}\n"), "r").world_size() == 1u);
}

BOOST_AUTO_TEST_CASE(bounds_are_inclusive) {
  for (const std::string extra :
       {"local_ranks: 1024\n", "timeout_ms: 100\n", "timeout_ms: 3600000\n", "chunk_bytes: 65536\n",
        "chunk_bytes: 67108864\n", "heartbeat_ms: 10\n", "heartbeat_ms: 4999\n",
        "max_message_bytes: 1114112\n", "max_message_bytes: 4294967296\n", "gather_bytes: 0\n",
        "gather_bytes: 67108864\n", "direct_bytes: 0\n", "direct_bytes: 1073741824\n",
        "busy_poll_us: 0\n", "busy_poll_us: 10000\n"}) {
    BOOST_CHECK_NO_THROW(parse_config(kRing + extra, "ring.yaml"));
  }
}

// The ring's TCP connections: cubic unless the file names another
// congestion control, or system for the kernel's default; whether the
// kernel has it is asked at start (test_tcp_data).
BOOST_AUTO_TEST_CASE(tcp_congestion_is_cubic_unless_the_file_names_one) {
  BOOST_TEST(parse_config(kRing, "r").tcp_congestion == "cubic");
  for (const std::string name : {"bbr", "reno", "system", "dctcp", "h-tcp_2"})
    BOOST_TEST(parse_config(kRing + "tcp_congestion: " + name + "\n", "r").tcp_congestion == name);
  const std::string why =
      " is not a congestion control's name (1-15 of a-z, 0-9, '_' and '-', e.g. cubic, bbr, "
      "reno) nor system";
  BOOST_TEST(error_of(kRing + "tcp_congestion: Cubic\n") ==
             "ring.yaml: tcp_congestion: 'Cubic'" + why);
  BOOST_TEST(error_of(kRing + "tcp_congestion: ''\n") == "ring.yaml: tcp_congestion: ''" + why);
  BOOST_TEST(error_of(kRing + "tcp_congestion: abcdefghijklmnop\n") ==
             "ring.yaml: tcp_congestion: 'abcdefghijklmnop'" + why);
  BOOST_TEST(starts_with(error_of(kRing + "tcp_congestion: [cubic]\n"),
                         "ring.yaml: tcp_congestion: expected a string, got a list"));
}

BOOST_AUTO_TEST_CASE(every_log_level_is_accepted) {
  for (const std::string level : {"error", "warn", "info", "debug"}) {
    BOOST_TEST(parse_config(kRing + "log_level: " + level + "\n", "r").log_level == level);
  }
}

BOOST_AUTO_TEST_SUITE_END()

// ---------------------------------------------------------------------- self --

BOOST_AUTO_TEST_SUITE(self)

BOOST_AUTO_TEST_CASE(node_argument_overrides_the_file) {
  const RingConfig config = parse_config(kRing, "ring.yaml", "b");
  BOOST_TEST(config.self == "b");
  BOOST_TEST(config.self_index == 1u);
  BOOST_TEST(config.self_node().address == "tcp://10.0.0.2:7101");
}

BOOST_AUTO_TEST_CASE(node_argument_replaces_a_wrong_self_in_the_file) {
  const std::string yaml =
      ring_of("  - {name: a, address: tcp://h1:1}\n  - {name: b, address: tcp://h2:1}\n");
  std::string wrong = yaml;
  wrong.replace(wrong.find("self: a"), 7, "self: zz");
  BOOST_TEST(parse_config(wrong, "r", "b").self == "b");
}

BOOST_AUTO_TEST_CASE(unknown_node_argument) {
  BOOST_TEST(error_of(kRing, "x") ==
             "ring.yaml: self: 'x' (from --node) is not one of the nodes (a, b)");
}

BOOST_AUTO_TEST_CASE(self_not_in_nodes) {
  const std::string yaml =
      "nodes:\n"
      "  - {name: a, address: tcp://h1:1}\n"
      "  - {name: b, address: tcp://h2:1}\n"
      "  - {name: c, address: tcp://h3:1}\n"
      "self: x\nipc: ipc:///s\n";
  BOOST_TEST(error_of(yaml) == "ring.yaml: self: 'x' is not one of the nodes (a, b, c)");
}

BOOST_AUTO_TEST_CASE(self_missing) {
  const std::string yaml = "nodes:\n  - {name: a, address: tcp://h1:1}\nipc: ipc:///s\n";
  BOOST_TEST(error_of(yaml) == "ring.yaml: self: missing (set it in the file or pass --node NAME)");
  BOOST_TEST(parse_config(yaml, "r", "a").self == "a");
}

BOOST_AUTO_TEST_CASE(self_of_the_wrong_type) {
  const std::string yaml = "nodes:\n  - {name: a, address: tcp://h1:1}\nipc: ipc:///s\nself: [a]\n";
  BOOST_TEST(error_of(yaml) == "ring.yaml: self: expected a string, got a list");
}

BOOST_AUTO_TEST_SUITE_END()

// --------------------------------------------------------------------- nodes --

BOOST_AUTO_TEST_SUITE(nodes)

BOOST_AUTO_TEST_CASE(duplicate_name) {
  const std::string yaml =
      ring_of("  - {name: b, address: tcp://h1:1}\n  - {name: b, address: tcp://h2:1}\n");
  BOOST_TEST(error_of(yaml, "b") == "ring.yaml: nodes[1].name: duplicate name 'b' (also nodes[0])");
}

BOOST_AUTO_TEST_CASE(duplicate_address_in_any_spelling) {
  const std::vector<std::pair<std::string, std::string>> same{
      {"tcp://10.0.0.1:7101", "tcp://10.0.0.1:7101"},
      {"tcp://node1:7101", "tcp://NODE1:7101"},
      {"tcp://[::1]:7101", "tcp://[0:0::1]:7101"},
  };
  for (const auto& [first, second] : same) {
    const std::string yaml = ring_of("  - {name: a, address: \"" + first +
                                     "\", ipc: ipc:///a}\n"
                                     "  - {name: b, address: \"" +
                                     second + "\", ipc: ipc:///b}\n");
    const std::string message = error_of(yaml);
    BOOST_TEST(starts_with(message, "ring.yaml: nodes[1].address: '" + second + "'"));
    BOOST_TEST(contains(message, "is the same endpoint as nodes[0].address '" + first + "'"));
  }
}

BOOST_AUTO_TEST_CASE(same_host_different_ports_is_fine) {
  const std::string yaml = ring_of(
      "  - {name: a, address: tcp://h1:7101, ipc: ipc:///a}\n"
      "  - {name: b, address: tcp://h1:7102, ipc: ipc:///b}\n");
  BOOST_TEST(parse_config(yaml, "r").nodes[1].port == 7102);
}

BOOST_AUTO_TEST_CASE(bad_names) {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"a b", "'a b' contains a character other than A-Z a-z 0-9 _ . - (at position 2)"},
      {"n\xC3\xA9", "contains a character other than"},
      {"a/b", "(at position 2)"},
      {"", "is empty"},
      {std::string(65, 'x'), "is 65 characters, more than 64"},
  };
  for (const auto& [name, problem] : cases) {
    const std::string message =
        error_of(ring_of("  - {name: \"" + name + "\", address: tcp://h1:1}\n"), name);
    BOOST_TEST(starts_with(message, "ring.yaml: nodes[0].name: "));
    BOOST_TEST(contains(message, problem));
  }
}

BOOST_AUTO_TEST_CASE(good_names) {
  for (const std::string& name :
       {std::string(64, 'x'), std::string("Node_1.rack-2"), std::string("7")}) {
    BOOST_TEST(
        parse_config(ring_of("  - {name: \"" + name + "\", address: tcp://h1:1}\n"), "r", name)
            .self == name);
  }
}

BOOST_AUTO_TEST_CASE(missing_fields) {
  BOOST_TEST(error_of(ring_of("  - {address: tcp://h1:1}\n")) ==
             "ring.yaml: nodes[0].name: missing (every node needs a name)");
  BOOST_TEST(error_of(ring_of("  - {name: a}\n")) ==
             "ring.yaml: nodes[0].address: missing (expected tcp://HOST:PORT)");
  BOOST_TEST(
      contains(error_of(ring_of("  - {name: a, address: }\n")), "nodes[0].address: has no value"));
}

BOOST_AUTO_TEST_CASE(wrong_shapes) {
  BOOST_TEST(contains(error_of("nodes: [a, b]\nself: a\nipc: ipc:///s\n"),
                      "ring.yaml: nodes[0]: expected a map like {name: a, address: "
                      "tcp://HOST:PORT}, got the value 'a'"));
  BOOST_TEST(contains(error_of("nodes: {a: tcp://h:1}\nself: a\nipc: ipc:///s\n"),
                      "ring.yaml: nodes: expected a list of {name, address} maps, got a map"));
  BOOST_TEST(error_of("nodes: []\nself: a\nipc: ipc:///s\n") ==
             "ring.yaml: nodes: is empty; list at least one node");
  BOOST_TEST(contains(error_of("self: a\nipc: ipc:///s\n"), "ring.yaml: nodes: missing"));
  BOOST_TEST(contains(error_of(ring_of("  - {name: [a], address: tcp://h1:1}\n")),
                      "ring.yaml: nodes[0].name: expected a string, got a list"));
}

BOOST_AUTO_TEST_CASE(unknown_node_key) {
  const std::string message = error_of(ring_of("  - {name: a, adress: tcp://h1:1}\n"));
  BOOST_TEST(
      starts_with(message, "ring.yaml: nodes[0].adress: unknown key; did you mean 'address'?"));
  BOOST_TEST(contains(message, "(known keys: name, address, ipc, public_key, secret_key_file)"));
}

BOOST_AUTO_TEST_SUITE_END()

// ----------------------------------------------------------------- addresses --

BOOST_AUTO_TEST_SUITE(addresses)

BOOST_AUTO_TEST_CASE(address_without_port) {
  const std::string yaml = ring_of(
      "  - {name: a, address: tcp://10.0.0.1:7101}\n"
      "  - {name: b, address: tcp://10.0.0.2:7101}\n"
      "  - {name: c, address: tcp://10.0.0.3}\n");
  BOOST_TEST(
      error_of(yaml) ==
      "ring.yaml: nodes[2].address: 'tcp://10.0.0.3' has no port (expected tcp://HOST:PORT)");
}

BOOST_AUTO_TEST_CASE(bad_addresses) {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"tcp://10.0.0.3:", "has no port"},
      {"tcp://[::1]", "has no port"},
      {"udp://10.0.0.3:7101", "does not start with tcp://"},
      {"10.0.0.3:7101", "does not start with tcp://"},
      {"tcp://*:7101", "wildcard"},
      {"tcp://0.0.0.0:7101", "wildcard"},
      {"tcp://[::]:7101", "wildcard"},
      {"tcp://:7101", "has no host"},
      {"tcp://[]:7101", "has no host"},
      {"tcp://h:0", "has port 0, outside 1..65535"},
      {"tcp://h:65536", "has port 65536, outside 1..65535"},
      {"tcp://h:99999999999999999999", "outside 1..65535"},
      {"tcp://h:http", "has port 'http', which is not a number"},
      {"tcp://h:-1", "has port '-1', which is not a number"},
      {"tcp://h:7101/x", "which is not a number"},
      {"tcp://10.0.0.300:7101", "has an invalid IPv4 address '10.0.0.300'"},
      {"tcp://10.0.0:7101", "has an invalid IPv4 address"},
      {"tcp://::1:7101", "IPv6 address without brackets"},
      {"tcp://[::1:7101", "without a closing ']'"},
      {"tcp://[::1]7101", "after ']'"},
      {"tcp://[zz::1]:7101", "has an invalid IPv6 address 'zz::1'"},
      {"tcp://[10.0.0.1]:7101", "has an invalid IPv6 address"},
      {"tcp://bad host:7101", "has an invalid host name 'bad host'"},
      {"tcp://-bad:7101", "has an invalid host name"},
      {"tcp://a..b:7101", "has an invalid host name"},
      {"tcp://" + std::string(64, 'x') + ":7101", "has an invalid host name"},
  };
  for (const auto& [address, problem] : cases) {
    BOOST_TEST_CONTEXT(address) {
      const std::string message = error_of(ring_with_address(address));
      BOOST_TEST(starts_with(message, "ring.yaml: nodes[1].address: '" + address + "' "));
      BOOST_TEST(contains(message, problem));
    }
  }
}

BOOST_AUTO_TEST_CASE(ipv6_and_host_names) {
  const std::string yaml = ring_of(
      "  - {name: a, address: \"tcp://[::1]:7101\", ipc: ipc:///a}\n"
      "  - {name: b, address: \"tcp://[fe80::1:2]:65535\"}\n"
      "  - {name: c, address: tcp://node-3.example.com:1}\n"
      "  - {name: d, address: tcp://zring_d:7101}\n");
  const RingConfig config = parse_config(yaml, "r");
  BOOST_TEST(config.nodes[0].host == "::1");
  BOOST_TEST(config.nodes[0].port == 7101);
  BOOST_TEST(config.nodes[1].host == "fe80::1:2");
  BOOST_TEST(config.nodes[1].port == 65535);
  BOOST_TEST(config.nodes[2].host == "node-3.example.com");
  BOOST_TEST(config.nodes[3].host == "zring_d");
  BOOST_TEST(config.ipc == "ipc:///a");
}

BOOST_AUTO_TEST_SUITE_END()

// ----------------------------------------------------------------------- ipc --

BOOST_AUTO_TEST_SUITE(ipc)

std::string ring_with_ipc(const std::string& ipc) {
  return "nodes:\n  - {name: a, address: tcp://h1:1}\nself: a\nipc: \"" + ipc + "\"\n";
}

BOOST_AUTO_TEST_CASE(bad_endpoints) {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"/run/zring.sock", "does not start with ipc://"},
      {"tcp://h:1", "does not start with ipc://"},
      {"ipc://", "has an empty path"},
      {"ipc://run/zring.sock", "has a relative path; it must be absolute"},
      {"ipc://@abstract", "relative path"},
      {"ipc:///run/zring/", "ends in '/'"},
      {"ipc:///" + std::string(99, 'x'), "path of 100 bytes; it must be shorter than 100 bytes"},
  };
  for (const auto& [ipc, problem] : cases) {
    BOOST_TEST_CONTEXT(ipc) {
      const std::string message = error_of(ring_with_ipc(ipc));
      BOOST_TEST(starts_with(message, "ring.yaml: ipc: '" + ipc + "' "));
      BOOST_TEST(contains(message, problem));
    }
  }
  BOOST_TEST(contains(error_of(ring_with_ipc("ipc:///" + std::string(120, 'x'))), "sun_path"));
}

BOOST_AUTO_TEST_CASE(control_characters_are_shown_escaped) {
  // A double-quoted YAML string can hold a NUL, which would cut the socket path short.
  const std::string message = error_of(ring_with_ipc("ipc:///a\\0b"));
  BOOST_TEST(message == "ring.yaml: ipc: 'ipc:///a\\x00b' has a NUL byte in its path");
}

BOOST_AUTO_TEST_CASE(longest_path_is_99_bytes) {
  const std::string ipc = "ipc:///" + std::string(98, 'x');
  BOOST_TEST(parse_config(ring_with_ipc(ipc), "r").ipc == ipc);
}

BOOST_AUTO_TEST_CASE(node_ipc_overrides_top_level_for_that_node) {
  const std::string yaml = ring_of(
      "  - {name: a, address: tcp://h1:1}\n"
      "  - {name: b, address: tcp://h2:1, ipc: ipc:///tmp/b.sock}\n");
  const RingConfig as_a = parse_config(yaml, "r", "a");
  const RingConfig as_b = parse_config(yaml, "r", "b");
  BOOST_TEST(as_a.ipc == "ipc:///run/zring/zringd.sock");
  BOOST_TEST(as_b.ipc == "ipc:///tmp/b.sock");
  BOOST_TEST(as_a.nodes[0].ipc.empty());
  BOOST_TEST(as_a.nodes[1].ipc == "ipc:///tmp/b.sock");
}

BOOST_AUTO_TEST_CASE(node_ipc_is_validated) {
  const std::string yaml = ring_of("  - {name: a, address: tcp://h1:1, ipc: ipc://rel.sock}\n");
  BOOST_TEST(
      starts_with(error_of(yaml), "ring.yaml: nodes[0].ipc: 'ipc://rel.sock' has a relative path"));
}

BOOST_AUTO_TEST_CASE(every_node_needs_an_ipc) {
  const std::string yaml =
      "nodes:\n  - {name: a, address: tcp://h1:1, ipc: ipc:///a}\n"
      "  - {name: b, address: tcp://h2:1}\nself: a\n";
  BOOST_TEST(
      contains(error_of(yaml), "ring.yaml: nodes[1].ipc: missing, and there is no top-level ipc"));
}

BOOST_AUTO_TEST_CASE(daemons_on_one_host_need_their_own_ipc) {
  // The design's minimal example: two loopback daemons sharing one socket.
  const std::string shared = ring_of(
      "  - {name: a, address: tcp://127.0.0.1:7101}\n"
      "  - {name: b, address: tcp://127.0.0.1:7102}\n");
  const std::string message = error_of(shared);
  BOOST_TEST(starts_with(
      message, "ring.yaml: nodes[1].ipc: 'ipc:///run/zring/zringd.sock' (the top-level ipc)"));
  BOOST_TEST(contains(message, "also the ipc endpoint of nodes[0] on host '127.0.0.1'"));
  const std::string same_override = ring_of(
      "  - {name: a, address: tcp://H:1, ipc: ipc:///x}\n"
      "  - {name: b, address: tcp://h:2, ipc: ipc:///x}\n");
  BOOST_TEST(contains(error_of(same_override),
                      "nodes[1].ipc: 'ipc:///x' is also the ipc endpoint of nodes[0]"));
}

BOOST_AUTO_TEST_SUITE_END()

// ------------------------------------------------------------------- numbers --

BOOST_AUTO_TEST_SUITE(numbers)

BOOST_AUTO_TEST_CASE(out_of_range_and_malformed) {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"local_ranks: 0", "ring.yaml: local_ranks: 0 is below 1"},
      {"local_ranks: 1025", "ring.yaml: local_ranks: 1025 is above 1024"},
      {"local_ranks: -1", "ring.yaml: local_ranks: -1 is below 1"},
      {"local_ranks: 99999999999999999999999",
       "ring.yaml: local_ranks: 99999999999999999999999 is above 1024"},
      {"timeout_ms: abc", "ring.yaml: timeout_ms: 'abc' is not an integer"},
      {"timeout_ms: 1.5", "ring.yaml: timeout_ms: '1.5' is not an integer"},
      {"timeout_ms: 1e4", "ring.yaml: timeout_ms: '1e4' is not an integer"},
      {"timeout_ms: 10s", "ring.yaml: timeout_ms: '10s' is not an integer"},
      {"timeout_ms: -x", "ring.yaml: timeout_ms: '-x' is not an integer"},
      {"timeout_ms: \"10000\"", "ring.yaml: timeout_ms: '10000' is quoted, so it is a string"},
      {"timeout_ms: [1]", "ring.yaml: timeout_ms: expected an integer, got a list"},
      {"timeout_ms: {a: 1}", "ring.yaml: timeout_ms: expected an integer, got a map"},
      {"timeout_ms:", "ring.yaml: timeout_ms: has no value"},
      {"timeout_ms: 010", "ring.yaml: timeout_ms: '010' has a leading zero"},
      {"timeout_ms: 99", "ring.yaml: timeout_ms: 99 is below 100"},
      {"timeout_ms: 3600001", "ring.yaml: timeout_ms: 3600001 is above 3600000"},
      {"heartbeat_ms: 5", "ring.yaml: heartbeat_ms: 5 is below 10"},
      {"heartbeat_ms: 5000",
       "ring.yaml: heartbeat_ms: 5000 must be less than half of timeout_ms (10000 / 2)"},
      {"chunk_bytes: 1000", "ring.yaml: chunk_bytes: 1000 is below 65536 (64 KiB)"},
      {"chunk_bytes: 67108868", "ring.yaml: chunk_bytes: 67108868 is above 67108864 (64 MiB)"},
      {"chunk_bytes: 65538", "ring.yaml: chunk_bytes: 65538 is not a multiple of 4"},
      {"gather_bytes: 67108865", "ring.yaml: gather_bytes: 67108865 is above 67108864 (64 MiB)"},
      {"gather_bytes: -1", "ring.yaml: gather_bytes: -1 is below 0"},
      {"direct_bytes: 1073741825",
       "ring.yaml: direct_bytes: 1073741825 is above 1073741824 (1 GiB)"},
      {"direct_bytes: -1", "ring.yaml: direct_bytes: -1 is below 0"},
      {"busy_poll_us: 10001", "ring.yaml: busy_poll_us: 10001 is above 10000"},
      {"busy_poll_us: -5", "ring.yaml: busy_poll_us: -5 is below 0"},
      {"busy_poll_us: 0.5", "ring.yaml: busy_poll_us: '0.5' is not an integer"},
      {"min_nodes: 0", "ring.yaml: min_nodes: 0 is below 1"},
      {"min_nodes: 3", "ring.yaml: min_nodes: 3 is above 2"},
      {"max_message_bytes: 1000", "ring.yaml: max_message_bytes: 1000 is below 131072 (128 KiB)"},
      {"max_message_bytes: 5000000000",
       "ring.yaml: max_message_bytes: 5000000000 is above 4294967296 (4 GiB)"},
      {"max_message_bytes: 1114111",
       "ring.yaml: max_message_bytes: 1114111 is below chunk_bytes + 64 KiB (1114112)"},
      {"log_level: verbose",
       "ring.yaml: log_level: 'verbose' is not one of error, warn, info, debug"},
      {"log_level: INFO", "ring.yaml: log_level: 'INFO' is not one of"},
      {"log_level: [info]", "ring.yaml: log_level: expected a string, got a list"},
  };
  for (const auto& [line, expected] : cases) {
    BOOST_TEST_CONTEXT(line) { BOOST_TEST(starts_with(error_of(kRing + line + "\n"), expected)); }
  }
}

BOOST_AUTO_TEST_CASE(heartbeat_is_checked_against_the_given_timeout) {
  BOOST_TEST(contains(error_of(kRing + "timeout_ms: 1000\nheartbeat_ms: 500\n"),
                      "heartbeat_ms: 500 must be less than half of timeout_ms (1000 / 2)"));
  BOOST_TEST(parse_config(kRing + "timeout_ms: 1000\nheartbeat_ms: 499\n", "r").heartbeat.count() ==
             499);
}

BOOST_AUTO_TEST_CASE(max_message_is_checked_against_the_given_chunk) {
  BOOST_TEST(contains(error_of(kRing + "chunk_bytes: 67108864\nmax_message_bytes: 67108864\n"),
                      "max_message_bytes: 67108864 is below chunk_bytes + 64 KiB (67174400)"));
  BOOST_TEST(parse_config(kRing + "chunk_bytes: 67108864\n", "r").max_message_bytes == 256u << 20);
}

BOOST_AUTO_TEST_SUITE_END()

// ---------------------------------------------------------------------- keys --

BOOST_AUTO_TEST_SUITE(keys)

BOOST_AUTO_TEST_CASE(unknown_key_names_it_and_lists_the_known_ones) {
  const std::string message = error_of(kRing + "timeout: 5\n");
  BOOST_TEST(starts_with(message, "ring.yaml: timeout: unknown key; did you mean 'timeout_ms'?"));
  BOOST_TEST(
      contains(message,
               "(known keys: nodes, self, ipc, local_ranks, min_nodes, timeout_ms, heartbeat_ms, "
               "busy_poll_us, chunk_bytes, gather_bytes, direct_bytes, max_message_bytes, "
               "log_level, metrics, "
               "curve, tcp_data, tcp_congestion)"));
  BOOST_TEST(contains(error_of(kRing + "Local_ranks: 2\n"), "did you mean 'local_ranks'?"));
  const std::string unrelated = error_of(kRing + "frobnicate: 1\n");
  BOOST_TEST(starts_with(unrelated, "ring.yaml: frobnicate: unknown key (known keys: nodes,"));
}

BOOST_AUTO_TEST_CASE(duplicate_key_names_both_lines) {
  // kRing has five lines, so the repeated key is on lines 6 and 7.
  BOOST_TEST(error_of(kRing + "timeout_ms: 1000\ntimeout_ms: 2000\n") ==
             "ring.yaml: timeout_ms: duplicate key (lines 6 and 7)");
  BOOST_TEST(contains(error_of(ring_of("  - {name: a, name: b, address: tcp://h:1}\n")),
                      "ring.yaml: nodes[0].name: duplicate key"));
}

BOOST_AUTO_TEST_CASE(non_word_key) {
  BOOST_TEST(contains(error_of(kRing + "? [a, b]\n: 1\n"),
                      "ring.yaml: top level: a key must be a plain word, got a list"));
}

BOOST_AUTO_TEST_SUITE_END()

// ----------------------------------------------------------------- documents --

BOOST_AUTO_TEST_SUITE(documents)

BOOST_AUTO_TEST_CASE(syntax_error_gives_line_and_column) {
  const std::string message = error_of("nodes: [a\nself: b\n");
  BOOST_TEST(starts_with(message, "ring.yaml: line 2, column "));
  BOOST_TEST(contains(message, "end of sequence flow not found"));
  BOOST_TEST(
      starts_with(error_of(kRing + "local_ranks: 1\n  bad: 2\n"), "ring.yaml: line 7, column "));
}

BOOST_AUTO_TEST_CASE(tab_indentation_is_named) {
  const std::string message = error_of("nodes:\n\t- {name: a, address: tcp://h:1}\nself: a\n");
  BOOST_TEST(starts_with(message, "ring.yaml: line 2, column "));
  BOOST_TEST(contains(message, "indented with a tab"));
  BOOST_TEST(!contains(error_of("nodes: [a\nself: b\n"), "tab"));
}

BOOST_AUTO_TEST_CASE(top_level_must_be_a_map) {
  BOOST_TEST(starts_with(error_of("- a\n- b\n"),
                         "ring.yaml: top level: expected a map of keys (nodes, self,"));
  BOOST_TEST(contains(error_of("- a\n- b\n"), "got a list"));
  BOOST_TEST(contains(error_of("hello\n"), "ring.yaml: top level: expected a map of keys"));
  BOOST_TEST(contains(error_of("hello\n"), "got the value 'hello'"));
}

BOOST_AUTO_TEST_CASE(empty_documents) {
  for (const std::string text : {"", "\n", "# only a comment\n", "---\n", "~\n"}) {
    BOOST_TEST(starts_with(error_of(text), "ring.yaml: top level: the configuration is empty"),
               "text " << text);
  }
}

BOOST_AUTO_TEST_CASE(one_document_only) {
  const std::string message = error_of(kRing + "---\nself: b\n");
  BOOST_TEST(starts_with(message, "ring.yaml: line 7, column 1: a second YAML document"));
}

BOOST_AUTO_TEST_CASE(source_names_the_text) {
  try {
    parse_config("local_ranks: 0\n", "");
    BOOST_FAIL("no error");
  } catch (const zring::Error& e) {
    BOOST_TEST(starts_with(e.what(), "<config>: "));
  }
}

BOOST_AUTO_TEST_SUITE_END()

// --------------------------------------------------------------------- files --

BOOST_AUTO_TEST_SUITE(files)

BOOST_AUTO_TEST_CASE(missing_file_says_which_and_why) {
  const std::string path = "/nonexistent-zring-dir/ring.yaml";
  BOOST_TEST(load_error(path) ==
             path + ": cannot open the configuration file: No such file or directory");
}

BOOST_AUTO_TEST_CASE(directory_is_not_a_file) {
  const TempDir dir;
  BOOST_TEST(load_error(dir.path.string()) ==
             dir.path.string() + ": cannot read the configuration file: Is a directory");
}

BOOST_AUTO_TEST_CASE(file_is_loaded_and_named_in_errors) {
  const TempDir dir;
  const std::string good = dir.write("good.yaml", kRing);
  const RingConfig config = zring::load_config(good, "b");
  BOOST_TEST(config.source == good);
  BOOST_TEST(config.self == "b");
  const std::string bad = dir.write("bad.yaml", kRing + "local_ranks: 0\n");
  BOOST_TEST(load_error(bad) == bad + ": local_ranks: 0 is below 1");
}

BOOST_AUTO_TEST_CASE(huge_file_is_refused) {
  const TempDir dir;
  const std::string path = dir.write("huge.yaml", kRing + "# " + std::string(2 << 20, 'x') + "\n");
  BOOST_TEST(contains(load_error(path), path + ": is larger than 1 MiB"));
}

BOOST_AUTO_TEST_SUITE_END()
