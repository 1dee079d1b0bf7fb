#include "transport/membership.hpp"

#include <algorithm>
#include <utility>

namespace zring::transport {
namespace {

using collective::Clock;
using wire::RingHeader;
using wire::RingKind;

}  // namespace

std::string ms_text(collective::Clock::duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
}

const char* peer_state_name(PeerState state) noexcept {
  switch (state) {
    case PeerState::self:
      return "self";
    case PeerState::member:
      return "up";
    case PeerState::live:
      return "live";
    case PeerState::silent:
      return "down";
    case PeerState::unknown:
      return "unknown";
    case PeerState::mismatched:
      return "mismatched";
  }
  return "unknown";
}

Membership::Membership(MembershipOptions options, std::uint64_t seed, Deadline now)
    : options_(std::move(options)),
      random_(seed),
      started_(now),
      peers_(options_.names.size()),
      passed_over_until_(options_.names.size(), now),
      next_heartbeat_(now),
      next_form_(now) {
  options_.settings.min_nodes = static_cast<std::uint32_t>(options_.min_nodes);
  if (listed() == 1) try_form(now);
}

// --- what this node knows of the others ------------------------------------------

bool Membership::live(std::size_t node, Deadline now) const noexcept {
  if (node == options_.self) return true;
  const Peer& p = peers_[node];
  return p.mismatch.empty() && p.heard && now - *p.heard <= options_.timeout;
}

bool Membership::silent(std::size_t node, Deadline now) const noexcept {
  if (node == options_.self) return false;
  const Peer& p = peers_[node];
  return !p.mismatch.empty() || now - p.heard.value_or(started_) > options_.timeout;
}

PeerState Membership::peer(std::size_t node, Deadline now) const noexcept {
  if (node == options_.self) return PeerState::self;
  if (!peers_[node].mismatch.empty()) return PeerState::mismatched;
  if (silent(node, now)) return PeerState::silent;
  if (up_ && is_member(node)) return PeerState::member;
  return live(node, now) ? PeerState::live : PeerState::unknown;
}

// A node never heard from since this one started is passed over too when a
// live node is up in a ring without it: it is not coming back in time.
std::size_t Membership::coordinator(Deadline now) const noexcept {
  for (std::size_t n = 0; n < listed(); ++n) {
    if (n == options_.self || live(n, now)) return n;
    if (silent(n, now)) continue;
    const bool passed_over = std::any_of(peers_.begin(), peers_.end(), [&](const Peer& p) {
      const std::size_t other = static_cast<std::size_t>(&p - peers_.data());
      return live(other, now) && !p.reported.empty() &&
             std::find(p.reported.begin(), p.reported.end(), n) == p.reported.end();
    });
    if (!passed_over) return n;
  }
  return options_.self;
}

const std::string& Membership::mismatch(std::size_t node) const noexcept {
  static const std::string none;
  return node < listed() ? peers_[node].mismatch : none;
}

// "; with other settings: node 'b' (...): local_ranks 1 there, 2 here", or "".
std::string Membership::mismatched_ones() const {
  std::string text;
  for (std::size_t n = 0; n < listed(); ++n) {
    if (peers_[n].mismatch.empty()) continue;
    text += (text.empty() ? "; with other settings: " : "; ") + options_.labels[n] + ": " +
            peers_[n].mismatch;
  }
  return text;
}

bool Membership::is_member(std::size_t node) const noexcept {
  return std::find(members_.begin(), members_.end(), node) != members_.end();
}

std::size_t Membership::position() const noexcept {
  const auto at = std::find(members_.begin(), members_.end(), options_.self);
  return at == members_.end() ? 0 : static_cast<std::size_t>(at - members_.begin());
}

std::size_t Membership::next_in(const std::vector<std::uint32_t>& ring, std::size_t node) const {
  const auto at = std::find(ring.begin(), ring.end(), node);
  if (at == ring.end() || ring.size() == 1) return node;
  return std::next(at) == ring.end() ? ring.front() : *std::next(at);
}

std::size_t Membership::prev_in(const std::vector<std::uint32_t>& ring, std::size_t node) const {
  const auto at = std::find(ring.begin(), ring.end(), node);
  if (at == ring.end() || ring.size() == 1) return node;
  return at == ring.begin() ? ring.back() : *std::prev(at);
}

std::size_t Membership::successor() const noexcept { return next_in(members_, options_.self); }
std::size_t Membership::predecessor() const noexcept { return prev_in(members_, options_.self); }

std::string Membership::names_of(const std::vector<std::uint32_t>& nodes) const {
  std::string text = "[";
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (i != 0) text += ' ';
    text += nodes[i] < listed() ? options_.names[nodes[i]] : "#" + std::to_string(nodes[i]);
  }
  return text + "]";
}

