// security_util.hpp - a ring of real zringd processes on 127.0.0.1 for the
// security tests (optionally with CurveZMQ keys made by `zringctl keygen`),
// training clients whose results are checked, status counters, and the
// ring frames a stranger crafts.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "proc/process.hpp"
#include "wire/wire.hpp"

namespace zring::security_test {

struct RingSetup {
  std::size_t nodes = 3;
  bool curve = false;
  int timeout_ms = 4000;
  int heartbeat_ms = 100;
  std::size_t chunk_bytes = 256 * 1024;
  std::size_t max_message_bytes = 0;  // 0: the default
};

// One zringd per node on free ports, IPC sockets and keys in a temporary
// directory. Every process it started is killed when it goes out of scope.
class TestRing {
 public:
  explicit TestRing(RingSetup setup);
  TestRing(const TestRing&) = delete;
  TestRing& operator=(const TestRing&) = delete;

  void start_all();
  // (Re)starts node n, from another ring file if given.
  void start(std::size_t n, const std::string& config_path = "");
  // Waits until every daemon reports the ring up; throws with its log otherwise.
  void wait_up();

  [[nodiscard]] std::size_t nodes() const noexcept { return setup_.nodes; }
  [[nodiscard]] std::string name(std::size_t n) const { return "n" + std::to_string(n); }
  [[nodiscard]] std::string ipc(std::size_t n) const;
  [[nodiscard]] int port(std::size_t n) const { return ports_.at(n); }
  [[nodiscard]] std::string address(std::size_t n) const;
  [[nodiscard]] const std::string& dir() const noexcept { return dir_.path(); }
  [[nodiscard]] const std::string& config_path() const noexcept { return config_path_; }
  [[nodiscard]] const std::string& public_key(std::size_t n) const { return public_keys_.at(n); }
  [[nodiscard]] std::string log(std::size_t n) const;
  proc::Process& daemon(std::size_t n) { return daemons_.at(n); }

  // The daemon's status JSON (zringctl status --json), and one number of it.
  [[nodiscard]] std::string status(std::size_t n) const;
  [[nodiscard]] std::uint64_t counter(std::size_t n, const std::string& key) const;
  // Waits (up to a generous bound) until counter(n, key) > above; returns its last value.
  std::uint64_t wait_counter_above(std::size_t n, const std::string& key,
                                   std::uint64_t above) const;

 private:
  RingSetup setup_;
  proc::TempDir dir_;
  std::vector<int> ports_;
  std::vector<std::string> public_keys_;
  std::string config_path_;
  std::vector<proc::Process> daemons_;
};

// A number in a flat JSON object; throws when the key is missing.
std::uint64_t json_number(const std::string& json, const std::string& key);

// One client per node doing `rounds` all-reduces of tensors of `sizes`
// floats with `method`, all at once, as a training step would.
class ClientBatch {
 public:
  ClientBatch(TestRing& ring, std::string method, std::uint64_t seed, int rounds,
              std::vector<std::size_t> sizes);
  ClientBatch(const ClientBatch&) = delete;
  ClientBatch& operator=(const ClientBatch&) = delete;
  // Waits for every client; empty when every rank returned, for every round,
  // the same bytes as the others and the expected average; otherwise what
  // went wrong.
  std::string finish();

 private:
  TestRing& ring_;
  std::string method_;
  std::uint64_t seed_;
  int rounds_;
  std::vector<std::size_t> sizes_;
  std::vector<proc::Process> clients_;
  std::vector<std::string> outputs_;
};

// Empty when every node's bytes (from `offset` on) hold the same average of
// round `round` of make_gradients(seed, round, rank, sizes) with `method`;
// otherwise what is wrong.
std::string check_round(const std::vector<std::string>& results, std::size_t offset,
                        const std::string& method, std::uint64_t seed, std::uint64_t round,
                        const std::vector<std::size_t>& sizes);

// Ring frames, as a stranger would make them.
std::vector<std::uint8_t> header_bytes(const wire::RingHeader& header);
wire::RingHeader data_header(std::uint64_t generation, std::uint64_t op, std::uint32_t sender,
                             wire::Phase phase, std::uint32_t segment, std::uint32_t chunk,
                             std::uint32_t hop);
wire::RingHeader control_header(wire::RingKind kind, std::uint64_t generation, std::uint32_t sender,
                                std::uint64_t op = 0);

}  // namespace zring::security_test
