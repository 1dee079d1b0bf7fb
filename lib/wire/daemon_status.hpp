// daemon_status.hpp - what a zringd reports of itself to `zringctl status`
// (internal; it travels in an IPC StatusReport, wire.hpp).
//
// The report is data: zringd fills it from its stats and its ring file,
// zringctl decodes it into the same struct and renders it (as text, or as
// the JSON of `zringctl status --json`, lib/client/status_json.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace zring::wire {

// What a zringd knows of a listed node. Values are part of the wire format:
// never renumber.
enum class MemberState : std::uint8_t {
  self = 1,        // this node
  up = 2,          // a member of the ring this node is up in
  live = 3,        // heard within the timeout, not in the ring
  down = 4,        // silent for longer than the timeout
  unknown = 5,     // not heard yet since this node started
  mismatched = 6,  // its ring file's settings differ from this node's: left out
};
// "self", "up", "live", "down", "unknown", "mismatched" (the report's JSON).
[[nodiscard]] const char* member_state_name(MemberState state) noexcept;

struct MemberStatus {
  std::string name;
  std::string address;
  std::uint64_t first_rank = 0;
  MemberState state = MemberState::unknown;
  // Ring messages to it go on a TCP connection of their own (tcp_data),
  // not on ZeroMQ; false for this node.
  bool data_on_tcp = false;
  // mismatched: what differs, "local_ranks 2 there, 1 here" (wire::settings_difference).
  std::string mismatch = {};
  bool operator==(const MemberStatus&) const = default;
};

// Ops and ring traffic of one method (its text, "quant:8"; or "broadcast").
struct MethodStatus {
  std::string method;
  std::uint64_t ops = 0;  // succeeded
  std::uint64_t failed = 0;
  std::uint64_t raw_bytes = 0;  // what a dense float32 ring would have moved
  std::uint64_t wire_bytes_sent = 0;
  std::uint64_t wire_bytes_received = 0;
  bool operator==(const MethodStatus&) const = default;
};

// Failed ops of one error kind ("timeout").
struct ErrorCount {
  std::string kind;
  std::uint64_t count = 0;
  bool operator==(const ErrorCount&) const = default;
};

// Times are seconds since the Unix epoch; texts are cut to what the
// decoder accepts (kMaxStatusTextBytes) by the daemon.
struct DaemonStatus {
  std::string node;
  std::string version;
  std::uint64_t started = 0;
  std::uint64_t now = 0;
  std::uint64_t world_size = 0;  // of the full ring file
  std::uint64_t local_ranks = 0;
  std::uint64_t first_rank = 0;
  // The ring.
  bool ring_up = false;
  std::uint64_t generation = 0;
  std::string ring_reason;  // why not up
  std::uint64_t ring_since = 0;
  std::vector<std::string> ring_members;  // by name, in ring order
  std::uint64_t min_nodes = 0;            // the quorum
  std::string last_change;
  std::uint64_t formations = 0;
  std::uint64_t dropped = 0;
  std::uint64_t malformed = 0;
  std::string last_drop;
  // The ring port.
  bool curve = false;
  std::uint64_t auth_rejected = 0;
  std::uint64_t handshakes_failed = 0;
  std::uint64_t disconnects = 0;
  std::string last_rejection;
  std::string last_handshake_failure;
  // Every listed node, in file order; members_cut: some were left out.
  std::vector<MemberStatus> members;
  bool members_cut = false;
  // Ops.
  std::uint64_t ops_done = 0;
  std::uint64_t ops_failed = 0;
  std::uint64_t ops_rung = 0;      // of ops_done: rung on the bell (wire/bell.hpp)
  std::vector<ErrorCount> errors;  // by kind, sorted
  std::string last_error;
  std::uint64_t last_error_at = 0;    // 0: no error yet
  std::vector<MethodStatus> methods;  // by method text, sorted; methods_cut: some left out
  bool methods_cut = false;
  std::uint64_t idle_bytes_sent = 0;  // ring traffic between ops
  std::uint64_t idle_bytes_received = 0;
  std::string metrics;  // the metrics endpoint (host:port), empty when off

  bool operator==(const DaemonStatus&) const = default;
};

// What a decoder accepts in a DaemonStatus.
inline constexpr std::size_t kMaxStatusTextBytes = 4096;  // any one text
inline constexpr std::size_t kMaxStatusMembers = 4096;    // members and ring_members
inline constexpr std::size_t kMaxStatusMethods = 1024;
inline constexpr std::size_t kMaxStatusErrors = 256;

}  // namespace zring::wire