collective::Deadline Membership::next_timer() const noexcept {
  Deadline next = next_heartbeat_;
  if (!up_) return std::min(next, next_form_);
  for (const std::uint32_t m : members_)
    if (m != options_.self)
      next = std::min(next, peers_[m].heard.value_or(started_) + options_.timeout);
  return next;
}

// --- inputs ----------------------------------------------------------------------

void Membership::heard(std::size_t from, const RingHeader& header, Deadline now) {
  if (from >= listed() || from == options_.self) return;
  Peer& p = peers_[from];
  // Judged on the messages this node acts on whatever their generation: an
  // UP or REFORM of another generation is ignored, so a stale or forged one
  // must not mark a node either (its heartbeats come every heartbeat_ms).
  if (header.kind == RingKind::heartbeat || header.kind == RingKind::form)
    p.mismatch = wire::settings_difference(options_.settings, header.settings);
  if (!p.mismatch.empty()) return;  // left out: as if not heard
  p.heard = now;
  if (generation_ != 0 && header.generation == generation_ && header.kind != RingKind::form)
    p.confirmed = true;
  switch (header.kind) {
    case RingKind::heartbeat:
      on_heartbeat(from, header, now);
      return;
    case RingKind::form:
      on_form(from, header, now);
      return;
    case RingKind::up:
      on_up(from, header);
      return;
    case RingKind::reform:
      on_reform(from, header, now);
      return;
    case RingKind::data:
    case RingKind::abort:
    case RingKind::data_via_tcp:  // the transport's (tcp_data.hpp): never handed here
    case RingKind::data_via_zmq:
      return;
  }
}

// A member that said this generation and now says another one left it (it
// restarted, or went on to a ring without this node). What it says of its
// ring lets a node that just started pass over nodes that are gone.
void Membership::on_heartbeat(std::size_t from, const RingHeader& header, Deadline) {
  Peer& p = peers_[from];
  if (!header.members.empty()) p.reported = header.members;
  if (p.confirmed && header.generation != generation_) p.left = true;
}

void Membership::on_form(std::size_t from, const RingHeader& header, Deadline now) {
  const std::vector<std::uint32_t>& ring = header.members;
  if (header.origin == options_.self) {  // our proposal came back round
    if (forming_ != 0 && header.generation == forming_ && ring == proposed_ &&
        from == prev_in(proposed_, options_.self)) {
      adopt(forming_, proposed_, header.text);
      forming_ = 0;
      go_up();
      send(successor(), control(RingKind::up, generation_));
    }
    return;
  }
  // What the origin proposes tells which nodes it goes on without.
  if (header.origin < listed() && !ring.empty()) peers_[header.origin].reported = ring;
  const bool mine = std::find(ring.begin(), ring.end(), options_.self) != ring.end();
  const bool listed_only =
      std::all_of(ring.begin(), ring.end(), [&](std::uint32_t n) { return n < listed(); });
  if (!mine || !listed_only || ring.size() < options_.min_nodes || ring.front() != header.origin ||
      from != prev_in(ring, options_.self) || header.origin != coordinator(now))
    return;  // not a ring this node can be in now; the coordinator tries again
  if (header.generation != generation_ || up_) {
    adopt(header.generation, ring, header.text);
    awaiting_up_since_ = now;
  }
  RingHeader form = control(RingKind::form, header.generation);
  form.members = ring;
  form.origin = header.origin;
  form.text = header.text;  // passed on, so every node can name why
  send(next_in(ring, options_.self), std::move(form));
}

void Membership::on_up(std::size_t from, const RingHeader& header) {
  if (header.generation != generation_ || up_ || forming_ != 0 || from != predecessor()) return;
  go_up();
  if (successor() != header.origin) {
    RingHeader up = control(RingKind::up, generation_);
    up.origin = header.origin;
    send(successor(), std::move(up));
  }
}

