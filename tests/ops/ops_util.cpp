#include "ops/ops_util.hpp"

#include <unistd.h>

#include <sstream>
#include <stdexcept>
#include <thread>

#define BOOST_BIND_GLOBAL_PLACEHOLDERS  // property_tree still includes the old boost/bind.hpp
#include <boost/property_tree/json_parser.hpp>

#include "client/status.hpp"
#include "client/status_json.hpp"

namespace zring::ops {

Run run(const std::vector<std::string>& argv, const std::string& scratch_dir,
        std::chrono::seconds limit, const std::vector<std::string>& env) {
  static int counter = 0;
  const std::string out_path =
      scratch_dir + "/run-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  proc::Process p = proc::Process::spawn(argv, out_path, env);
  Run r;
  const auto status = p.wait(limit);
  if (!status) p.kill();
  r.status = status.value_or(-1);
  r.out = proc::read_file(out_path);
  ::unlink(out_path.c_str());
  return r;
}

bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds within) {
  const auto deadline = Clock::now() + within;
  while (!pred()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(50ms);
  }
  return true;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

bool executable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

proc::LocalRingOptions ring_options(std::size_t nodes, int timeout_ms,
                                    const std::string& log_level) {
  proc::LocalRingOptions o;
  o.zringd = ZRING_ZRINGD_PATH;
  o.nodes = nodes;
  o.timeout_ms = timeout_ms;
  o.heartbeat_ms = 100;
  o.log_level = log_level;
  return o;
}

void Daemons::start(std::size_t node, const std::vector<std::string>& extra_args,
                    const std::vector<std::string>& env, const std::string& config) {
  std::vector<std::string> argv{ring_.options().zringd, "--config",
                                config.empty() ? ring_.config_path() : config, "--node",
                                ring_.name(node)};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  processes_.at(node).kill();
  processes_.at(node) = proc::Process::spawn(argv, log_path(node), env);
}

std::string Daemons::log_path(std::size_t node) const {
  return ring_.dir() + "/" + ring_.name(node) + ".log";
}

std::string Daemons::log(std::size_t node) const { return proc::read_file(log_path(node)); }

void Daemons::wait_up(std::chrono::seconds within) {
  const auto deadline = Clock::now() + within;
  for (std::size_t n = 0; n < processes_.size(); ++n) {
    if (processes_[n].pid() <= 0) continue;
    while (!ring_.is_up(n)) {
      if (!processes_[n].running())
        throw std::runtime_error("zringd " + ring_.name(n) + " exited:\n" + log(n));
      if (Clock::now() > deadline)
        throw std::runtime_error("ring not up in time; log of " + ring_.name(n) + ":\n" + log(n));
      std::this_thread::sleep_for(50ms);
    }
  }
}

boost::property_tree::ptree status_of(const std::string& endpoint) {
  std::istringstream in(client::status_json(client::query_status(endpoint, 5s)));
  boost::property_tree::ptree tree;
  boost::property_tree::read_json(in, tree);
  return tree;
}

std::int64_t number_at(const boost::property_tree::ptree& tree, const std::string& key) {
  return std::stoll(tree.get<std::string>(key));
}

bool flag_at(const boost::property_tree::ptree& tree, const std::string& key) {
  return tree.get<std::string>(key) == "true";
}

std::string Client::error() const { return proc::read_file(out + ".err"); }

Client start_client(proc::LocalRing& ring, std::size_t node, const std::string& method, int rounds,
                    std::size_t size, std::uint64_t seed, int timeout_ms, std::size_t local_rank) {
  const std::string out = ring.dir() + "/client-" + std::to_string(node) + "-" +
                          std::to_string(local_rank) + "-" + std::to_string(seed);
  ::unlink((out + ".err").c_str());
  return Client{
      proc::Process::spawn({ZRING_RING_CLIENT_PATH, ring.ipc(node), std::to_string(local_rank),
                            method, std::to_string(seed), std::to_string(rounds),
                            std::to_string(size), out, std::to_string(timeout_ms)},
                           out + ".log"),
      out};
}

}  // namespace zring::ops
