// CurveZMQ on the ring, with real zringd processes on 127.0.0.1: keys made by
// `zringctl keygen`, a ring with matching keys works, and while all-reduces
// run a stranger without keys and a stranger with a key pair of its own
// cannot get a single frame to a daemon: every result stays right, the
// daemons' drop counters do not move, their refusal counters do.
#define BOOST_TEST_MODULE security curve
#include <sys/stat.h>

#include <atomic>
#include <boost/test/unit_test.hpp>
#include <random>
#include <thread>
#include <zmq.hpp>
#include <zring/config.hpp>

#include "config/keys.hpp"
#include "security/security_util.hpp"

using namespace zring;
using namespace zring::security_test;
using zring::proc::Process;
using zring::proc::read_file;

namespace {

const std::vector<std::size_t> kSizes{1000, 20000, 3};

struct Output {
  int status = -1;
  std::string out;
};

Output run(const std::vector<std::string>& argv, const std::string& log) {
  Process p = Process::spawn(argv, log);
  Output o;
  o.status = p.wait(std::chrono::seconds(60)).value_or(-1);
  o.out = read_file(log);
  return o;
}

std::string line_value(const std::string& text, const std::string& key) {
  const auto at = text.find(key + ": '");
  if (at == std::string::npos) return "";
  return text.substr(at + key.size() + 3, config::kCurveKeyText);
}

// A stranger's PUSH socket at a ring port, sending without waiting.
struct Stranger {
  zmq::context_t context{1};
  zmq::socket_t push{context, zmq::socket_type::push};
  std::uint64_t sent = 0;
  explicit Stranger(const std::string& address, const std::string* server_key = nullptr) {
    push.set(zmq::sockopt::linger, 0);
    push.set(zmq::sockopt::reconnect_ivl, 20);
    if (server_key) {  // a key pair that no ring file names
      const config::KeyPair mine = config::generate_key_pair();
      push.set(zmq::sockopt::curve_serverkey, *server_key);
      push.set(zmq::sockopt::curve_publickey, mine.public_key);
      push.set(zmq::sockopt::curve_secretkey, mine.secret_key);
    }
    push.connect(address);
  }
  void send(const std::vector<std::uint8_t>& header,
            const std::vector<std::uint8_t>* payload = nullptr) {
    const auto more = payload ? zmq::send_flags::sndmore : zmq::send_flags::none;
    if (!push.send(zmq::buffer(header), more | zmq::send_flags::dontwait)) return;
    if (payload) (void)push.send(zmq::buffer(*payload), zmq::send_flags::dontwait);
    ++sent;
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(keygen_writes_a_private_secret_key_and_its_public_key) {
  proc::TempDir dir;
  const std::string prefix = dir.path() + "/a";
  const Output made =
      run({ZRING_ZRINGCTL_PATH, "keygen", "--out", prefix, "--node", "a"}, dir.path() + "/1.log");
  BOOST_TEST_REQUIRE(made.status == 0, made.out);
  struct stat info {};
  BOOST_TEST_REQUIRE(::stat((prefix + ".key").c_str(), &info) == 0);
  BOOST_TEST((info.st_mode & 0777) == 0600u);
  const config::SecretKeyFile secret = config::read_secret_key_file(prefix + ".key");
  BOOST_TEST_REQUIRE(secret.problem.empty(), secret.problem);
  const std::string public_key = read_file(prefix + ".pub").substr(0, config::kCurveKeyText);
  BOOST_TEST(config::check_z85_key(public_key).empty());
  BOOST_TEST(config::public_key_of(secret.secret_key) == public_key);
  BOOST_TEST(line_value(made.out, "public_key") == public_key, made.out);
  BOOST_TEST(made.out.find(secret.secret_key) == std::string::npos, "the secret key was printed");
  // Never replaces a key.
  const std::string before = read_file(prefix + ".key");
  const Output again = run({ZRING_ZRINGCTL_PATH, "keygen", "--out", prefix}, dir.path() + "/2.log");
  BOOST_TEST(again.status != 0);
  BOOST_TEST(again.out.find("File exists") != std::string::npos, again.out);
  BOOST_TEST(read_file(prefix + ".key") == before);
  // Without --out both keys go to stdout, a pair that belongs together.
  const Output printed = run({ZRING_ZRINGCTL_PATH, "keygen"}, dir.path() + "/3.log");
  BOOST_TEST_REQUIRE(printed.status == 0, printed.out);
  const std::string shown_public = line_value(printed.out, "public_key");
  const std::string shown_secret = line_value(printed.out, "secret_key");
  BOOST_TEST_REQUIRE(config::check_z85_key(shown_secret).empty(), printed.out);
  BOOST_TEST(config::public_key_of(shown_secret) == shown_public);
  BOOST_TEST(shown_public != public_key);
}

BOOST_AUTO_TEST_CASE(zringd_refuses_a_secret_key_others_can_read) {
  TestRing ring(RingSetup{.nodes = 2, .curve = true});
  const std::string key = ring.dir() + "/n1.key";
  BOOST_TEST_REQUIRE(::chmod(key.c_str(), 0644) == 0);
  const Output checked =
      run({ZRING_ZRINGD_PATH, "--check-config", ring.config_path(), "--node", "n1"},
          ring.dir() + "/check.log");
  BOOST_TEST(checked.status == 2, checked.out);
  BOOST_TEST(checked.out.find("nodes[1].secret_key_file: '" + key + "' has mode 0644") !=
                 std::string::npos,
             checked.out);
  // The other node's key is fine, and zringctl status needs no key at all.
  const Output other =
      run({ZRING_ZRINGD_PATH, "--check-config", ring.config_path(), "--node", "n0"},
          ring.dir() + "/check0.log");
  BOOST_TEST(other.status == 0, other.out);
}

BOOST_AUTO_TEST_CASE(ring_with_matching_keys_works) {
  TestRing ring(RingSetup{.nodes = 3, .curve = true});
  ring.start_all();
  ring.wait_up();
  for (std::size_t n = 0; n < 3; ++n)
    BOOST_TEST(ring.status(n).find("\"curve\":true") != std::string::npos);
  ClientBatch none(ring, "none", 11, 3, kSizes);
  BOOST_TEST(none.finish() == "");
  ClientBatch quant(ring, "quant:8", 12, 3, kSizes);
  BOOST_TEST(quant.finish() == "");
  const Output shown =
      run({ZRING_ZRINGCTL_PATH, "status", "--endpoint", ring.ipc(0)}, ring.dir() + "/status.log");
  BOOST_TEST(shown.status == 0, shown.out);
  BOOST_TEST(
      shown.out.find("ring port   CurveZMQ on, 0 connections refused by key") != std::string::npos,
      shown.out);
  for (std::size_t n = 0; n < 3; ++n) {
    BOOST_TEST(ring.counter(n, "auth_rejected") == 0u);
    BOOST_TEST(ring.counter(n, "dropped") == 0u, ring.status(n));
    BOOST_TEST(ring.counter(n, "ops_done") == 6u);
  }
}

BOOST_AUTO_TEST_CASE(strangers_without_a_ring_key_cannot_inject_anything) {
  TestRing ring(RingSetup{.nodes = 3, .curve = true});
  ring.start_all();
  ring.wait_up();
  ClientBatch warmup(ring, "none", 20, 2, kSizes);
  BOOST_TEST_REQUIRE(warmup.finish() == "");
  const std::size_t target = 1, predecessor = 0;
  const std::uint64_t generation = ring.counter(target, "generation");
  std::vector<std::uint64_t> dropped, malformed, formations;
  for (std::size_t n = 0; n < 3; ++n) {
    dropped.push_back(ring.counter(n, "dropped"));
    malformed.push_back(ring.counter(n, "malformed"));
    formations.push_back(ring.counter(n, "formations"));
  }
  const std::uint64_t rejected_before = ring.counter(target, "auth_rejected");
  const std::uint64_t failed_before = ring.counter(target, "handshakes_failed");

  // Frames that would wreck the ring if they got in: data for the ops about
  // to run with tags the ring expects, a heartbeat of another generation
  // (the node would re-form the ring), FORM and ABORT; plus garbage.
  std::vector<std::vector<std::uint8_t>> frames;
  const auto p = static_cast<std::uint32_t>(predecessor);
  for (std::uint64_t op = 0; op < 40; ++op) {
    frames.push_back(header_bytes(data_header(generation, op, p, wire::Phase::manifest, p, 0, 1)));
    frames.push_back(header_bytes(data_header(generation, op, p, wire::Phase::reduce, p, 0, 1)));
    frames.push_back(header_bytes(control_header(wire::RingKind::abort, generation, p, op)));
  }
  frames.push_back(header_bytes(control_header(wire::RingKind::heartbeat, generation + 2, p)));
  frames.push_back(header_bytes(control_header(wire::RingKind::form, generation + 4, p)));
  frames.push_back(header_bytes(control_header(wire::RingKind::reform, generation, p)));
  const std::vector<std::uint8_t> payload(4 * 1000, 0x41);

  // Each round, a stranger without keys and one with a key pair of its own
  // connect afresh and offer every frame (queued until the handshake, which
  // fails), so the daemon is asked again and again while the ops run.
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> offered{0}, attempts{0};
  std::thread attack([&] {
    std::mt19937 random(5);
    std::vector<std::uint8_t> junk;
    while (!stop) {
      Stranger plain(ring.address(target));
      Stranger keyed(ring.address(target), &ring.public_key(target));
      for (const auto& frame : frames) {
        const bool data =
            frame.size() > 3 && frame[3] == static_cast<std::uint8_t>(wire::RingKind::data);
        plain.send(frame, data ? &payload : nullptr);
        keyed.send(frame, data ? &payload : nullptr);
      }
      junk.resize(random() % 200);
      for (auto& b : junk) b = static_cast<std::uint8_t>(random());
      plain.send(junk);
      keyed.send(junk);
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      offered += plain.sent + keyed.sent;
      attempts += 2;
    }
  });
  ClientBatch none(ring, "none", 21, 30, kSizes);
  const std::string result = none.finish();
  ClientBatch quant(ring, "quant:4", 22, 20, kSizes);
  const std::string quant_result = quant.finish();
  // The stranger with keys of its own was refused by the ZAP handler, and
  // both failed their handshakes; waits for the counters rather than a time.
  const std::uint64_t rejected = ring.wait_counter_above(target, "auth_rejected", rejected_before);
  const std::uint64_t failed =
      ring.wait_counter_above(target, "handshakes_failed", failed_before + 1);
  stop = true;
  attack.join();
  BOOST_TEST(result == "");
  BOOST_TEST(quant_result == "");
  BOOST_TEST(rejected > rejected_before, ring.status(target));
  BOOST_TEST(failed > failed_before + 1, ring.status(target));
  BOOST_TEST_MESSAGE(
      attempts << " connections by strangers offering " << offered << " frames; refused by key: "
               << ring.counter(target, "auth_rejected") - rejected_before << ", failed handshakes: "
               << ring.counter(target, "handshakes_failed") - failed_before);
  for (std::size_t n = 0; n < 3; ++n) {
    BOOST_TEST(ring.daemon(n).running());
    // Not one frame reached a daemon: nothing dropped, nothing malformed,
    // the ring never re-formed.
    BOOST_TEST(ring.counter(n, "dropped") == dropped[n], ring.status(n));
    BOOST_TEST(ring.counter(n, "malformed") == malformed[n]);
    BOOST_TEST(ring.counter(n, "formations") == formations[n]);
  }
  const std::string status = ring.status(target);
  BOOST_TEST(status.find("\"last_rejection\":\"a CurveZMQ client at 127.0.0.1 with key ") !=
                 std::string::npos,
             status);
  BOOST_TEST(status.find("which is not one of the ring's keys") != std::string::npos, status);
  BOOST_TEST(status.find("\"last_handshake_failure\":\"a client ") != std::string::npos, status);
  BOOST_TEST(ring.log(target).find("connections refused by key") != std::string::npos);
  // And the ring still works.
  ClientBatch after(ring, "none", 23, 2, kSizes);
  BOOST_TEST(after.finish() == "");
}

// Node 2's ring file has a stale public key for node 1: node 2 refuses node
// 1's connection, the ring cannot form, and both say why; with the right
// file the ring forms and works.
BOOST_AUTO_TEST_CASE(stale_public_key_is_refused_and_named_then_fixed) {
  TestRing ring(RingSetup{.nodes = 3, .curve = true});
  std::string stale = read_file(ring.config_path());
  const std::string old_key = ring.public_key(1);
  stale.replace(stale.find(old_key), old_key.size(), config::generate_key_pair().public_key);
  const std::string stale_path = ring.dir() + "/stale.yaml";
  proc::write_file(stale_path, stale);
  ring.start(0);
  ring.start(1);
  ring.start(2, stale_path);
  // Node 2 refuses node 1's key, again and again.
  BOOST_TEST(ring.wait_counter_above(2, "auth_rejected", 1) > 1u, ring.status(2));
  const std::string refused = ring.status(2);
  BOOST_TEST(refused.find("with key " + old_key + ", which is not one of the ring's keys") !=
                 std::string::npos,
             refused);
  // Node 1 learns it from its side of the handshake.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::string reason;
  while (reason.find("refuses this node's CurveZMQ key") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    reason = ring.status(1);
  }
  BOOST_TEST(reason.find("node 'n2' (" + ring.address(2) + ") refuses this node's CurveZMQ key") !=
                 std::string::npos,
             reason);
  BOOST_TEST(reason.find("\"ring_up\":false") != std::string::npos);
  // A client gets the reason as its error.
  ClientBatch failing(ring, "none", 30, 1, kSizes);
  const std::string failed = failing.finish();
  BOOST_TEST(failed.find("refuses this node's CurveZMQ key") != std::string::npos, failed);
  // The right file: the ring forms and works.
  ring.start(2);
  ring.wait_up();
  ClientBatch fixed(ring, "none", 31, 2, kSizes);
  BOOST_TEST(fixed.finish() == "");
}