// A member of the coordinator's ring lost a node of it (or failed an op):
// a new generation. Requests from other generations are stale: their
// senders adopt the current one when its FORM reaches them.
void Membership::on_reform(std::size_t from, const RingHeader& header, Deadline now) {
  if (!up_ || coordinator(now) != options_.self || !is_member(from) ||
      header.generation != generation_)
    return;
  go_down("node '" + options_.names[from] + "' asked for a new ring: " + header.text, now);
}

void Membership::tick(Deadline now) {
  if (now >= next_heartbeat_) {
    for (std::size_t n = 0; n < listed(); ++n) {
      if (n == options_.self) continue;
      RingHeader beat = control(RingKind::heartbeat, generation_);
      if (up_) beat.members = members_;
      send(n, std::move(beat));
    }
    next_heartbeat_ = now + options_.heartbeat;
  }
  if (up_) watch_members(now);
  if (!up_ && now >= next_form_) try_form(now);
}

void Membership::fail(const std::string& why, bool ask_reform, Deadline now) {
  if (listed() == 1) return;
  go_down(why, now);
  const std::size_t c = coordinator(now);
  if (ask_reform && c != options_.self) {
    RingHeader reform = control(RingKind::reform, generation_);
    reform.origin = static_cast<std::uint32_t>(options_.self);
    reform.text = why;
    send(c, std::move(reform));
  }
}

// --- forming -----------------------------------------------------------------------

void Membership::watch_members(Deadline now) {
  for (const std::uint32_t m : members_) {
    if (m == options_.self) continue;
    if (!peers_[m].mismatch.empty()) {
      fail(options_.labels[m] + " has other settings than this node (" + peers_[m].mismatch +
               "): its ring file differs, and it stays out of the ring until they agree",
           true, now);
      return;
    }
    if (silent(m, now)) {
      fail_silent(m, now);
      return;
    }
    if (peers_[m].left) {
      fail(options_.labels[m] + " is in another ring generation (it restarted?)", true, now);
      return;
    }
  }
  if (in_op_ || coordinator(now) != options_.self) return;
  for (std::size_t n = 0; n < listed(); ++n) {
    if (is_member(n) || !live(n, now) || passed_over_until_[n] > now) continue;
    // Between two ops of this node: the ring takes the node in.
    go_down("taking in node '" + options_.names[n] + "'", now);
    return;
  }
}

void Membership::fail_silent(std::uint32_t member, Deadline now) {
  fail("nothing heard from " + options_.labels[member] + " for " +
           ms_text(now - peers_[member].heard.value_or(started_)) + " (is its zringd running?)",
       true, now);
}

bool Membership::fail_if_a_member_is_missing(Deadline now) {
  if (!up_) return false;
  using collective::Clock;
  const Clock::duration missed =
      options_.timeout - std::min<Clock::duration>(2 * options_.heartbeat, options_.timeout / 2);
  for (const std::uint32_t m : members_) {
    if (m == options_.self || now - peers_[m].heard.value_or(started_) <= missed) continue;
    fail_silent(m, now);
    return true;
  }
  return false;
}

