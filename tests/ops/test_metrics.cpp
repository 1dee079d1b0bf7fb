// The Prometheus endpoint, scraped with a real HTTP client (curl): the
// counters move with ops, bytes and errors, peers go down or are left out
// for other settings, other paths and methods are refused.
#include <boost/test/unit_test.hpp>
#include <regex>

#include "ops/ops_util.hpp"

using namespace zring;
using namespace zring::ops;

namespace {

const std::string kCurl = "/usr/bin/curl";

boost::test_tools::assertion_result curl_available(boost::unit_test::test_unit_id) {
  boost::test_tools::assertion_result result(executable(kCurl));
  result.message() << kCurl
                   << " is missing: install curl (scripts/install-deps.sh does) to run this test";
  return result;
}

struct Response {
  int code = 0;
  std::string body;
};

Response http(const std::string& dir, const std::string& url, const std::string& method = "GET") {
  const Run r = run({kCurl, "-sS", "--max-time", "10", "-X", method, "-o", dir + "/body", "-w",
                     "%{http_code}", url},
                    dir);
  Response out;
  if (r.status == 0) out.code = std::stoi(r.out);
  out.body = proc::read_file(dir + "/body");
  return out;
}

// The value of one sample ("name{labels}" as written), or -1 when absent.
double sample(const std::string& text, const std::string& series) {
  for (const std::string& line : lines(text))
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  return -1;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(metrics, *boost::unit_test::precondition(curl_available))

BOOST_AUTO_TEST_CASE(scraped_counters_follow_ops_bytes_errors_and_peers) {
  proc::LocalRing ring(ring_options(2, 2000));
  // One file per daemon: on one host each needs its own metrics port.
  const std::vector<int> ports = proc::free_ports(2);
  Daemons daemons(ring);
  for (std::size_t n = 0; n < 2; ++n) {
    const std::string config = ring.dir() + "/ring-" + std::to_string(n) + ".yaml";
    proc::write_file(config, proc::read_file(ring.config_path()) +
                                 "metrics: {listen: 127.0.0.1:" + std::to_string(ports[n]) + "}\n");
    daemons.start(n, {}, {}, config);
  }
  daemons.wait_up();
  const std::string url = "http://127.0.0.1:" + std::to_string(ports[0]) + "/metrics";
  BOOST_TEST(contains(daemons.log(0), "info: metrics on " + url), daemons.log(0));

  const Response before = http(ring.dir(), url);
  BOOST_REQUIRE_MESSAGE(before.code == 200, "HTTP " << before.code << ": " << before.body);
  BOOST_TEST(contains(before.body, "# TYPE zring_ops_total counter"), before.body);
  BOOST_TEST(sample(before.body, "zring_ring_up") == 1);
  BOOST_TEST(sample(before.body, "zring_peer_up{peer=\"n1\",address=\"tcp://127.0.0.1:" +
                                     std::to_string(ring.port(1)) + "\"}") == 1);
  BOOST_TEST(sample(before.body, "zring_op_errors_total{kind=\"timeout\"}") == 0);
  BOOST_TEST(sample(before.body, "zring_ops_total{method=\"quant:4\",result=\"ok\"}") == -1);
  BOOST_TEST(sample(before.body, "zring_op_duration_seconds_count") == 0);
  BOOST_TEST(contains(before.body, "# TYPE zring_ops_rung_total counter"), before.body);
  BOOST_TEST(sample(before.body, "zring_ops_rung_total") == 0);

  Client a = start_client(ring, 0, "quant:4", 4, 200000, 1);
  Client b = start_client(ring, 1, "quant:4", 4, 200000, 1);
  BOOST_REQUIRE_MESSAGE(a.process.wait(60s).value_or(-1) == 0, a.error());
  BOOST_REQUIRE_MESSAGE(b.process.wait(60s).value_or(-1) == 0, b.error());
  // The bytes of the last op reach the stats with the ring's next report.
  Response after;
  BOOST_TEST(eventually(
      [&] {
        after = http(ring.dir(), url);
        return sample(after.body,
                      "zring_wire_bytes_total{method=\"quant:4\",direction=\"received\"}") > 0 &&
               sample(after.body, "zring_ops_total{method=\"quant:4\",result=\"ok\"}") == 4;
      },
      10s));
  BOOST_TEST(sample(after.body, "zring_ops_total{method=\"quant:4\",result=\"ok\"}") == 4,
             after.body);
  BOOST_TEST(sample(after.body, "zring_op_duration_seconds_count") == 4, after.body);
  // n0's ring messages to n1 went on a TCP connection (tcp_data, on by default).
  const std::string peer1 =
      "{peer=\"n1\",address=\"tcp://127.0.0.1:" + std::to_string(ring.port(1)) + "\"}";
  const std::string self0 =
      "{peer=\"n0\",address=\"tcp://127.0.0.1:" + std::to_string(ring.port(0)) + "\"}";
  BOOST_TEST(eventually(
      [&] { return sample(http(ring.dir(), url).body, "zring_peer_data_on_tcp" + peer1) == 1; },
      10s));
  BOOST_TEST(sample(after.body, "zring_peer_data_on_tcp" + self0) == 0, after.body);
  BOOST_TEST(sample(after.body, "zring_op_duration_seconds_bucket{le=\"+Inf\"}") == 4, after.body);
  BOOST_TEST(sample(after.body, "zring_op_duration_seconds_sum") > 0, after.body);
  const double raw =
      sample(after.body, "zring_raw_bytes_total{method=\"quant:4\",direction=\"sent\"}");
  const double wire =
      sample(after.body, "zring_wire_bytes_total{method=\"quant:4\",direction=\"sent\"}");
  BOOST_TEST(raw == 4.0 * 200000 * 4,
             after.body);  // 2 (N-1) / N = 1 of the gradients per op for N = 2
  BOOST_TEST(wire > 0);
  BOOST_TEST(wire < raw / 2,
             "4-bit codes should cost well under half of float32: " << wire << " vs " << raw);

  // An op that times out (n1's rank never submits) is counted by kind.
  Client lonely = start_client(ring, 0, "none", 1, 1000, 2);
  BOOST_REQUIRE(lonely.process.wait(30s).value_or(-1) == 3);
  BOOST_TEST_MESSAGE("the lonely client: " << lonely.error());
  BOOST_TEST(eventually(
                 [&] {
                   const Response r = http(ring.dir(), url);
                   return sample(r.body, "zring_op_errors_total{kind=\"timeout\"}") == 1 &&
                          sample(r.body, "zring_ops_total{method=\"none\",result=\"error\"}") == 1;
                 },
                 10s),
             http(ring.dir(), url).body);

  // n1 dies: n0 reports it down.
  daemons.process(1).kill();
  BOOST_TEST(eventually(
      [&] {
        const Response r = http(ring.dir(), url);
        return sample(r.body, "zring_ring_up") == 0 &&
               sample(r.body, "zring_peer_up{peer=\"n1\",address=\"tcp://127.0.0.1:" +
                                  std::to_string(ring.port(1)) + "\"}") == 0;
      },
      15s));

  // n1 back with another chunk_bytes: left out, and n0 says so.
  std::string yaml = proc::read_file(ring.dir() + "/ring-1.yaml");
  const auto at = yaml.find("chunk_bytes: ");
  BOOST_REQUIRE(at != std::string::npos);
  yaml.replace(at, yaml.find('\n', at) - at,
               "chunk_bytes: " + std::to_string(2 * ring.options().chunk_bytes));
  const std::string other = ring.dir() + "/ring-1-other.yaml";
  proc::write_file(other, yaml);
  daemons.start(1, {}, {}, other);
  const std::string n1 =
      "{peer=\"n1\",address=\"tcp://127.0.0.1:" + std::to_string(ring.port(1)) + "\"}";
  BOOST_TEST(eventually(
                 [&] {
                   const Response r = http(ring.dir(), url);
                   return sample(r.body, "zring_peer_mismatched" + n1) == 1 &&
                          sample(r.body, "zring_peer_up" + n1) == 0;
                 },
                 15s),
             http(ring.dir(), url).body);
  BOOST_TEST(sample(http(ring.dir(), url).body, "zring_peer_mismatched" + self0) == 0);

  // Only GET /metrics.
  BOOST_TEST(http(ring.dir(), "http://127.0.0.1:" + std::to_string(ports[0]) + "/").code == 404);
  BOOST_TEST(http(ring.dir(), url, "POST").code == 405);
  BOOST_TEST(daemons.process(0).running());
}

BOOST_AUTO_TEST_CASE(a_metrics_port_in_use_stops_the_start_with_a_clear_error) {
  proc::LocalRing ring(ring_options(1));
  const int port = proc::free_ports(1)[0];
  const std::string config = ring.dir() + "/ring-m.yaml";
  proc::write_file(config, proc::read_file(ring.config_path()) +
                               "metrics: {listen: 127.0.0.1:" + std::to_string(port) + "}\n");
  Daemons first(ring);
  first.start(0, {}, {}, config);
  first.wait_up();
  // A second daemon (another node name, another IPC socket) wants the same port.
  const std::string other = ring.dir() + "/ring-o.yaml";
  std::string text = proc::read_file(config);
  text = std::regex_replace(text, std::regex("n0\\.sock"), "other.sock");
  text =
      std::regex_replace(text, std::regex("tcp://127\\.0\\.0\\.1:" + std::to_string(ring.port(0))),
                         "tcp://127.0.0.1:" + std::to_string(proc::free_ports(1)[0]));
  proc::write_file(other, text);
  const Run second = run({ZRING_ZRINGD_PATH, "--config", other, "--node", "n0"}, ring.dir(), 20s);
  BOOST_TEST(second.status == 1, second.out);
  BOOST_TEST(contains(second.out, "cannot serve metrics on 127.0.0.1:" + std::to_string(port)),
             second.out);
}

BOOST_AUTO_TEST_SUITE_END()
