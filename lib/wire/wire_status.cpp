// wire_status.cpp - a zringd's status report (DaemonStatus, daemon_status.hpp)
// inside an IPC StatusReport: its encoder and validating reader (layout in
// wire.hpp).
#include <string>

#include "wire/msgpack_io.hpp"
#include "wire/wire.hpp"

namespace zring::wire {

using namespace detail;

const char* member_state_name(MemberState state) noexcept {
  switch (state) {
    case MemberState::self:
      return "self";
    case MemberState::up:
      return "up";
    case MemberState::live:
      return "live";
    case MemberState::down:
      return "down";
    case MemberState::mismatched:
      return "mismatched";
    case MemberState::unknown:
      break;
  }
  return "unknown";
}

namespace detail {
namespace {

constexpr std::size_t kStatusItems = 37;
constexpr std::size_t kMemberItems = 6;
constexpr std::size_t kMethodItems = 6;
constexpr std::size_t kErrorItems = 2;

void pack_status_text(Packer& p, const std::string& text) {
  pack_text(p, clip_text(text, kMaxStatusTextBytes), "a status text");
}

// The items of a report, read in order, each check naming the field.
class StatusFields {
 public:
  StatusFields(std::span<const msgpack::object> items, std::string_view context)
      : items_(items), context_(context) {}
  const msgpack::object& next() { return items_[at_++]; }
  std::uint64_t u64(std::string_view field) { return as_u64(next(), Where{context_, field}); }
  std::string text(std::string_view field) {
    return std::string(as_str(next(), kMaxStatusTextBytes, Where{context_, field}));
  }
  bool flag(std::string_view field) {
    const msgpack::object& o = next();
    if (o.type != msgpack::type::BOOLEAN) reject(Where{context_, field}, "not a boolean");
    return o.via.boolean;
  }
  std::span<const msgpack::object> list(std::string_view field, std::size_t max) {
    return as_array(next(), 0, max, Where{context_, field});
  }
  std::string_view context() const { return context_; }

 private:
  std::span<const msgpack::object> items_;
  std::string_view context_;
  std::size_t at_ = 0;
};

std::vector<MemberStatus> read_members(std::span<const msgpack::object> list,
                                       std::string_view context) {
  std::vector<MemberStatus> members;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const auto m = as_array(list[i], kMemberItems, kMemberItems, Where{context, "members", i});
    const std::string where = std::string(context) + ", members[" + std::to_string(i) + "]";
    StatusFields f(m, where);
    MemberStatus member;
    member.name = f.text("name");
    member.address = f.text("address");
    member.first_rank = f.u64("first_rank");
    member.state = static_cast<MemberState>(as_kind(
        f.next(), static_cast<std::uint64_t>(MemberState::mismatched), Where{where, "state"}));
    member.data_on_tcp = f.flag("data_on_tcp");
    member.mismatch = f.text("mismatch");
    members.push_back(std::move(member));
  }
  return members;
}

std::vector<MethodStatus> read_methods(std::span<const msgpack::object> list,
                                       std::string_view context) {
  std::vector<MethodStatus> methods;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const auto m = as_array(list[i], kMethodItems, kMethodItems, Where{context, "methods", i});
    const std::string where = std::string(context) + ", methods[" + std::to_string(i) + "]";
    StatusFields f(m, where);
    MethodStatus method;
    method.method = f.text("method");
    method.ops = f.u64("ops");
    method.failed = f.u64("failed");
    method.raw_bytes = f.u64("raw_bytes");
    method.wire_bytes_sent = f.u64("wire_bytes_sent");
    method.wire_bytes_received = f.u64("wire_bytes_received");
    methods.push_back(std::move(method));
  }
  return methods;
}

std::vector<ErrorCount> read_errors(std::span<const msgpack::object> list,
                                    std::string_view context) {
  std::vector<ErrorCount> errors;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const auto e = as_array(list[i], kErrorItems, kErrorItems, Where{context, "errors", i});
    const std::string where = std::string(context) + ", errors[" + std::to_string(i) + "]";
    StatusFields f(e, where);
    ErrorCount error;
    error.kind = f.text("kind");
    error.count = f.u64("count");
    errors.push_back(std::move(error));
  }
  return errors;
}

}  // namespace

