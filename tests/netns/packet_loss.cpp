#include "netns/packet_loss.hpp"

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace zring::netns {
namespace {

long bpf(int command, bpf_attr& attr) { return ::syscall(__NR_bpf, command, &attr, sizeof attr); }

bpf_insn instruction(std::uint8_t code, std::uint8_t dst, std::int16_t off, std::int32_t imm) {
  bpf_insn insn{};
  insn.code = code;
  insn.dst_reg = dst & 0xf;
  insn.off = off;
  insn.imm = imm;
  return insn;
}

// r0 = random() % 100; return r0 < loss ? TC_ACT_SHOT : TC_ACT_OK
int load_program(int loss_percent) {
  const std::vector<bpf_insn> program = {
      instruction(BPF_JMP | BPF_CALL, 0, 0, BPF_FUNC_get_prandom_u32),
      instruction(BPF_ALU64 | BPF_MOD | BPF_K, BPF_REG_0, 0, 100),
      instruction(BPF_JMP | BPF_JLT | BPF_K, BPF_REG_0, 2, loss_percent),
      instruction(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, TC_ACT_OK),
      instruction(BPF_JMP | BPF_EXIT, 0, 0, 0),
      instruction(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, TC_ACT_SHOT),
      instruction(BPF_JMP | BPF_EXIT, 0, 0, 0),
  };
  static const char license[] = "Dual MIT/GPL";
  std::vector<char> log(8192, '\0');
  bpf_attr attr{};
  attr.prog_type = BPF_PROG_TYPE_SCHED_CLS;
  attr.insn_cnt = static_cast<std::uint32_t>(program.size());
  attr.insns = reinterpret_cast<std::uintptr_t>(program.data());
  attr.license = reinterpret_cast<std::uintptr_t>(license);
  attr.log_buf = reinterpret_cast<std::uintptr_t>(log.data());
  attr.log_size = static_cast<std::uint32_t>(log.size());
  attr.log_level = 1;
  const long fd = bpf(BPF_PROG_LOAD, attr);
  if (fd < 0)
    throw std::runtime_error(std::string("bpf(BPF_PROG_LOAD) of the packet-loss classifier: ") +
                             std::strerror(errno) + "\n" + log.data());
  return static_cast<int>(fd);
}

}  // namespace

PacketLoss::PacketLoss(int loss_percent) : loss_percent_(loss_percent) {
  if (loss_percent < 0 || loss_percent > 100)
    throw std::runtime_error("packet loss of " + std::to_string(loss_percent) + "% is not 0..100");
  const int fd = load_program(loss_percent);
  std::string dir = "/tmp/zrt-" + std::to_string(::getpid()) + "-bpf-XXXXXX";
  if (!::mkdtemp(dir.data())) {
    ::close(fd);
    throw std::runtime_error("mkdtemp for a bpffs: " + std::string(std::strerror(errno)));
  }
  if (::mount("bpf", dir.c_str(), "bpf", 0, "mode=0700") != 0) {
    const int e = errno;
    ::close(fd);
    ::rmdir(dir.c_str());
    throw std::runtime_error("mount -t bpf at " + dir + ": " + std::strerror(e));
  }
  mount_dir_ = dir;
  pinned_ = dir + "/drop" + std::to_string(loss_percent);
  bpf_attr attr{};
  attr.pathname = reinterpret_cast<std::uintptr_t>(pinned_.c_str());
  attr.bpf_fd = static_cast<std::uint32_t>(fd);
  const long pinned = bpf(BPF_OBJ_PIN, attr);
  const int e = errno;
  ::close(fd);  // the pin keeps the program alive
  if (pinned != 0) {
    pinned_.clear();
    release();
    throw std::runtime_error("bpf(BPF_OBJ_PIN): " + std::string(std::strerror(e)));
  }
}

PacketLoss::~PacketLoss() { release(); }

PacketLoss::PacketLoss(PacketLoss&& other) noexcept
    : loss_percent_(other.loss_percent_),
      mount_dir_(std::move(other.mount_dir_)),
      pinned_(std::move(other.pinned_)) {
  other.mount_dir_.clear();
  other.pinned_.clear();
}

PacketLoss& PacketLoss::operator=(PacketLoss&& other) noexcept {
  if (this != &other) {
    release();
    loss_percent_ = other.loss_percent_;
    mount_dir_ = std::move(other.mount_dir_);
    pinned_ = std::move(other.pinned_);
    other.mount_dir_.clear();
    other.pinned_.clear();
  }
  return *this;
}

void PacketLoss::release() noexcept {
  if (!pinned_.empty()) ::unlink(pinned_.c_str());
  if (!mount_dir_.empty()) {
    ::umount2(mount_dir_.c_str(), MNT_DETACH);
    ::rmdir(mount_dir_.c_str());
  }
  pinned_.clear();
  mount_dir_.clear();
}

bool same_test_alive(long pid) {
  std::ifstream theirs("/proc/" + std::to_string(pid) + "/comm");
  std::ifstream ours("/proc/self/comm");
  if (!theirs) return false;  // no such process
  std::string their_name, our_name;
  std::getline(theirs, their_name);
  std::getline(ours, our_name);
  return their_name == our_name;
}

std::vector<std::string> remove_stale_bpf_mounts() {
  static const std::regex stale(R"(/tmp/zrt-(\d+)-bpf-\w+)");
  std::ifstream mounts("/proc/self/mounts");
  std::vector<std::string> dirs;
  for (std::string line; std::getline(mounts, line);) {
    std::istringstream fields(line);
    std::string source, target, type;
    fields >> source >> target >> type;
    std::smatch m;
    if (type == "bpf" && std::regex_match(target, m, stale) && !same_test_alive(std::stol(m[1])))
      dirs.push_back(target);
  }
  for (const std::string& dir : dirs) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
      ::unlink(entry.path().c_str());
    ::umount2(dir.c_str(), MNT_DETACH);
    ::rmdir(dir.c_str());
  }
  return dirs;
}

}  // namespace zring::netns
