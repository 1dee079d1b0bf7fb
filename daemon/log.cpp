#include "log.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

#include <zring/error.hpp>

namespace zring::daemon {
namespace {

std::atomic<LogLevel> g_level{LogLevel::info};
std::mutex g_node_mutex;
std::string g_node = "?";
// journald sets JOURNAL_STREAM for services whose stderr it reads.
const bool g_journal = std::getenv("JOURNAL_STREAM") != nullptr;

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
    case LogLevel::error: return "error";
    case LogLevel::warn: return "warn";
    case LogLevel::info: return "info";
    case LogLevel::debug: return "debug";
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
  std::string line;
  if (g_journal) line += "<" + std::to_string(static_cast<int>(level)) + ">";
  {
    std::lock_guard lock(g_node_mutex);
    line += "zringd[" + g_node + "] ";
  }
  line += to_string(level);
  line += ": ";
  for (char c : message) line += (c == '\n') ? ' ' : c;  // one event, one line
  line += '\n';
  (void)!::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace zring::daemon
