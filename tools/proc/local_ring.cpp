#include "proc/local_ring.hpp"

#include <sched.h>

#include <optional>
#include <stdexcept>
#include <thread>
#include <zring/error.hpp>

#include "client/status.hpp"
#include "client/status_json.hpp"

namespace zring::proc {

LocalRing::LocalRing(LocalRingOptions options)
    : options_(std::move(options)), ports_(free_ports(options_.nodes)), daemons_(options_.nodes) {
  std::string yaml = "nodes:\n";
  for (std::size_t n = 0; n < options_.nodes; ++n)
    yaml += "  - {name: " + name(n) + ", address: tcp://127.0.0.1:" + std::to_string(ports_[n]) +
            ", ipc: '" + ipc(n) + "'}\n";
  yaml += "ipc: ipc://" + dir_.path() + "/unused.sock\n";
  yaml += "local_ranks: " + std::to_string(options_.local_ranks) + "\n";
  yaml += "timeout_ms: " + std::to_string(options_.timeout_ms) + "\n";
  yaml += "heartbeat_ms: " + std::to_string(options_.heartbeat_ms) + "\n";
  yaml += "chunk_bytes: " + std::to_string(options_.chunk_bytes) + "\n";
  yaml += "log_level: " + options_.log_level + "\n";
  yaml += options_.extra_yaml;
  config_path_ = dir_.path() + "/ring.yaml";
  write_file(config_path_, yaml);
}

LocalRing::~LocalRing() {
  for (Process& p : daemons_) p.kill();  // TempDir removes what they left
}

std::string LocalRing::ipc(std::size_t node) const {
  return "ipc://" + dir_.path() + "/" + name(node) + ".sock";
}

std::string LocalRing::log(std::size_t node) const {
  return read_file(dir_.path() + "/" + name(node) + ".log");
}

std::vector<unsigned> allowed_cpus() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  std::vector<unsigned> cpus;
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) return cpus;
  for (unsigned c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  return cpus;
}

namespace {

// The n-th (mod their count) CPU this process may run on, or none.
std::optional<unsigned> nth_allowed_cpu(std::size_t n) {
  const std::vector<unsigned> cpus = allowed_cpus();
  if (cpus.empty()) return std::nullopt;
  return cpus[n % cpus.size()];
}

}  // namespace

void LocalRing::start(std::size_t node, const std::string& config) {
  daemons_.at(node).kill();
  daemons_.at(node) = Process::spawn(
      {options_.zringd, "--config", config.empty() ? config_path_ : config, "--node", name(node)},
      dir_.path() + "/" + name(node) + ".log", {},
      options_.spread_cpus ? nth_allowed_cpu(node) : std::nullopt);
}

void LocalRing::start_all() {
  for (std::size_t n = 0; n < options_.nodes; ++n) start(n);
}

bool LocalRing::is_up(std::size_t node) {
  try {
    return client::query_status(ipc(node), std::chrono::milliseconds(500)).ring_up;
  } catch (const Error&) {
    return false;
  }
}

void LocalRing::wait_up(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (std::size_t n = 0; n < options_.nodes; ++n) {
    while (!is_up(n)) {
      if (!daemons_[n].running())
        throw std::runtime_error("zringd " + name(n) + " exited:\n" + log(n));
      if (std::chrono::steady_clock::now() > deadline)
        throw std::runtime_error("ring not up in time; log of " + name(n) + ":\n" + log(n));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

void LocalRing::wait_answering(std::size_t node, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    try {
      (void)client::query_status(ipc(node), std::chrono::milliseconds(500));
      return;
    } catch (const Error&) {
    }
    if (!daemons_.at(node).running())
      throw std::runtime_error("zringd " + name(node) + " exited:\n" + log(node));
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("zringd " + name(node) + " did not answer in time:\n" + log(node));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace zring::proc
