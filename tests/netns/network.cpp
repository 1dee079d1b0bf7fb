#include "netns/network.hpp"

#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "proc/process.hpp"

namespace zring::netns {
namespace {

const char kPrefix[] = "zrt-";

// argv[0] looked up in PATH and the sbin directories (ip and tc live there).
std::string which(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string dirs = std::string(path ? path : "") + ":/usr/sbin:/sbin:/usr/bin:/bin";
  std::stringstream list(dirs);
  for (std::string dir; std::getline(list, dir, ':');) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return name;
}

std::string joined(const std::vector<std::string>& argv) {
  std::string s;
  for (const std::string& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

}  // namespace

CommandResult try_run(const std::vector<std::string>& argv, std::chrono::seconds limit) {
  std::string log = "/tmp/zrt-" + std::to_string(::getpid()) + "-cmd-XXXXXX";
  const int fd = ::mkstemp(log.data());
  if (fd < 0) throw std::runtime_error("mkstemp: " + std::string(std::strerror(errno)));
  ::close(fd);
  std::vector<std::string> resolved = argv;
  resolved.at(0) = which(argv[0]);
  CommandResult result;
  {
    proc::Process p = proc::Process::spawn(resolved, log);
    result.status = p.wait(limit).value_or(-1);  // still running: killed on scope exit
  }
  result.output = proc::read_file(log);
  ::unlink(log.c_str());
  return result;
}

std::string run(const std::vector<std::string>& argv) {
  CommandResult r = try_run(argv);
  if (r.status != 0)
    throw std::runtime_error("`" + joined(argv) + "` failed (status " + std::to_string(r.status) +
                             "): " + r.output);
  return r.output;
}

const std::string& namespaces_unavailable() {
  static const std::string why = []() -> std::string {
    if (::geteuid() != 0) return "not running as root (network namespaces need CAP_SYS_ADMIN)";
    if (which("ip") == "ip") return "the `ip` command (iproute2) is not installed";
    const std::string probe = kPrefix + std::to_string(::getpid()) + "-probe";
    const CommandResult added = try_run({"ip", "netns", "add", probe});
    if (added.status != 0) return "`ip netns add` failed: " + added.output;
    const CommandResult link = try_run({"ip", "-n", probe, "link", "add", "br0", "type", "bridge"});
    (void)try_run({"ip", "netns", "del", probe});
    if (link.status != 0) return "cannot create a bridge in a namespace: " + link.output;
    return "";
  }();
  return why;
}

const std::string& netem_unavailable() {
  static const std::string why = []() -> std::string {
    if (!namespaces_unavailable().empty()) return namespaces_unavailable();
    const std::string probe = kPrefix + std::to_string(::getpid()) + "-probe";
    if (const CommandResult added = try_run({"ip", "netns", "add", probe}); added.status != 0)
      return "`ip netns add` failed: " + added.output;
    CommandResult netem = try_run({"ip", "-n", probe, "link", "add", "br0", "type", "bridge"});
    if (netem.status == 0)
      netem = try_run(
          {"tc", "-n", probe, "qdisc", "add", "dev", "br0", "root", "netem", "delay", "1ms"});
    (void)try_run({"ip", "netns", "del", probe});
    if (netem.status != 0) return "`tc qdisc add ... netem` failed: " + netem.output;
    return "";
  }();
  return why;
}

std::vector<std::string> remove_stale_namespaces() {
  static const std::regex ours(R"(zrt-(\d+)-[\w-]+)");
  std::vector<std::string> removed;
  const CommandResult listing = try_run({"ip", "netns", "list"});
  std::istringstream lines(listing.output);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string name;
    fields >> name;
    std::smatch m;
    if (!std::regex_match(name, m, ours) || same_test_alive(std::stol(m[1]))) continue;
    if (try_run({"ip", "netns", "del", name}).status == 0) removed.push_back(name);
  }
  for (const std::string& dir : remove_stale_bpf_mounts()) removed.push_back("bpffs " + dir);
  return removed;
}

Network::Network(std::size_t nodes) : nodes_(nodes) {
  static std::atomic<int> count{0};
  const int k = ++count;
  tag_ = kPrefix + std::to_string(::getpid()) + "-" + std::to_string(k) + "-";
  hub_ = tag_ + "hub";
  subnet_ =
      static_cast<int>((static_cast<unsigned>(::getpid()) + static_cast<unsigned>(k)) % 250) + 1;
  for (std::size_t n = 0; n < nodes_; ++n) node_ns_.push_back(tag_ + "n" + std::to_string(n));
  try {
    build();
  } catch (...) {
    destroy();
    throw;
  }
}

Network::~Network() { destroy(); }

std::string Network::ns(std::size_t node) const { return node_ns_.at(node); }

std::string Network::address(std::size_t node) const {
  return "10.231." + std::to_string(subnet_) + "." + std::to_string(node + 1);
}

std::vector<std::string> Network::in_node(std::size_t node, std::vector<std::string> argv) const {
  std::vector<std::string> wrapped = {which("ip"), "netns", "exec", ns(node)};
  wrapped.insert(wrapped.end(), argv.begin(), argv.end());
  return wrapped;
}

const char* Network::to_string(End end) noexcept { return end == End::node ? "node" : "hub"; }

void Network::add_namespace(const std::string& name) {
  run({"ip", "netns", "add", name});
  created_.push_back(name);
  run({"ip", "-n", name, "link", "set", "lo", "up"});
}

// Every device is created inside a namespace of ours: the node's end (eth0)
// in the node's namespace, the switch's end (pN) in the hub's.
void Network::build() {
  add_namespace(hub_);
  run({"ip", "-n", hub_, "link", "add", "br0", "type", "bridge"});
  run({"ip", "-n", hub_, "link", "set", "br0", "up"});
  for (std::size_t n = 0; n < nodes_; ++n) {
    add_namespace(ns(n));
    run({"ip", "-n", ns(n), "link", "add", "eth0", "type", "veth", "peer", "name",
         device(n, End::hub), "netns", hub_});
    run({"ip", "-n", hub_, "link", "set", device(n, End::hub), "master", "br0"});
    run({"ip", "-n", hub_, "link", "set", device(n, End::hub), "up"});
    run({"ip", "-n", ns(n), "addr", "add", address(n) + "/24", "dev", "eth0"});
    run({"ip", "-n", ns(n), "link", "set", "eth0", "up"});
  }
}

void Network::destroy() noexcept {
  loss_.clear();
  for (auto it = created_.rbegin(); it != created_.rend(); ++it) {
    try {
      (void)try_run({"ip", "netns", "del", *it});
    } catch (...) {  // nothing more to do in a destructor; remove_stale_namespaces retries
    }
  }
  created_.clear();
}

std::string Network::device(std::size_t node, End end) const {
  return end == End::node ? "eth0" : "p" + std::to_string(node);
}

const std::string& Network::where(std::size_t node, End end) const {
  return end == End::node ? node_ns_.at(node) : hub_;
}

// What `ip -n NS link set DEV up|down` does, without starting a process (a
// fork and exec take longer than an op): a thread joins the namespace (setns
// changes only the calling thread's) and flips IFF_UP with SIOCSIFFLAGS.
void Network::set_link(std::size_t node, End end, bool up) {
  const std::string ns_path = "/run/netns/" + where(node, end);
  const std::string dev = device(node, end);
  std::string error;
  std::thread worker([&] {
    const int ns_fd = ::open(ns_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (ns_fd < 0 || ::setns(ns_fd, CLONE_NEWNET) != 0) {
      error = "setns " + ns_path + ": " + std::strerror(errno);
      if (ns_fd >= 0) ::close(ns_fd);
      return;
    }
    ::close(ns_fd);
    const int sock = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ifreq req{};
    std::strncpy(req.ifr_name, dev.c_str(), IFNAMSIZ - 1);
    if (sock < 0 || ::ioctl(sock, SIOCGIFFLAGS, &req) != 0) {
      error = "SIOCGIFFLAGS " + dev + " in " + ns_path + ": " + std::strerror(errno);
    } else {
      req.ifr_flags = static_cast<short>(up ? (req.ifr_flags | IFF_UP) : (req.ifr_flags & ~IFF_UP));
      if (::ioctl(sock, SIOCSIFFLAGS, &req) != 0)
        error = "SIOCSIFFLAGS " + dev + " in " + ns_path + ": " + std::strerror(errno);
    }
    if (sock >= 0) ::close(sock);
  });
  worker.join();
  if (!error.empty())
    throw std::runtime_error("cannot set the link " + std::string(up ? "up" : "down") + ": " +
                             error);
}

std::string Network::degradation_kind() const {
  return netem_unavailable().empty() ? "tc netem"
                                     : "eBPF random loss + tbf queue (no netem in this kernel)";
}

void Network::degrade(std::size_t node, const Degradation& how) {
  for (End end : {End::node, End::hub}) {
    const std::string& ns_name = where(node, end);
    const std::string dev = device(node, end);
    if (netem_unavailable().empty()) {
      run({"tc", "-n", ns_name, "qdisc", "replace", "dev", dev, "root", "netem", "loss",
           std::to_string(how.loss_percent) + "%", "delay", std::to_string(how.delay_ms) + "ms"});
      continue;
    }
    if (how.loss_percent > 0) {
      loss_.emplace_back(how.loss_percent);
      run({"tc", "-n", ns_name, "qdisc", "replace", "dev", dev, "clsact"});
      run({"tc", "-n", ns_name, "filter", "add", "dev", dev, "egress", "bpf", "da", "object-pinned",
           loss_.back().path()});
    }
    if (how.delay_ms > 0)
      run({"tc", "-n", ns_name, "qdisc", "replace", "dev", dev, "root", "tbf", "rate",
           how.fallback_rate, "burst", "32kb", "latency", std::to_string(how.delay_ms) + "ms"});
  }
}

bool Network::reorder_and_duplicate(std::size_t node) {
  if (!netem_unavailable().empty()) return false;
  for (End end : {End::node, End::hub})
    run({"tc", "-n", where(node, end), "qdisc", "replace", "dev", device(node, end), "root",
         "netem", "delay", "10ms", "reorder", "25%", "50%", "duplicate", "5%"});
  return true;
}

void Network::restore(std::size_t node) {
  for (End end : {End::node, End::hub}) {
    // Either may be absent: which faults were added is not tracked per end.
    (void)try_run({"tc", "-n", where(node, end), "qdisc", "del", "dev", device(node, end), "root"});
    (void)try_run(
        {"tc", "-n", where(node, end), "qdisc", "del", "dev", device(node, end), "clsact"});
  }
  loss_.clear();
}

long Network::dropped(std::size_t node) const {
  static const std::regex drops(R"(dropped (\d+))");
  long total = 0;
  for (End end : {End::node, End::hub}) {
    const CommandResult r =
        try_run({"tc", "-s", "-n", where(node, end), "qdisc", "show", "dev", device(node, end)});
    for (std::sregex_iterator it(r.output.begin(), r.output.end(), drops), last; it != last; ++it)
      total += std::stol((*it)[1]);
  }
  return total;
}

}  // namespace zring::netns
