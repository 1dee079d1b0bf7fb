// membership.hpp - who is in the ring: the membership protocol as a state
// machine without sockets (internal; docs/membership.md describes it).
//
// The ring file lists the nodes that may be in the ring. The ring is the
// live subset of them, in the file's order, when it has at least min_nodes
// members (a quorum). Every node sends every listed node a HEARTBEAT each
// heartbeat interval, saying which generation it is in and, when it is up,
// the ring it is up in. A node is
//   - live when it was heard within `timeout`,
//   - silent when it was not heard for longer (or, for a node never heard,
//     when `timeout` has passed since this node started), and
//   - unknown before that: a node that has just started waits that long
//     for the others before it forms a ring without them.
// The coordinator is the first listed node that is not silent. It forms a
// generation g of the live nodes by sending FORM(g, members) round that
// ring; a node adopts it when it comes from its predecessor in the
// proposal, names the node it sees as coordinator, and has a quorum. When
// FORM(g) is back, UP(g) goes round, and a node is up once UP(g) reaches it.
// An up node goes down when a member of its ring is silent, and asks its
// coordinator for a new ring (REFORM); the coordinator also forms a new
// generation when a member of its ring left it (restarted) or, between two
// of its own ops, to take in a listed node that is live but not a member.
//
// Every node must share the ring file's RingSettings (its node list, its
// local_ranks, ...): a listed node whose last HEARTBEAT or FORM carried
// others is left out as if silent until one says the same as this node's,
// and the reasons this node gives name what differs.
//
// Inputs are decoded headers (already checked to come from the listed node
// they name) and timer ticks; outputs are the messages to send, and a
// break: the ring this node was up in ended, so an op in flight fails.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "collective/link.hpp"
#include "status.hpp"
#include "wire/wire.hpp"

namespace zring::transport {

struct MembershipOptions {
  std::vector<std::string> labels;  // per listed node, for messages: "node 'b' (tcp://...)"
  std::vector<std::string> names;   // per listed node: its name
  std::size_t self = 0;
  std::size_t min_nodes = 1;  // a quorum: 1..listed
  collective::Clock::duration timeout = std::chrono::seconds(10);
  collective::Clock::duration heartbeat = std::chrono::milliseconds(500);
  // This node's, sent in its membership messages; min_nodes is set from the
  // field above.
  wire::RingSettings settings;
};

// A message the machine wants sent to listed node `to`.
struct MembershipSend {
  std::size_t to = 0;
  wire::RingHeader header;
};

// What this node knows of a listed node.
enum class PeerState : std::uint8_t {
  self,        // this node
  member,      // in the ring this node is up in
  live,        // heard within the timeout, not in the ring (joining, or the ring is down)
  silent,      // not heard for longer than the timeout
  unknown,     // not heard yet, and this node started less than a timeout ago
  mismatched,  // its last membership message had other settings (left out as if silent)
};
[[nodiscard]] const char* peer_state_name(PeerState state) noexcept;
// "2000 ms"
[[nodiscard]] std::string ms_text(collective::Clock::duration d);

class Membership {
  using Deadline = collective::Deadline;

 public:
  Membership(MembershipOptions options, std::uint64_t seed, Deadline now);

  // --- inputs -----------------------------------------------------------------
  // Every message from listed node `from`, data too (it proves liveness).
  void heard(std::size_t from, const wire::RingHeader& header, Deadline now);
  // Timers: heartbeats, silent members, forming.
  void tick(Deadline now);
  // This node's ops: the coordinator takes new members in only between them.
  void op_began() noexcept { in_op_ = true; }
  void op_ended() noexcept { in_op_ = false; }
  // The ring this node is up in broke (an op failed in a way the others may
  // not know of, a member is silent): down, and (ask_reform) the
  // coordinator is asked for a new generation.
  void fail(const std::string& why, bool ask_reform, Deadline now);
  // An op of this node waited a timeout in vain: if a member has missed
  // its last two heartbeats (it died, and its silence is about to be
  // noticed), the ring fails as for a silent member, and true. Otherwise
  // the op timed out on a node that is alive.
  bool fail_if_a_member_is_missing(Deadline now);

  // --- outputs ----------------------------------------------------------------
  [[nodiscard]] std::vector<MembershipSend> take_sends();
  // Set once when the ring this node was up in (or forming) ended: by going
  // down (peer_lost) or by adopting a new generation (aborted).
  [[nodiscard]] std::optional<Status> take_break();
  // True once after each new generation this node adopted.
  [[nodiscard]] bool take_adopted() noexcept;

