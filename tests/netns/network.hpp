// network.hpp - an emulated multi-host network for tests: one network
// namespace per node, each joined by a veth pair to a Linux bridge in a hub
// namespace (a switch with one port per node), and ways to break it.
//
// Every name this creates starts with "zrt-PID-" (PID of the test process),
// so runs never collide and a later run can delete what a killed one left
// behind (remove_stale_namespaces, which also unmounts its bpffs). The veths and the bridge are
// created directly inside these namespaces, never in the host's own namespace, so they vanish with
// them and no traffic reaches anything else. A Network deletes everything it created when it goes
// out of scope, also when a test fails or the constructor throws half way.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "netns/packet_loss.hpp"

namespace zring::netns {

struct CommandResult {
  int status = -1;     // exit status; -1 when it did not finish in time
  std::string output;  // stdout and stderr
};

// Runs argv (argv[0] looked up in PATH) and waits at most `limit`.
CommandResult try_run(const std::vector<std::string>& argv,
                      std::chrono::seconds limit = std::chrono::seconds(20));
// As try_run; throws std::runtime_error naming the command and its output
// when it fails.
std::string run(const std::vector<std::string>& argv);

// Why this machine cannot build the network ("" when it can): not root, no
// `ip`, or `ip netns add` refused. Probes once per process.
const std::string& namespaces_unavailable();

// Why tc netem cannot be used ("" when it can): the kernel may lack
// CONFIG_NET_SCH_NETEM. Probes once per process, in a namespace of its own.
const std::string& netem_unavailable();

// Deletes namespaces named zrt-PID-... whose test process is gone (a run
// that was killed before it could clean up), and their bpffs mounts
// (packet_loss.hpp). Returns what it deleted.
std::vector<std::string> remove_stale_namespaces();

// How to make one node's link bad. With tc netem in the kernel: `netem loss
// L% delay D ms` on both ends. Without it (some VM kernels lack
// CONFIG_NET_SCH_NETEM): random loss of L% from an eBPF classifier on both
// ends, and the delay as the queue of a `tbf` shaper at `fallback_rate`
// (at most D ms of queueing, tail drops beyond).
struct Degradation {
  int loss_percent = 0;
  int delay_ms = 0;
  std::string fallback_rate = "100mbit";
};

class Network {
 public:
  // Builds the hub, its bridge and one namespace per node with the address
  // address(node). Throws std::runtime_error (after deleting what it built).
  explicit Network(std::size_t nodes);
  ~Network();
  Network(const Network&) = delete;
  Network& operator=(const Network&) = delete;

  [[nodiscard]] std::size_t nodes() const noexcept { return nodes_; }
  [[nodiscard]] std::string ns(std::size_t node) const;
  [[nodiscard]] const std::string& hub() const noexcept { return hub_; }
  // The node's IPv4 address in the private subnet 10.231.S.0/24.
  [[nodiscard]] std::string address(std::size_t node) const;
  // argv run inside the node's namespace (ip netns exec).
  [[nodiscard]] std::vector<std::string> in_node(std::size_t node,
                                                 std::vector<std::string> argv) const;

  // The two ends of a node's link: the node's own interface, or the
  // bridge port on the switch side.
  enum class End { node, hub };
  [[nodiscard]] static const char* to_string(End end) noexcept;
  // `ip link set DEV down|up` on one end of the node's link, done in-process
  // so that it takes effect within a millisecond, inside an op.
  void set_link(std::size_t node, End end, bool up);
  void degrade(std::size_t node, const Degradation& how);
  // Reorders and duplicates packets (netem only); false when the kernel has
  // no netem.
  bool reorder_and_duplicate(std::size_t node);
  // Removes what degrade / reorder_and_duplicate added.
  void restore(std::size_t node);
  // Packets the fault dropped on the node's link so far (qdisc counters).
  [[nodiscard]] long dropped(std::size_t node) const;
  // "tc netem" or "eBPF loss + tbf": what degrade() uses on this kernel.
  [[nodiscard]] std::string degradation_kind() const;

 private:
  void add_namespace(const std::string& name);
  void build();
  void destroy() noexcept;
  [[nodiscard]] std::string device(std::size_t node, End end) const;
  [[nodiscard]] const std::string& where(std::size_t node, End end) const;

  std::size_t nodes_;
  std::string tag_;  // "zrt-PID-K-"
  std::string hub_;
  std::vector<std::string> node_ns_;
  int subnet_;
  std::vector<std::string> created_;
  std::vector<PacketLoss> loss_;  // eBPF programs in use (fallback)
};

}  // namespace zring::netns
