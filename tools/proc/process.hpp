// process.hpp - child processes for multi-process tests, never left behind.
//
// A Process is killed (SIGKILL) and reaped when it goes out of scope, and is
// killed by the kernel if the test process dies first (PR_SET_PDEATHSIG), so
// a failing test stops everything it started.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace zring::proc {

class Process {
 public:
  Process() = default;
  // Starts argv[0] with arguments; stdout and stderr go to log_path (or are
  // inherited when empty). Extra environment entries are "NAME=value". With
  // `cpu`, the child and every thread it makes run on that CPU only (when
  // the kernel refuses, the log says so and the child runs anywhere).
  static Process spawn(const std::vector<std::string>& argv, const std::string& log_path = "",
                       const std::vector<std::string>& env = {},
                       std::optional<unsigned> cpu = std::nullopt);
  // As spawn, with the child's stdin and stdout connected to this process:
  // send_line() writes a line to it, read_line() reads one (with a deadline).
  static Process spawn_talking(const std::vector<std::string>& argv,
                               const std::string& stderr_path);
  void send_line(const std::string& line);
  // The next line the child wrote, or nullopt at the deadline or end of output.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout);
  Process(Process&& other) noexcept;
  Process& operator=(Process&& other) noexcept;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process();

  [[nodiscard]] pid_t pid() const noexcept { return pid_; }
  [[nodiscard]] bool running();
  void signal(int sig) const;
  // SIGSTOP, then waits until every thread of the child is stopped (kill()
  // returns before they are: one thread takes the signal and stops the
  // others when it next runs). Throws when they are not within `limit`.
  void freeze(std::chrono::milliseconds limit = std::chrono::seconds(10)) const;
  // Waits for exit; returns the exit status (128 + signal when killed), or
  // nullopt when it is still running at the deadline.
  std::optional<int> wait(std::chrono::milliseconds timeout);
  // SIGKILL and reap (no-op when already gone).
  void kill() noexcept;

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
  int to_child_ = -1;    // its stdin (spawn_talking)
  int from_child_ = -1;  // its stdout
  std::string pending_;  // read but not yet returned
};

// A fresh private directory (under $TMPDIR, or a given parent), removed with
// its content on scope exit.
class TempDir {
 public:
  TempDir();                                                      // $TMPDIR/zring-test-XXXXXX
  TempDir(const std::string& parent, const std::string& prefix);  // parent/prefixXXXXXX
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
};

// TCP ports on 127.0.0.1 that nothing listens on now (asked of the kernel).
std::vector<int> free_ports(std::size_t count);

std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& text);

}  // namespace zring::proc