// Every node says when it sees no quorum; the coordinator forms a ring of
// the live nodes when it does, the others ask it to.
void Membership::try_form(Deadline now) {
  next_form_ = now + std::max<Clock::duration>(options_.heartbeat, std::chrono::milliseconds(200));
  // Proposals that do not come back for half a timeout: the nodes they take
  // in anew (not in the last ring) are left out for a while, so that one
  // node that cannot be reached both ways keeps no ring down (the ops that
  // wait for the ring wait a timeout).
  if (forming_ != 0 && now - forming_since_ > options_.timeout / 2) {
    for (const std::uint32_t n : proposed_) {
      if (std::find(last_up_.begin(), last_up_.end(), n) != last_up_.end()) continue;
      passed_over_until_[n] = now + 10 * options_.timeout;
      last_change_ = "node '" + options_.names[n] + "' did not pass on a FORM within " +
                     ms_text(options_.timeout / 2) + ": the ring goes on without it for " +
                     ms_text(10 * options_.timeout);
    }
    forming_since_ = now;
  }
  std::vector<std::uint32_t> ring, waiting;
  for (std::size_t n = 0; n < listed(); ++n) {
    if (live(n, now) && passed_over_until_[n] <= now)
      ring.push_back(static_cast<std::uint32_t>(n));
    else if (!live(n, now) && !silent(n, now))
      waiting.push_back(static_cast<std::uint32_t>(n));
  }
  if (waiting.empty() && ring.size() < options_.min_nodes) {
    std::vector<std::uint32_t> silent_ones;
    for (std::size_t n = 0; n < listed(); ++n)
      if (!live(n, now) && peers_[n].mismatch.empty())
        silent_ones.push_back(static_cast<std::uint32_t>(n));
    down_reason_ = "no quorum: " + std::to_string(ring.size()) + " of the " +
                   std::to_string(listed()) + " listed nodes are reachable (" + names_of(ring) +
                   "; not heard for " + ms_text(options_.timeout) + ": " + names_of(silent_ones) +
                   mismatched_ones() + "), and min_nodes is " + std::to_string(options_.min_nodes);
    return;
  }
  const std::size_t c = coordinator(now);
  if (c != options_.self) {
    if (awaiting_up_since_ && now - *awaiting_up_since_ < options_.timeout) return;
    RingHeader reform = control(RingKind::reform, generation_);
    reform.origin = static_cast<std::uint32_t>(options_.self);
    reform.text = down_reason_;
    send(c, std::move(reform));
    return;
  }
  if (!waiting.empty()) {
    down_reason_ = "the ring has not formed yet: waiting up to " + ms_text(options_.timeout) +
                   " after this node started to hear from " + names_of(waiting);
    return;
  }
  propose(ring, down_reason_, now);
}

void Membership::propose(const std::vector<std::uint32_t>& ring, const std::string& why,
                         Deadline now) {
  if (forming_ == 0) forming_since_ = now;
  forming_ = random_() | 1;  // never 0: 0 means "no generation"
  proposed_ = ring;
  if (ring.size() == 1) {
    adopt(forming_, proposed_, why);
    forming_ = 0;
    go_up();
    return;
  }
  RingHeader form = control(RingKind::form, forming_);
  form.members = ring;
  form.origin = static_cast<std::uint32_t>(options_.self);
  form.text = why;
  send(next_in(ring, options_.self), std::move(form));
}

void Membership::adopt(std::uint64_t generation, std::vector<std::uint32_t> ring,
                       const std::string& why) {
  const std::string cause = why.empty() ? std::string("a node restarted or failed") : why;
  const std::string change =
      ring == last_up_ ? std::string() : " (" + names_of(last_up_) + " -> " + names_of(ring) + ")";
  if (!break_)
    break_ =
        Status{ErrorCode::ring_changed, "the ring re-formed during the op" + change + ": " + cause};
  if (!change.empty() && !ring.empty())
    last_change_ = last_up_.empty() ? "formed " + names_of(ring)
                                    : names_of(last_up_) + " -> " + names_of(ring) + ": " + cause;
  generation_ = generation;
  members_ = std::move(ring);
  forming_ = 0;  // a coordinator that adopts another's generation stops forming its own
  up_ = false;
  down_reason_ = "the ring is re-forming: " + cause;
  for (Peer& p : peers_) p.confirmed = p.left = false;
  adopted_ = true;
}

void Membership::go_up() {
  up_ = true;
  awaiting_up_since_.reset();
  down_reason_.clear();
  last_up_ = members_;
}

void Membership::go_down(const std::string& why, Deadline now) {
  up_ = false;
  awaiting_up_since_.reset();
  down_reason_ = why;
  if (!break_) break_ = Status{ErrorCode::ring_changed, why};
  next_form_ = now;
}

// --- outputs -----------------------------------------------------------------------

void Membership::send(std::size_t to, RingHeader header) {
  header.sender = static_cast<std::uint32_t>(options_.self);
  sends_.push_back(MembershipSend{to, std::move(header)});
}

RingHeader Membership::control(RingKind kind, std::uint64_t generation) const {
  RingHeader header;
  header.kind = kind;
  header.generation = generation;
  header.settings = options_.settings;
  return header;
}

std::vector<MembershipSend> Membership::take_sends() { return std::exchange(sends_, {}); }

std::optional<Status> Membership::take_break() { return std::exchange(break_, std::nullopt); }

bool Membership::take_adopted() noexcept { return std::exchange(adopted_, false); }

}  // namespace zring::transport
