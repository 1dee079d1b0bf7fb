// zringctl - look at and check a zring node.
//
//   zringctl status [--config FILE | --endpoint ipc://...] [--node NAME] [--json]
//   zringctl trace [--config FILE | --endpoint ipc://...]... [--node NAME] [--out FILE]
//   zringctl check-config FILE [--node NAME]
//   zringctl keygen [--out PREFIX] [--node NAME]
//
// status asks the node's zringd over its IPC socket (the daemon answers with
// its status report, a wire::DaemonStatus built in daemon/metrics.cpp) and
// prints it as tables, or as one JSON object with --json
// (client/status_json.cpp). trace asks one or more daemons for the phases of
// their last ops and writes them as Chrome trace-event JSON (trace_report.*),
// or prints them as a table. keygen makes a CurveZMQ key pair for a node.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>
#include <zring/zring.hpp>

#include "client/status.hpp"
#include "client/status_json.hpp"
#include "config/keys.hpp"
#include "trace_report.hpp"
#include "wire/wire.hpp"

namespace {

using zring::wire::DaemonStatus;

const char* kUsage =
    "usage: zringctl status [--config FILE | --endpoint ipc://PATH] [--node NAME] [--json]\n"
    "       zringctl trace [--config FILE | --endpoint ipc://PATH]... [--node NAME] [--out FILE]\n"
    "       zringctl check-config FILE [--node NAME]\n"
    "       zringctl keygen [--out PREFIX] [--node NAME]\n"
    "\n"
    "status        ask this node's zringd how the ring and its ops are doing\n"
    "              (FILE defaults to /etc/zring/zring.yaml; its ipc endpoint is used)\n"
    "trace         the phases of the last 4096 ops of each daemon given (several merge\n"
    "              into one file, a process per node): with --out, write Chrome\n"
    "              trace-event JSON for Perfetto or chrome://tracing; else print a table\n"
    "check-config  validate a ring file (and this node's secret key file) and print the ring\n"
    "keygen        make a CurveZMQ key pair: with --out, write the secret key to PREFIX.key\n"
    "              (mode 0600) and the public key to PREFIX.pub; print the public key\n"
    "              as a line for the node's entry in the ring file (NAME labels the files)\n";

struct Args {
  std::string command;
  std::optional<std::string> config, endpoint, node, file, out;  // the last one given
  struct Daemon {
    bool is_config;  // a ring file (its ipc endpoint), else an endpoint
    std::string value;
  };
  std::vector<Daemon> daemons;  // every --config and --endpoint, in order (trace)
  bool json = false;
};

Args parse(int argc, char** argv) {
  Args a;
  if (argc < 2) throw zring::Error(zring::ErrorCode::invalid_argument, "no command");
  a.command = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        throw zring::Error(zring::ErrorCode::invalid_argument, arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--config")
      a.daemons.push_back({true, *(a.config = value())});
    else if (arg == "--endpoint")
      a.daemons.push_back({false, *(a.endpoint = value())});
    else if (arg == "--node")
      a.node = value();
    else if (arg == "--json")
      a.json = true;
    else if (arg == "--out")
      a.out = value();
    else if (!a.file && arg.rfind("--", 0) != 0)
      a.file = arg;
    else
      throw zring::Error(zring::ErrorCode::invalid_argument, "unknown argument " + arg);
  }
  return a;
}

// --- formatting ------------------------------------------------------------------

std::string bytes(std::uint64_t n) {
  if (n < 1024) return std::to_string(n) + " B";
  const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(n);
  int u = -1;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %s", v, units[u]);
  return text;
}

std::string duration(std::int64_t seconds) {
  if (seconds < 0) seconds = 0;
  const std::int64_t d = seconds / 86400, h = seconds / 3600 % 24, m = seconds / 60 % 60,
                     s = seconds % 60;
  if (d > 0) return std::to_string(d) + "d " + std::to_string(h) + "h";
  if (h > 0) return std::to_string(h) + "h " + std::to_string(m) + "m";
  if (m > 0) return std::to_string(m) + "m " + std::to_string(s) + "s";
  return std::to_string(s) + "s";
}

std::string clock_time(std::int64_t unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm local{};
  ::localtime_r(&t, &local);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &local);
  return text;
}