  // --- state ------------------------------------------------------------------
  [[nodiscard]] bool up() const noexcept { return up_; }
  [[nodiscard]] std::uint64_t generation() const noexcept { return generation_; }
  // The ring's members (listed indices, file order) of the current or
  // forming generation; this node's position in it.
  [[nodiscard]] const std::vector<std::uint32_t>& members() const noexcept { return members_; }
  [[nodiscard]] std::size_t position() const noexcept;
  [[nodiscard]] std::size_t successor() const noexcept;    // a listed index
  [[nodiscard]] std::size_t predecessor() const noexcept;  // a listed index
  [[nodiscard]] bool is_member(std::size_t node) const noexcept;
  [[nodiscard]] const std::string& down_reason() const noexcept { return down_reason_; }
  [[nodiscard]] PeerState peer(std::size_t node, Deadline now) const noexcept;
  // What differs between a listed node's settings and this node's
  // (wire::settings_difference); empty while they agree, or before it said.
  [[nodiscard]] const std::string& mismatch(std::size_t node) const noexcept;
  [[nodiscard]] std::size_t min_nodes() const noexcept { return options_.min_nodes; }
  [[nodiscard]] std::size_t listed() const noexcept { return options_.names.size(); }
  // The last change of membership: "[a b c d] -> [a b d]: why" (empty before the first ring).
  [[nodiscard]] const std::string& last_change() const noexcept { return last_change_; }
  // The first listed node that is not silent: who forms rings.
  [[nodiscard]] std::size_t coordinator(Deadline now) const noexcept;
  // When tick() next has something to do.
  [[nodiscard]] Deadline next_timer() const noexcept;
  // "[a b d]": names of listed nodes.
  [[nodiscard]] std::string names_of(const std::vector<std::uint32_t>& nodes) const;

 private:
  struct Peer {
    std::optional<Deadline> heard;        // last message
    bool confirmed = false;               // said this generation since this node adopted it
    bool left = false;                    // then said another one
    std::vector<std::uint32_t> reported;  // the ring its last heartbeat said it is up in
    std::string mismatch;                 // see mismatch(): it counts as silent
  };

  [[nodiscard]] bool live(std::size_t node, Deadline now) const noexcept;
  [[nodiscard]] bool silent(std::size_t node, Deadline now) const noexcept;
  [[nodiscard]] std::size_t next_in(const std::vector<std::uint32_t>& ring, std::size_t node) const;
  [[nodiscard]] std::size_t prev_in(const std::vector<std::uint32_t>& ring, std::size_t node) const;
  void on_heartbeat(std::size_t from, const wire::RingHeader& header, Deadline now);
  void on_form(std::size_t from, const wire::RingHeader& header, Deadline now);
  void on_up(std::size_t from, const wire::RingHeader& header);
  void on_reform(std::size_t from, const wire::RingHeader& header, Deadline now);
  void watch_members(Deadline now);
  void fail_silent(std::uint32_t member, Deadline now);
  [[nodiscard]] std::string mismatched_ones() const;
  void try_form(Deadline now);
  void propose(const std::vector<std::uint32_t>& ring, const std::string& why, Deadline now);
  void adopt(std::uint64_t generation, std::vector<std::uint32_t> ring, const std::string& why);
  void go_up();
  void go_down(const std::string& why, Deadline now);
  void send(std::size_t to, wire::RingHeader header);
  [[nodiscard]] wire::RingHeader control(wire::RingKind kind, std::uint64_t generation) const;

  MembershipOptions options_;
  std::mt19937_64 random_;
  Deadline started_;
  std::vector<Peer> peers_;
  std::vector<MembershipSend> sends_;
  std::optional<Status> break_;
  bool adopted_ = false;
  bool in_op_ = false;

  std::uint64_t generation_ = 0;  // adopted; 0: none yet
  std::vector<std::uint32_t> members_;
  std::vector<std::uint32_t> last_up_;  // the members of the last ring this node was up in
  bool up_ = false;
  // Since when this node waits for the UP of the generation it adopted from
  // a FORM; meanwhile it does not ask for a new ring (a REFORM of that
  // generation would end it at the coordinator, which may be up in it).
  std::optional<Deadline> awaiting_up_since_;
  std::uint64_t forming_ = 0;  // coordinator: the generation it proposed
  std::vector<std::uint32_t> proposed_;
  Deadline forming_since_;  // when its proposals began
  std::vector<Deadline>
      passed_over_until_;  // per node: not taken in before (it did not pass a FORM on)
  std::string down_reason_ = "the ring has not formed yet";
  std::string last_change_;
  Deadline next_heartbeat_;
  Deadline next_form_;
};

}  // namespace zring::transport
