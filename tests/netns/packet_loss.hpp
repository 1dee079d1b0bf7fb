// packet_loss.hpp - random packet loss without tc netem: a six-instruction
// eBPF classifier (drop when a random number mod 100 < L, else pass),
// loaded with the bpf(2) system call and pinned in a private bpffs mount,
// so that `tc filter add dev DEV egress bpf da object-pinned PATH` can
// attach it to a link. Used where the kernel has no netem.
#pragma once

#include <string>
#include <vector>

namespace zring::netns {

class PacketLoss {
 public:
  // Loads and pins the program; throws std::runtime_error (with the
  // verifier's log) when the kernel refuses. 0 <= loss_percent <= 100.
  explicit PacketLoss(int loss_percent);
  ~PacketLoss();
  PacketLoss(PacketLoss&& other) noexcept;
  PacketLoss& operator=(PacketLoss&& other) noexcept;
  PacketLoss(const PacketLoss&) = delete;
  PacketLoss& operator=(const PacketLoss&) = delete;

  // Where the program is pinned (for tc ... object-pinned).
  [[nodiscard]] const std::string& path() const noexcept { return pinned_; }
  [[nodiscard]] int loss_percent() const noexcept { return loss_percent_; }

 private:
  void release() noexcept;

  int loss_percent_ = 0;
  std::string mount_dir_;  // /tmp/zrt-PID-bpf-XXXXXX, a bpffs
  std::string pinned_;
};

// Unmounts and removes bpffs directories of killed earlier runs
// (/tmp/zrt-PID-bpf-* whose PID is gone). Returns them.
std::vector<std::string> remove_stale_bpf_mounts();

// Whether the process with this pid runs the same program as this one (an
// earlier run of this test that is still alive owns its names).
bool same_test_alive(long pid);

}  // namespace zring::netns
