// netns_ring.hpp - a ring of real zringd processes, one per network
// namespace of a Network, and training-process stand-ins (ring_client
// --talk) next to them, driven round by round as a training loop would.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "netns/network.hpp"
#include "proc/process.hpp"

namespace zring::netns {

using Clock = std::chrono::steady_clock;

struct NetnsRingOptions {
  std::string zringd;       // path of the zringd binary
  std::string ring_client;  // path of the ring_client binary
  int port = 7101;          // the same on every node: each has its own address
  int timeout_ms = 2000;
  int heartbeat_ms = 200;
  std::size_t chunk_bytes = 256 * 1024;
  std::size_t min_nodes = 0;  // 0: zringd's default (a majority)
  std::string log_level = "info";
};

// Writes ring.yaml (nodes at their namespace addresses, one IPC socket per
// node in a temporary directory: Unix sockets are files, reachable from any
// network namespace) and runs each node's zringd with `ip netns exec`.
// Everything it started is killed when it goes out of scope.
class NetnsRing {
 public:
  NetnsRing(const Network& network, NetnsRingOptions options);
  ~NetnsRing();
  NetnsRing(const NetnsRing&) = delete;
  NetnsRing& operator=(const NetnsRing&) = delete;

  void start_all();
  // Waits until every daemon reports the ring up; false at the deadline.
  [[nodiscard]] bool wait_up(std::chrono::milliseconds timeout);
  [[nodiscard]] bool is_up(std::size_t node);

  [[nodiscard]] std::size_t nodes() const noexcept { return network_.nodes(); }
  // Node names are words, so a test can tell an error names one.
  [[nodiscard]] static std::string name(std::size_t node);
  [[nodiscard]] std::string ipc(std::size_t node) const;
  [[nodiscard]] std::string dir() const { return dir_.path(); }
  [[nodiscard]] std::string log(std::size_t node) const;
  [[nodiscard]] std::string yaml() const;
  [[nodiscard]] const NetnsRingOptions& options() const noexcept { return options_; }
  [[nodiscard]] bool daemons_running();

 private:
  const Network& network_;
  NetnsRingOptions options_;
  proc::TempDir dir_;
  std::vector<proc::Process> daemons_;
};

// One answer of a client to "round N FILE".
struct Answer {
  enum class Kind { ok, error, none };  // none: no answer before the guard
  Kind kind = Kind::none;
  std::string code;      // error: zring::to_string(code), e.g. "peer_lost"
  std::string message;   // error: what()
  Clock::time_point at;  // when the answer arrived
};

// A fault to inject while a round is in flight: `action` runs on the
// polling thread `after` the round started, but only if some rank has not
// answered yet (so it lands inside the op, not after it).
struct InjectDuring {
  std::chrono::milliseconds after{0};
  std::function<void()> action;
};

struct Round {
  std::uint64_t number = 0;
  Clock::time_point started;
  std::optional<Clock::time_point> injected;  // when the fault was in place
  std::size_t answered_before_fault = 0;
  std::vector<Answer> answers;     // per rank
  std::vector<std::string> files;  // per rank: where an ok result was written
};

// One ring_client --talk per node (local rank 0), each in its node's
// namespace, all with the same method, seed and tensor sizes.
class Clients {
 public:
  Clients(const NetnsRing& ring, const Network& network, const std::string& method,
          std::uint64_t seed, const std::vector<std::size_t>& sizes);
  ~Clients();
  Clients(const Clients&) = delete;
  Clients& operator=(const Clients&) = delete;

  // Every client all-reduces round `number`'s gradients at once; waits for
  // every answer, at most `guard` (a hang detector, not a speed limit).
  // With `inject`, injects a fault while the op is in flight (InjectDuring).
  Round run_round(std::uint64_t number, std::chrono::milliseconds guard,
                  const InjectDuring* inject = nullptr);
  [[nodiscard]] const std::string& method() const noexcept { return method_; }
  [[nodiscard]] std::uint64_t seed() const noexcept { return seed_; }
  [[nodiscard]] const std::vector<std::size_t>& sizes() const noexcept { return sizes_; }

 private:
  const NetnsRing& ring_;
  std::string method_;
  std::uint64_t seed_;
  std::vector<std::size_t> sizes_;
  std::vector<proc::Process> clients_;
};

}  // namespace zring::netns
