// log.hpp - one line per event, readable in journald (daemon-internal).
//
//   <6>zringd[a] info: op 12 done: 4 tensors, 1.2 MiB on the wire (x3.9 smaller)
//
// The <N> prefix is the syslog priority journald reads (only when stderr is
// the journal: $JOURNAL_STREAM names stderr's device and inode); the bracket
// names the node, and lines about an op say "op N". Thread-safe: each line
// is one write(2).
#pragma once

#include <string>
#include <string_view>

namespace zring::daemon {

enum class LogLevel { error = 3, warn = 4, info = 6, debug = 7 };

// Parses "error" | "warn" | "info" | "debug"; throws zring::Error(config_invalid).
LogLevel parse_log_level(std::string_view text);
const char* to_string(LogLevel level) noexcept;

void set_log_node(std::string node);
void set_log_level(LogLevel level) noexcept;
[[nodiscard]] LogLevel log_level() noexcept;
void log(LogLevel level, std::string_view message);

inline void log_error(std::string_view m) { log(LogLevel::error, m); }
inline void log_warn(std::string_view m) { log(LogLevel::warn, m); }
inline void log_info(std::string_view m) { log(LogLevel::info, m); }
inline void log_debug(std::string_view m) { log(LogLevel::debug, m); }
// Written at every level, as priority 5 (notice): what an operator asked for
// (a reload) must always be answered in the log.
void log_notice(std::string_view message);

}  // namespace zring::daemon