void pack_daemon_status(Packer& p, const DaemonStatus& s) {
  // Longer lists are cut (and say so) rather than refused by the reader.
  const std::size_t members = std::min(s.members.size(), kMaxStatusMembers);
  const std::size_t ring_members = std::min(s.ring_members.size(), kMaxStatusMembers);
  const std::size_t methods = std::min(s.methods.size(), kMaxStatusMethods);
  const std::size_t errors = std::min(s.errors.size(), kMaxStatusErrors);
  p.pack_array(kStatusItems);
  pack_status_text(p, s.node);
  pack_status_text(p, s.version);
  p.pack_uint64(s.started);
  p.pack_uint64(s.now);
  p.pack_uint64(s.world_size);
  p.pack_uint64(s.local_ranks);
  p.pack_uint64(s.first_rank);
  p.pack(s.ring_up);
  p.pack_uint64(s.generation);
  pack_status_text(p, s.ring_reason);
  p.pack_uint64(s.ring_since);
  p.pack_array(static_cast<std::uint32_t>(ring_members));
  for (std::size_t i = 0; i < ring_members; ++i) pack_status_text(p, s.ring_members[i]);
  p.pack_uint64(s.min_nodes);
  pack_status_text(p, s.last_change);
  p.pack_uint64(s.formations);
  p.pack_uint64(s.dropped);
  p.pack_uint64(s.malformed);
  pack_status_text(p, s.last_drop);
  p.pack(s.curve);
  p.pack_uint64(s.auth_rejected);
  p.pack_uint64(s.handshakes_failed);
  p.pack_uint64(s.disconnects);
  pack_status_text(p, s.last_rejection);
  pack_status_text(p, s.last_handshake_failure);
  p.pack_array(static_cast<std::uint32_t>(members));
  for (std::size_t i = 0; i < members; ++i) {
    const MemberStatus& m = s.members[i];
    p.pack_array(kMemberItems);
    pack_status_text(p, m.name);
    pack_status_text(p, m.address);
    p.pack_uint64(m.first_rank);
    p.pack_uint8(static_cast<std::uint8_t>(m.state));
    p.pack(m.data_on_tcp);
    pack_status_text(p, m.mismatch);
  }
  p.pack(s.members_cut || members < s.members.size());
  p.pack_uint64(s.ops_done);
  p.pack_uint64(s.ops_failed);
  p.pack_uint64(s.ops_rung);
  p.pack_array(static_cast<std::uint32_t>(errors));
  for (std::size_t i = 0; i < errors; ++i) {
    p.pack_array(kErrorItems);
    pack_status_text(p, s.errors[i].kind);
    p.pack_uint64(s.errors[i].count);
  }
  pack_status_text(p, s.last_error);
  p.pack_uint64(s.last_error_at);
  p.pack_array(static_cast<std::uint32_t>(methods));
  for (std::size_t i = 0; i < methods; ++i) {
    const MethodStatus& m = s.methods[i];
    p.pack_array(kMethodItems);
    pack_status_text(p, m.method);
    p.pack_uint64(m.ops);
    p.pack_uint64(m.failed);
    p.pack_uint64(m.raw_bytes);
    p.pack_uint64(m.wire_bytes_sent);
    p.pack_uint64(m.wire_bytes_received);
  }
  p.pack(s.methods_cut || methods < s.methods.size());
  p.pack_uint64(s.idle_bytes_sent);
  p.pack_uint64(s.idle_bytes_received);
  pack_status_text(p, s.metrics);
}

DaemonStatus read_daemon_status(const msgpack::object& o, std::string_view context) {
  const std::string where = std::string(context) + ", status";
  StatusFields f(as_array(o, kStatusItems, kStatusItems, Where{context, "status"}), where);
  DaemonStatus s;
  s.node = f.text("node");
  s.version = f.text("version");
  s.started = f.u64("started");
  s.now = f.u64("now");
  s.world_size = f.u64("world_size");
  s.local_ranks = f.u64("local_ranks");
  s.first_rank = f.u64("first_rank");
  s.ring_up = f.flag("ring_up");
  s.generation = f.u64("generation");
  s.ring_reason = f.text("ring_reason");
  s.ring_since = f.u64("ring_since");
  const auto ring = f.list("ring_members", kMaxStatusMembers);
  for (std::size_t i = 0; i < ring.size(); ++i)
    s.ring_members.emplace_back(
        as_str(ring[i], kMaxStatusTextBytes, Where{where, "ring_members", i}));
  s.min_nodes = f.u64("min_nodes");
  s.last_change = f.text("last_change");
  s.formations = f.u64("formations");
  s.dropped = f.u64("dropped");
  s.malformed = f.u64("malformed");
  s.last_drop = f.text("last_drop");
  s.curve = f.flag("curve");
  s.auth_rejected = f.u64("auth_rejected");
  s.handshakes_failed = f.u64("handshakes_failed");
  s.disconnects = f.u64("disconnects");
  s.last_rejection = f.text("last_rejection");
  s.last_handshake_failure = f.text("last_handshake_failure");
  s.members = read_members(f.list("members", kMaxStatusMembers), where);
  s.members_cut = f.flag("members_cut");
  s.ops_done = f.u64("ops_done");
  s.ops_failed = f.u64("ops_failed");
  s.ops_rung = f.u64("ops_rung");
  s.errors = read_errors(f.list("errors", kMaxStatusErrors), where);
  s.last_error = f.text("last_error");
  s.last_error_at = f.u64("last_error_at");
  s.methods = read_methods(f.list("methods", kMaxStatusMethods), where);
  s.methods_cut = f.flag("methods_cut");
  s.idle_bytes_sent = f.u64("idle_bytes_sent");
  s.idle_bytes_received = f.u64("idle_bytes_received");
  s.metrics = f.text("metrics");
  return s;
}

}  // namespace detail
}  // namespace zring::wire
