// The `metrics:` key of the ring file: optional, a map with `listen:
// HOST:PORT`, validated like every other key.
#define BOOST_TEST_MODULE ops_config
#include <boost/test/unit_test.hpp>
#include <zring/config.hpp>
#include <zring/error.hpp>

using namespace zring;

namespace {

const std::string kRing =
    "nodes:\n"
    "  - {name: a, address: tcp://10.0.0.1:7101}\n"
    "  - {name: b, address: tcp://10.0.0.2:7101}\n"
    "self: a\n"
    "ipc: ipc:///run/zring/zringd.sock\n";

RingConfig parse(const std::string& extra) { return parse_config(kRing + extra, "ring.yaml"); }

std::string error_of(const std::string& extra) {
  try {
    (void)parse(extra);
  } catch (const Error& e) {
    BOOST_TEST((e.code() == ErrorCode::config_invalid));
    return e.what();
  }
  return "(no error)";
}

}  // namespace

BOOST_AUTO_TEST_CASE(absent_means_no_endpoint) { BOOST_TEST(!parse("").metrics.has_value()); }

BOOST_AUTO_TEST_CASE(listen_forms_that_are_accepted) {
  struct Case {
    std::string listen, host;
    int port;
  };
  const Case cases[] = {
      {"127.0.0.1:9464", "127.0.0.1", 9464},
      {"0.0.0.0:9464", "0.0.0.0", 9464},  // every interface: allowed for a listener
      {"localhost:1", "localhost", 1},
      {"metrics.gpu-1.example:65535", "metrics.gpu-1.example", 65535},
      {"'[::1]:9464'", "::1", 9464},
      {"'[::]:9464'", "::", 9464}};
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT(c.listen) {
      const RingConfig ring = parse("metrics: {listen: " + c.listen + "}\n");
      BOOST_REQUIRE(ring.metrics.has_value());
      BOOST_TEST(ring.metrics->host == c.host);
      BOOST_TEST(ring.metrics->port == c.port);
    }
  }
  // Block style, as in configs/zring.yaml.
  const RingConfig block = parse("metrics:\n  listen: 127.0.0.1:9464\n");
  BOOST_TEST(block.metrics->listen == "127.0.0.1:9464");
}

BOOST_AUTO_TEST_CASE(listen_problems_name_the_key_and_the_fix) {
  const std::pair<std::string, std::string> cases[] = {
      {"metrics: {listen: 127.0.0.1}\n",
       "ring.yaml: metrics.listen: '127.0.0.1' has no port (expected HOST:PORT)"},
      {"metrics: {listen: '127.0.0.1:'}\n", "metrics.listen: '127.0.0.1:' has no port"},
      {"metrics: {listen: '127.0.0.1:0'}\n",
       "metrics.listen: '127.0.0.1:0' has port 0, outside 1..65535"},
      {"metrics: {listen: '127.0.0.1:70000'}\n", "has port 70000, outside 1..65535"},
      {"metrics: {listen: '127.0.0.1:http'}\n", "has port 'http', which is not a number"},
      {"metrics: {listen: 'http://127.0.0.1:9464'}\n", "has a scheme; write only HOST:PORT"},
      {"metrics: {listen: '127.0.0.1:9464/metrics'}\n", "has a path; write only HOST:PORT"},
      {"metrics: {listen: '::1:9464'}\n", "IPv6 address without brackets (write [::1]:PORT)"},
      {"metrics: {listen: '[::1:9464'}\n",
       "opens '[' without a closing ']' (expected [IPv6]:PORT)"},
      {"metrics: {listen: '[zz::1]:9464'}\n", "has an invalid IPv6 address 'zz::1'"},
      {"metrics: {listen: '300.1.1.1:9464'}\n", "has an invalid IPv4 address '300.1.1.1'"},
      {"metrics: {listen: 'bad host:9464'}\n", "has an invalid host name 'bad host'"},
      {"metrics: {listen: ':9464'}\n", "has no host (expected HOST:PORT"},
      {"metrics: {}\n",
       "ring.yaml: metrics.listen: missing (expected HOST:PORT, such as 127.0.0.1:9464)"},
      {"metrics: {listen: }\n", "metrics.listen: has no value"},
      {"metrics: {listen: [a]}\n", "metrics.listen: expected a string, got a list"},
      {"metrics: 127.0.0.1:9464\n",
       "ring.yaml: metrics: expected a map like {listen: 127.0.0.1:9464}, got the value"},
      {"metrics:\n", "ring.yaml: metrics: has no value"},
      {"metrics: {listen: 127.0.0.1:9464, lisen: x}\n",
       "ring.yaml: metrics.lisen: unknown key; did you mean 'listen'? (known keys: listen)"},
      {"metric: {listen: 127.0.0.1:9464}\n",
       "ring.yaml: metric: unknown key; did you mean 'metrics'?"},
  };
  for (const auto& [extra, expected] : cases) {
    const std::string message = error_of(extra);
    BOOST_TEST(message.find(expected) != std::string::npos, "for " << extra << "got: " << message);
  }
}

BOOST_AUTO_TEST_CASE(node_addresses_keep_their_tcp_hints) {
  // The listen-address wording must not leak into the tcp:// rules.
  try {
    (void)parse_config(
        "nodes:\n  - {name: a, address: 'tcp://10.0.0.1'}\nself: a\nipc: ipc:///run/z.sock\n",
        "r.yaml");
    BOOST_FAIL("a node address without a port was accepted");
  } catch (const Error& e) {
    BOOST_TEST(
        std::string(e.what()).find("has no port (expected tcp://HOST:PORT)") != std::string::npos,
        e.what());
  }
}

BOOST_AUTO_TEST_CASE(the_examples_show_the_key) {
  const RingConfig two_host = load_config(std::string(ZRING_SOURCE_DIR) + "/configs/two-host.yaml");
  BOOST_REQUIRE(two_host.metrics.has_value());
  BOOST_TEST(two_host.metrics->listen == "127.0.0.1:9464");
  // The default file documents it, commented out: no endpoint unless asked for.
  BOOST_TEST(
      !load_config(std::string(ZRING_SOURCE_DIR) + "/configs/zring.yaml").metrics.has_value());
}
