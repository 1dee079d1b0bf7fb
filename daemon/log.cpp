#include "log.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <zring/error.hpp>

namespace zring::daemon {
namespace {

std::atomic<LogLevel> g_level{LogLevel::info};
std::mutex g_node_mutex;
std::string g_node = "?";
// systemd sets JOURNAL_STREAM=DEVICE:INODE for services whose stderr goes to
// the journal; a child that inherited the variable but writes elsewhere
// must not put <N> prefixes into a file.
bool stderr_is_journal() {
  const char* stream = std::getenv("JOURNAL_STREAM");
  struct stat info {};
  if (stream == nullptr || ::fstat(STDERR_FILENO, &info) != 0) return false;
  unsigned long long device = 0, inode = 0;
  if (std::sscanf(stream, "%llu:%llu", &device, &inode) != 2) return false;
  return device == static_cast<unsigned long long>(info.st_dev) &&
         inode == static_cast<unsigned long long>(info.st_ino);
}

const bool g_journal = stderr_is_journal();

void write_line(int priority, const char* label, std::string_view message) {
  std::string line;
  if (g_journal) line += "<" + std::to_string(priority) + ">";
  {
    std::lock_guard lock(g_node_mutex);
    line += "zringd[" + g_node + "] ";
  }
  line += label;
  line += ": ";
  for (char c : message) line += (c == '\n' || c == '\r') ? ' ' : c;  // one event, one line
  line += '\n';
  (void)!::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace

LogLevel parse_log_level(std::string_view text) {
  if (text == "error") return LogLevel::error;
  if (text == "warn" || text == "warning") return LogLevel::warn;
  if (text == "info") return LogLevel::info;
  if (text == "debug") return LogLevel::debug;
  throw Error(ErrorCode::config_invalid,
              "log level '" + std::string(text) + "' is not one of error, warn, info, debug");
}

const char* to_string(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::error:
      return "error";
    case LogLevel::warn:
      return "warn";
    case LogLevel::info:
      return "info";
    case LogLevel::debug:
      return "debug";
  }
  return "?";
}

void set_log_node(std::string node) {
  std::lock_guard lock(g_node_mutex);
  g_node = std::move(node);
}

void set_log_level(LogLevel level) noexcept { g_level = level; }
LogLevel log_level() noexcept { return g_level; }

void log(LogLevel level, std::string_view message) {
  if (static_cast<int>(level) > static_cast<int>(g_level.load())) return;
  write_line(static_cast<int>(level), to_string(level), message);
}

void log_notice(std::string_view message) { write_line(5, "notice", message); }

}  // namespace zring::daemon
