// ops_util.hpp - what the operations tests share: running commands, zringd
// processes started with a chosen command line and environment, status
// reports, training-process stand-ins.
#pragma once

#include <boost/property_tree/ptree.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "proc/local_ring.hpp"
#include "proc/process.hpp"

namespace zring::ops {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// A finished command: its exit status (128 + signal if killed, -1 if it
// had to be killed at the limit) and what it printed (stdout and stderr).
struct Run {
  int status = -1;
  std::string out;
};
Run run(const std::vector<std::string>& argv, const std::string& scratch_dir,
        std::chrono::seconds limit = 120s, const std::vector<std::string>& env = {});

// Checks pred every 50 ms until it holds or `within` passes.
bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds within);

[[nodiscard]] bool contains(const std::string& text, const std::string& part);
[[nodiscard]] std::vector<std::string> lines(const std::string& text);
[[nodiscard]] bool executable(const std::string& path);

// Ring options for these tests: short timeouts, LocalRing's config file.
proc::LocalRingOptions ring_options(std::size_t nodes, int timeout_ms = 2000,
                                    const std::string& log_level = "debug");

// The daemons of a LocalRing's ring, started here so that a test chooses
// each one's config file, extra arguments and environment. Logs go to
// DIR/nN.log (what LocalRing::log reads). Killed on scope exit.
class Daemons {
 public:
  explicit Daemons(proc::LocalRing& ring) : ring_(ring), processes_(ring.options().nodes) {}
  void start(std::size_t node, const std::vector<std::string>& extra_args = {},
             const std::vector<std::string>& env = {}, const std::string& config = "");
  proc::Process& process(std::size_t node) { return processes_.at(node); }
  [[nodiscard]] std::string log_path(std::size_t node) const;
  [[nodiscard]] std::string log(std::size_t node) const;
  // Until every started daemon says the ring is up; fails the test otherwise.
  void wait_up(std::chrono::seconds within = 30s);

 private:
  proc::LocalRing& ring_;
  std::vector<proc::Process> processes_;
};

// The status report of the daemon at endpoint, parsed.
boost::property_tree::ptree status_of(const std::string& endpoint);
// A number or flag of a report (as text: ptree's numeric conversions trip
// GCC's -Wmaybe-uninitialized inside Boost).
std::int64_t number_at(const boost::property_tree::ptree& tree, const std::string& key);
bool flag_at(const boost::property_tree::ptree& tree, const std::string& key);

// A training process stand-in (tests/integration/ring_client): `rounds`
// all-reduces of `size` floats with `method` as local rank `local_rank` of
// `node`. Writes OUT and, on an error, OUT.err.
struct Client {
  proc::Process process;
  std::string out;
  [[nodiscard]] std::string error() const;
};
Client start_client(proc::LocalRing& ring, std::size_t node, const std::string& method, int rounds,
                    std::size_t size, std::uint64_t seed, int timeout_ms = 10000,
                    std::size_t local_rank = 0);

}  // namespace zring::ops