// Columns padded to their widest cell, two spaces apart, indented.
void print_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& row : rows)
    for (std::size_t c = 0; c < row.size(); ++c) {
      if (width.size() <= c) width.push_back(0);
      width[c] = std::max(width[c], row[c].size());
    }
  for (const auto& row : rows) {
    std::string line = "  ";
    for (std::size_t c = 0; c < row.size(); ++c)
      line += row[c] + (c + 1 < row.size() ? std::string(width[c] - row[c].size() + 2, ' ') : "");
    std::cout << line << "\n";
  }
}

std::string plural(std::uint64_t n, const std::string& word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

// --- status ------------------------------------------------------------------------

void print_members(const DaemonStatus& report) {
  std::vector<std::vector<std::string>> rows{
      {"#", "NODE", "ADDRESS", "FIRST RANK", "STATE", "RING MESSAGES TO IT"}};
  std::size_t n = 0;
  for (const zring::wire::MemberStatus& member : report.members) {
    using State = zring::wire::MemberState;
    const std::string shown = member.state == State::self   ? "this node"
                              : member.state == State::up   ? "in the ring"
                              : member.state == State::live ? "live, not in the ring"
                              : member.state == State::down ? "unreachable"
                              : member.state == State::mismatched
                                  ? "left out, other settings: " + member.mismatch
                                  : "not heard yet";
    // Where this node's ring messages to it go (tcp_data), while it is a member.
    const std::string path = member.state != State::up ? "-"
                             : member.data_on_tcp      ? "tcp (data port)"
                                                       : "zeromq";
    rows.push_back({std::to_string(n++), member.name, member.address,
                    std::to_string(member.first_rank), shown, path});
  }
  print_table(rows);
  if (report.members_cut) std::cout << "  ... (more members; see --json)\n";
}

void print_traffic(const DaemonStatus& report) {
  std::vector<std::vector<std::string>> rows{
      {"METHOD", "OPS", "FAILED", "RAW BYTES", "WIRE SENT", "WIRE RECEIVED", "RAW/WIRE"}};
  for (const zring::wire::MethodStatus& m : report.methods) {
    char ratio[32] = "-";
    if (m.raw_bytes > 0 && m.wire_bytes_sent > 0)
      std::snprintf(ratio, sizeof ratio, "x%.2f",
                    static_cast<double>(m.raw_bytes) / static_cast<double>(m.wire_bytes_sent));
    rows.push_back({m.method, std::to_string(m.ops), std::to_string(m.failed), bytes(m.raw_bytes),
                    bytes(m.wire_bytes_sent), bytes(m.wire_bytes_received), ratio});
  }
  rows.push_back({"(between ops)", "", "", "", bytes(report.idle_bytes_sent),
                  bytes(report.idle_bytes_received), ""});
  print_table(rows);
  if (report.methods_cut) std::cout << "  ... (more methods; see --json)\n";
}

void print_status(const DaemonStatus& report) {
  const auto now = static_cast<std::int64_t>(report.now);
  const auto first = report.first_rank;
  const auto local = report.local_ranks;
  std::cout << "node        " << report.node << ", zringd " << report.version << ", running for "
            << duration(now - static_cast<std::int64_t>(report.started)) << "\n"
            << "ranks       "
            << (local == 1 ? std::to_string(first)
                           : std::to_string(first) + "-" + std::to_string(first + local - 1))
            << " of world size " << report.world_size << " (" << plural(local, "local rank")
            << ")\n";
  const auto since = static_cast<std::int64_t>(report.ring_since);
  std::cout << "ring        " << (report.ring_up ? "up" : "DOWN") << " since " << clock_time(since)
            << " (" << duration(now - since) << ")";
  if (!report.ring_up) std::cout << ": " << report.ring_reason;
  std::string ring;
  for (const std::string& name : report.ring_members) ring += (ring.empty() ? "" : " ") + name;
  std::cout << "\n            members [" << ring << "], quorum " << report.min_nodes << " of "
            << report.members.size() << " listed";
  if (!report.last_change.empty()) std::cout << "\n            last change: " << report.last_change;
  std::cout << "\n            " << plural(report.formations, "formation") << ", " << report.dropped
            << " ring messages dropped (" << report.malformed << " malformed)\n";
  std::cout << "ring port   CurveZMQ " << (report.curve ? "on" : "off") << ", "
            << report.auth_rejected << " connections refused by key, " << report.handshakes_failed
            << " failed handshakes, " << report.disconnects << " disconnects\n";
  std::cout << "members\n";
  print_members(report);
  std::cout << "ops         " << report.ops_done << " done (" << report.ops_rung
            << " rung on the bell), " << report.ops_failed << " failed";
  std::string kinds;
  for (const zring::wire::ErrorCount& e : report.errors)
    kinds += (kinds.empty() ? "" : ", ") + e.kind + ": " + std::to_string(e.count);
  std::cout << (kinds.empty() ? "" : " (" + kinds + ")") << "\n";
  std::cout << "last error  "
            << (report.last_error.empty()
                    ? "none"
                    : report.last_error + " (" +
                          duration(now - static_cast<std::int64_t>(report.last_error_at)) + " ago)")
            << "\n";
  std::cout << "traffic since start (raw: what a dense float32 ring would have moved)\n";
  print_traffic(report);
  if (!report.metrics.empty()) std::cout << "metrics     http://" << report.metrics << "/metrics\n";
}

// Only the ipc endpoint is needed: users who may not read the secret key can ask too.
std::string endpoint_of(const std::string& config_path, const std::optional<std::string>& node) {
  return zring::load_config(config_path, node, zring::SecretKey::skip).ipc;
}

// What a failed question to a daemon should add.
zring::Error unanswered(const zring::Error& e) {
  return zring::Error(e.code(), std::string(e.what()) +
                                    " (is zringd running, and may this user use its socket? "
                                    "it is group zring's)");
}

int status(const Args& a) {
  const std::string endpoint =
      a.endpoint ? *a.endpoint : endpoint_of(a.config.value_or("/etc/zring/zring.yaml"), a.node);
  DaemonStatus report;
  try {
    report = zring::client::query_status(endpoint, std::chrono::seconds(5));
  } catch (const zring::Error& e) {
    throw unanswered(e);
  }
  if (a.json)
    std::cout << zring::client::status_json(report) << "\n";
  else
    print_status(report);
  return 0;
}

// --- trace -------------------------------------------------------------------------

int trace(const Args& a) {
  std::vector<Args::Daemon> daemons = a.daemons;
  if (daemons.empty()) daemons.push_back({true, "/etc/zring/zring.yaml"});
  std::vector<zring::wire::Trace> nodes;
  for (const Args::Daemon& d : daemons) {
    const std::string endpoint = d.is_config ? endpoint_of(d.value, a.node) : d.value;
    try {
      nodes.push_back(zring::client::query_trace(endpoint, std::chrono::seconds(5)));
    } catch (const zring::Error& e) {
      throw unanswered(e);
    }
  }
  std::size_t ops = 0;
  for (const zring::wire::Trace& node : nodes) ops += node.records.size();
  if (!a.out) {
    print_table(zring::tools::trace_table(nodes));
    return 0;
  }
  std::ofstream out(*a.out, std::ios::binary | std::ios::trunc);
  out << zring::tools::chrome_trace_json(nodes);
  out.close();
  if (!out)
    throw zring::Error(zring::ErrorCode::system_error,
                       "cannot write " + *a.out + ": " + std::strerror(errno));
  std::cerr << "zringctl: wrote " << plural(ops, "op") << " of " << plural(nodes.size(), "node")
            << " to " << *a.out << " (open it in https://ui.perfetto.dev or chrome://tracing)\n";
  return 0;
}

int check_config(const Args& a) {
  if (!a.file) throw zring::Error(zring::ErrorCode::invalid_argument, "check-config needs FILE");
  const zring::RingConfig c = zring::load_config(*a.file, a.node);
  std::cout << *a.file << ": ok: " << c.nodes.size() << " nodes x " << c.local_ranks
            << " local ranks (world size " << c.world_size() << ")\n";
  for (std::size_t i = 0; i < c.nodes.size(); ++i)
    std::cout << "  " << i << "  " << c.nodes[i].name << "  " << c.nodes[i].address
              << (i == c.self_index ? "   <- self" : "") << "\n";
  std::cout << "  ipc " << c.ipc
            << (c.metrics ? ", metrics on http://" + c.metrics->listen + "/metrics" : "")
            << ", log level " << c.log_level << "\n";
  if (c.curve)
    std::cout << "  CurveZMQ on: " << c.nodes.size() << " public keys, this node's secret key in "
              << c.curve->secret_key_file << " (matches its public key)\n";
  else
    std::cout << "  CurveZMQ off: the ring port accepts any connection\n";
  return 0;
}

// Creates path with mode `mode` and writes text; never replaces a file.
void write_new_file(const std::string& path, const std::string& text, mode_t mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) {
    const int error = errno;
    throw zring::Error(
        zring::ErrorCode::invalid_argument,
        "cannot create " + path + ": " + std::strerror(error) +
            (error == EEXIST
                 ? " (keygen never replaces a key file; remove it or choose another --out)"
                 : ""));
  }
  bool ok = ::fchmod(fd, mode) == 0;  // the umask may have taken bits away; never adds any
  std::size_t done = 0;
  while (ok && done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<std::size_t>(n);
  }
  const int error = errno;
  ok = ::close(fd) == 0 && ok;
  if (!ok) {
    ::unlink(path.c_str());
    throw zring::Error(zring::ErrorCode::system_error,
                       "cannot write " + path + ": " + std::strerror(error));
  }
}

