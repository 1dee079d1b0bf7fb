// local_ring.hpp - a ring of real zringd processes on 127.0.0.1.
//
// Used by the integration tests, the demo and the benchmark.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "proc/process.hpp"

namespace zring::proc {

struct LocalRingOptions {
  std::string zringd;  // path of the zringd binary
  std::size_t nodes = 2;
  std::size_t local_ranks = 1;
  int timeout_ms = 5000;
  int heartbeat_ms = 200;
  std::size_t chunk_bytes = 256 * 1024;
  std::string extra_yaml;  // appended to the config
  std::string log_level = "debug";
  // Node n's zringd, every thread of it, on the n-th (mod their count) of
  // the CPUs this process may use: on one machine a hand-off between a
  // daemon's threads then never crosses CPUs (docs/operations.md, "A CPU
  // for zringd").
  bool spread_cpus = false;
};

// The CPUs this process may run on (its affinity), in order; empty when the
// kernel does not say.
std::vector<unsigned> allowed_cpus();

// Writes a ring config into a temporary directory (free ports, one IPC
// socket per node) and runs one zringd per node. Everything it started is
// killed when it goes out of scope, also when a test fails.
class LocalRing {
 public:
  explicit LocalRing(LocalRingOptions options);
  ~LocalRing();

  // With `config`, node's zringd reads that ring file instead of the ring's.
  void start(std::size_t node, const std::string& config = "");
  void start_all();
  // Waits until every running daemon reports the ring up; throws otherwise.
  void wait_up(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  [[nodiscard]] bool is_up(std::size_t node);
  // Waits until node's daemon answers on its IPC socket (up or not), as
  // `systemctl start` waits for a Type=notify unit's READY: a client that
  // connects before would find no socket. Throws when it exits or takes
  // longer.
  void wait_answering(std::size_t node,
                      std::chrono::milliseconds timeout = std::chrono::seconds(30));
  Process& daemon(std::size_t node) { return daemons_.at(node); }

  [[nodiscard]] std::string ipc(std::size_t node) const;
  [[nodiscard]] std::string name(std::size_t node) const { return "n" + std::to_string(node); }
  [[nodiscard]] const std::string& config_path() const noexcept { return config_path_; }
  [[nodiscard]] std::string log(std::size_t node) const;
  [[nodiscard]] std::string dir() const { return dir_.path(); }
  [[nodiscard]] const LocalRingOptions& options() const noexcept { return options_; }
  [[nodiscard]] int port(std::size_t node) const { return ports_.at(node); }

 private:
  LocalRingOptions options_;
  TempDir dir_;
  std::vector<int> ports_;
  std::string config_path_;
  std::vector<Process> daemons_;
};

}  // namespace zring::proc
