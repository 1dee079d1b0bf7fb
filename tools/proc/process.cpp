#include "process.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace zring::proc {

Process Process::spawn(const std::vector<std::string>& argv, const std::string& log_path,
                       const std::vector<std::string>& env, std::optional<unsigned> cpu) {
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
    if (!log_path.empty()) {
      const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        ::dup2(fd, STDOUT_FILENO);
        ::dup2(fd, STDERR_FILENO);
        ::close(fd);
      }
    }
    for (const std::string& e : env) ::putenv(const_cast<char*>(e.c_str()));
    if (cpu) {  // before exec: the threads the program makes inherit it
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(*cpu, &one);
      if (::sched_setaffinity(0, sizeof one, &one) != 0) {
        char line[512];  // no stdio lock in a child forked from threads
        const int n = std::snprintf(line, sizeof line, "cannot keep %s on CPU %u (%s): any CPU\n",
                                    argv[0].c_str(), *cpu, std::strerror(errno));
        if (n > 0)
          (void)!::write(STDERR_FILENO, line,
                         std::min(static_cast<std::size_t>(n), sizeof line - 1));
      }
    }
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    std::fprintf(stderr, "execv %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  Process p;
  p.pid_ = pid;
  return p;
}

Process Process::spawn_talking(const std::vector<std::string>& argv,
                               const std::string& stderr_path) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(in[0], STDIN_FILENO);
    ::dup2(out[1], STDOUT_FILENO);
    const int err = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (err >= 0) ::dup2(err, STDERR_FILENO);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  Process p;
  p.pid_ = pid;
  p.to_child_ = in[1];
  p.from_child_ = out[0];
  return p;
}

void Process::send_line(const std::string& line) {
  const std::string text = line + "\n";
  if (to_child_ < 0 ||
      ::write(to_child_, text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    throw std::runtime_error("cannot write to child " + std::to_string(pid_));
}

std::optional<std::string> Process::read_line(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto nl = pending_.find('\n');
    if (nl != std::string::npos) {
      std::string line = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      return line;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (from_child_ < 0 || left.count() <= 0) return std::nullopt;
    pollfd p{from_child_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(from_child_, buf, sizeof buf);
    if (n <= 0) return std::nullopt;
    pending_.append(buf, static_cast<std::size_t>(n));
  }
}

Process::Process(Process&& other) noexcept
    : pid_(other.pid_),
      status_(other.status_),
      to_child_(other.to_child_),
      from_child_(other.from_child_),
      pending_(std::move(other.pending_)) {
  other.pid_ = -1;
  other.to_child_ = other.from_child_ = -1;
}

Process& Process::operator=(Process&& other) noexcept {
  if (this != &other) {
    kill();
    pid_ = other.pid_;
    status_ = other.status_;
    to_child_ = other.to_child_;
    from_child_ = other.from_child_;
    pending_ = std::move(other.pending_);
    other.pid_ = -1;
    other.to_child_ = other.from_child_ = -1;
  }
  return *this;
}

Process::~Process() { kill(); }

bool Process::running() { return pid_ > 0 && !wait(std::chrono::milliseconds(0)); }

void Process::signal(int sig) const {
  if (pid_ > 0 && !status_) ::kill(pid_, sig);
}

namespace {

// The state letter of every thread of `pid` (/proc/<pid>/task/*/stat).
std::vector<char> thread_states(pid_t pid) {
  std::vector<char> states;
  std::error_code ec;
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& task : std::filesystem::directory_iterator(tasks, ec)) {
    std::ifstream in(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::size_t close = stat.rfind(')');  // the name may hold anything
    if (close != std::string::npos && close + 2 < stat.size()) states.push_back(stat[close + 2]);
  }
  return states;
}

}  // namespace

void Process::freeze(std::chrono::milliseconds limit) const {
  signal(SIGSTOP);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    const std::vector<char> states = thread_states(pid_);
    if (!states.empty() &&
        std::all_of(states.begin(), states.end(), [](char s) { return s == 'T' || s == 't'; }))
      return;
    if (std::chrono::steady_clock::now() >= deadline)
      throw std::runtime_error("pid " + std::to_string(pid_) + ": not every thread stopped " +
                               std::to_string(limit.count()) + " ms after SIGSTOP");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

std::optional<int> Process::wait(std::chrono::milliseconds timeout) {
  if (status_) return status_;
  if (pid_ <= 0) return std::nullopt;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return status_;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void Process::kill() noexcept {
  if (to_child_ >= 0) ::close(to_child_);
  if (from_child_ >= 0) ::close(from_child_);
  to_child_ = from_child_ = -1;
  if (pid_ <= 0 || status_) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  status_ = 128 + SIGKILL;
}

namespace {
std::string temp_base() {
  const char* base = std::getenv("TMPDIR");
  return base && *base ? base : "/tmp";
}
}  // namespace

TempDir::TempDir() : TempDir(temp_base(), "zring-test-") {}

TempDir::TempDir(const std::string& parent, const std::string& prefix) {
  std::string templ = parent + "/" + prefix + "XXXXXX";
  if (!::mkdtemp(templ.data()))
    throw std::runtime_error("mkdtemp failed for " + templ + ": " + std::strerror(errno));
  path_ = templ;
}

TempDir::~TempDir() {
  // ZRING_KEEP_TEST_DIRS=1 leaves the daemons' logs and files to read.
  const char* keep = std::getenv("ZRING_KEEP_TEST_DIRS");
  if (keep && std::string(keep) == "1") return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
  // A zringd killed with its sockets here cannot remove the shared buffers
  // that had no op yet (it removes a buffer's file at the first op in it):
  // those beside the sockets went with the directory, those in /dev/shm
  // (where they go when the directory is not a tmpfs) are named after the
  // socket's path (region_prefix in daemon/ipc_server.cpp, spelt again here
  // because tools/proc may use only the client layer).
  std::string stem = "zring" + path_ + "/";
  for (char& c : stem)
    if (c == '/') c = '_';
  std::error_code removing;  // a file gone meanwhile ends nothing
  for (std::filesystem::directory_iterator at("/dev/shm", ec), end; !ec && at != end;
       at.increment(ec))
    if (at->path().filename().string().rfind(stem, 0) == 0)
      std::filesystem::remove(at->path(), removing);
}

// Ports below the kernel's ephemeral range (32768 and up), so an outgoing
// connection cannot take one between this check and the daemon's bind;
// each is checked by binding it, and different test processes start at
// different random places.
std::vector<int> free_ports(std::size_t count) {
  std::vector<int> ports;
  std::uint64_t state =
      static_cast<std::uint64_t>(::getpid()) * 2654435761u ^
      static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  for (int attempt = 0; ports.size() < count && attempt < 10000; ++attempt) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const int port = 20000 + static_cast<int>((state >> 33) % 12000);
    if (std::find(ports.begin(), ports.end(), port) != ports.end()) continue;
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    const bool ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    if (fd >= 0) ::close(fd);
    if (ok) ports.push_back(port);
  }
  if (ports.size() < count) throw std::runtime_error("cannot find free ports");
  return ports;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

}  // namespace zring::proc