int keygen(const Args& a) {
  if (a.file)
    throw zring::Error(zring::ErrorCode::invalid_argument,
                       "keygen takes no FILE (use --out PREFIX)");
  const zring::config::KeyPair keys = zring::config::generate_key_pair();
  const std::string label = a.node ? "node '" + *a.node + "'" : std::string();
  if (!a.out) {
    std::cout << "# a CurveZMQ key pair" << (label.empty() ? "" : " for " + label)
              << "; put the secret key alone in a file of mode 0600 (or use --out PREFIX)\n"
              << "public_key: '" << keys.public_key << "'\n"
              << "secret_key: '" << keys.secret_key << "'\n";
    return 0;
  }
  const std::string secret_path = *a.out + ".key";
  const std::string public_path = *a.out + ".pub";
  write_new_file(secret_path, zring::config::secret_key_file_text(keys, label), 0600);
  try {
    write_new_file(public_path, keys.public_key + "\n", 0644);
  } catch (...) {
    ::unlink(secret_path.c_str());
    throw;
  }
  std::cerr << "zringctl: wrote the secret key to " << secret_path
            << " (mode 0600) and the public key to " << public_path << "\n";
  std::cout << "public_key: '" << keys.public_key << "'\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    if (a.command == "status") return status(a);
    if (a.command == "trace") return trace(a);
    if (a.command == "check-config") return check_config(a);
    if (a.command == "keygen") return keygen(a);
    if (a.command == "--help" || a.command == "-h" || a.command == "help") {
      std::cout << kUsage;
      return 0;
    }
    throw zring::Error(zring::ErrorCode::invalid_argument, "unknown command " + a.command);
  } catch (const zring::Error& e) {
    std::cerr << "zringctl: " << e.what() << "\n";
    if (e.code() == zring::ErrorCode::invalid_argument) std::cerr << kUsage;
    return e.code() == zring::ErrorCode::config_invalid ? 2 : 1;
  } catch (const std::exception& e) {  // never expected: every path throws zring::Error
    std::cerr << "zringctl: unexpected error: " << e.what() << "\n";
    return 1;
  }
}
