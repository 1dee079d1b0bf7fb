#include "client/status_json.hpp"

#include <algorithm>
#include <string_view>
#include <vector>

namespace zring::client {
namespace {

constexpr std::size_t kBudget = 48 * 1024;  // what the lists may add up to

std::string json_string(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20) {
      out += "\\u00";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string json_bool(bool b) { return b ? "true" : "false"; }

std::string json_names(const std::vector<std::string>& names) {
  std::string out = "[";
  for (std::size_t i = 0; i < names.size(); ++i) out += (i == 0 ? "" : ",") + json_string(names[i]);
  return out + "]";
}

std::string json_members(const wire::DaemonStatus& s, std::size_t budget) {
  std::string out = "[";
  for (std::size_t n = 0; n < s.members.size(); ++n) {
    const wire::MemberStatus& m = s.members[n];
    std::string member = "{\"name\":" + json_string(m.name) +
                         ",\"address\":" + json_string(m.address) +
                         ",\"first_rank\":" + std::to_string(m.first_rank) +
                         ",\"state\":" + json_string(wire::member_state_name(m.state)) +
                         ",\"data_on_tcp\":" + json_bool(m.data_on_tcp) +
                         ",\"mismatch\":" + json_string(m.mismatch) + "}";
    if (out.size() + member.size() > budget) return out + "],\"members_cut\":true";
    out += (n == 0 ? "" : ",") + member;
  }
  return out + "],\"members_cut\":" + json_bool(s.members_cut);
}

std::string json_methods(const wire::DaemonStatus& s, std::size_t budget) {
  std::string out = "{";
  for (const wire::MethodStatus& m : s.methods) {
    std::string entry = json_string(m.method) + ":{\"ops\":" + std::to_string(m.ops) +
                        ",\"failed\":" + std::to_string(m.failed) +
                        ",\"raw_bytes\":" + std::to_string(m.raw_bytes) +
                        ",\"wire_bytes_sent\":" + std::to_string(m.wire_bytes_sent) +
                        ",\"wire_bytes_received\":" + std::to_string(m.wire_bytes_received) + "}";
    if (out.size() + entry.size() > budget) return out + "},\"methods_cut\":true";
    out += (out.size() == 1 ? "" : ",") + entry;
  }
  return out + "},\"methods_cut\":" + json_bool(s.methods_cut);
}

}  // namespace

std::string status_json(const wire::DaemonStatus& s) {
  std::string out =
      "{\"node\":" + json_string(s.node) + ",\"version\":" + json_string(s.version) +
      ",\"ring_up\":" + json_bool(s.ring_up) + ",\"generation\":" + std::to_string(s.generation) +
      ",\"ops_done\":" + std::to_string(s.ops_done) +
      ",\"ops_failed\":" + std::to_string(s.ops_failed) +
      ",\"ops_rung\":" + std::to_string(s.ops_rung) + ",\"dropped\":" + std::to_string(s.dropped) +
      ",\"malformed\":" + std::to_string(s.malformed) +
      ",\"last_drop\":" + json_string(s.last_drop) + ",\"curve\":" + json_bool(s.curve) +
      ",\"auth_rejected\":" + std::to_string(s.auth_rejected) +
      ",\"handshakes_failed\":" + std::to_string(s.handshakes_failed) +
      ",\"disconnects\":" + std::to_string(s.disconnects) +
      ",\"last_rejection\":" + json_string(s.last_rejection) +
      ",\"last_handshake_failure\":" + json_string(s.last_handshake_failure) +
      ",\"formations\":" + std::to_string(s.formations) +
      ",\"ring_members\":" + json_names(s.ring_members) +
      ",\"min_nodes\":" + std::to_string(s.min_nodes) +
      ",\"last_change\":" + json_string(s.last_change) +
      ",\"ring_reason\":" + json_string(s.ring_reason) +
      ",\"ring_since\":" + std::to_string(s.ring_since) +
      ",\"started\":" + std::to_string(s.started) + ",\"now\":" + std::to_string(s.now) +
      ",\"world_size\":" + std::to_string(s.world_size) +
      ",\"local_ranks\":" + std::to_string(s.local_ranks) +
      ",\"first_rank\":" + std::to_string(s.first_rank) +
      ",\"last_error\":" + json_string(s.last_error) +
      ",\"last_error_at\":" + std::to_string(s.last_error_at) +
      ",\"idle_bytes_sent\":" + std::to_string(s.idle_bytes_sent) +
      ",\"idle_bytes_received\":" + std::to_string(s.idle_bytes_received) +
      ",\"metrics\":" + json_string(s.metrics) + ",\"errors\":{";
  for (std::size_t i = 0; i < s.errors.size(); ++i)
    out += (i == 0 ? "" : ",") + json_string(s.errors[i].kind) + ":" +
           std::to_string(s.errors[i].count);
  out += "},\"methods\":" + json_methods(s, kBudget / 3);
  out += ",\"members\":" + json_members(s, kBudget - std::min(out.size(), kBudget / 2));
  return out + "}";
}

}  // namespace zring::client
