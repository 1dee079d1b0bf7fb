// link.hpp - what a ring collective sees of the network (internal).
//
// A collective never touches a socket. It sends messages to its ring
// successor and receives messages from its ring predecessor through a
// RingLink, except for the exchange of summaries (and the data behind
// them) that begins every op, where each node sends straight to every
// other and receives from all of them, and the direct schedule of medium
// ops (ring_allreduce.hpp), where a node and the owner of a segment send
// each other its values and sums straight; the ZeroMQ transport
// (lib/transport) and the in-process transport (inproc_link.hpp, for unit
// tests) both implement it. Messages are
// told apart by their header (phase, segment/origin, chunk, hop), never by
// arrival order alone, so a stray or duplicated message is recognised and
// dropped rather than summed.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "wire/messages.hpp"

namespace zring::collective {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// The phase and tag of a data message (wire/messages.hpp: the wire carries
// them in every RingHeader).
using wire::ChunkTag;
using wire::Phase;

// Bytes that keep whatever owns them alive (a ZeroMQ message, a vector...),
// so payloads are handed along without copies.
class Bytes {
 public:
  Bytes() = default;
  Bytes(const std::uint8_t* data, std::size_t size, std::shared_ptr<const void> owner)
      : data_(data), size_(size), owner_(std::move(owner)) {}
  static Bytes copy_of(const void* data, std::size_t size);
  static Bytes take(std::shared_ptr<std::vector<std::uint8_t>> buffer);

  [[nodiscard]] const std::uint8_t* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] const std::shared_ptr<const void>& owner() const noexcept { return owner_; }

 private:
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
  std::shared_ptr<const void> owner_;
};

struct Message {
  ChunkTag tag;
  Bytes payload;
};

// One node's view of the ring for the duration of an op.
class RingLink {
 public:
  virtual ~RingLink() = default;
  [[nodiscard]] virtual std::size_t node() const noexcept = 0;   // this node's index
  [[nodiscard]] virtual std::size_t nodes() const noexcept = 0;  // ring size
  // Describes node i for error messages ("node 'b' (index 1)").
  [[nodiscard]] virtual std::string describe(std::size_t node) const = 0;

  // Queues a message for the successor; never blocks on the network.
  virtual void send(const ChunkTag& tag, Bytes payload) = 0;
  // Queues a message for node `to` (not this one) of the op's ring, in the
  // order of the other messages this node sends it; never blocks. Only for
  // Phase::manifest and Phase::blobs messages of hop 0 whose segment is
  // this node (their origin, ring_allgather.hpp), and for the direct
  // schedule's Phase::to_owner (this node's values, to the segment's owner)
  // and Phase::from_owner (the owner's sums): a receiver takes no other
  // message from a node that is not its predecessor.
  virtual void send_to(std::size_t to, const ChunkTag& tag, Bytes payload) = 0;
  // The next message of the current op from the predecessor (or, of the
  // phases send_to may send, from their origin). Its payload
  // belongs to the receiver alone (a copy made by the network or the link),
  // so the ring may write into it and pass it on without a copy. Throws
  // zring::Error(timeout) naming the predecessor when none arrives before
  // deadline, or another zring::Error when the op is aborted.
  virtual Message recv(Deadline deadline) = 0;
  // The same, but at the deadline without a message it returns nothing
  // instead of throwing timeout (for a short wait while this node is busy
  // with something else). It also returns nothing, before the deadline,
  // when woken (wake): a caller that treats nothing as a timeout looks at
  // the clock first.
  virtual std::optional<Message> recv_until(Deadline deadline) = 0;
  // From any thread: a recv_until waiting now, or else the next one,
  // returns at once (nothing, unless a message is there). For a wait on
  // another thread's work: this node's summary, made on the helper while
  // the ring thread forwards the others' (ring_allgather.hpp).
  virtual void wake() noexcept = 0;
  // Throws the zring::Error(timeout) recv throws, naming node `waited_for`
  // instead of the predecessor: for a wait on messages from any node. A
  // transport that sees a member died instead throws the error of that
  // change of the ring (recv does the same).
  [[noreturn]] virtual void timed_out(std::size_t waited_for) = 0;
  // Messages of the current op that recv returned before the caller could
  // take them (a later phase's from the predecessor, while this node still
  // waits for another node's summary): recv returns them first, in order.
  virtual void put_back(std::vector<Message> messages) = 0;
  // The op knows every node's summary: from here on it may write results.
  // Until then a failure of the op has changed nothing anywhere.
  virtual void summaries_known() {}
  // Between hold_sends and release_sends the link may keep what send and
  // send_to queue, and write it at release_sends, several messages to a
  // peer in one write: a peer is woken once for a summary and the data
  // behind it. Only around sends, never around a wait (SendBatch).
  virtual void hold_sends() noexcept {}
  virtual void release_sends() noexcept {}
};

// Holds a link's sends for its lifetime (RingLink::hold_sends).
class SendBatch {
 public:
  explicit SendBatch(RingLink& link) noexcept : link_(link) { link_.hold_sends(); }
  ~SendBatch() { link_.release_sends(); }
  SendBatch(const SendBatch&) = delete;
  SendBatch& operator=(const SendBatch&) = delete;

 private:
  RingLink& link_;
};

}  // namespace zring::collective

namespace zring::collective {

// A writable buffer whose bytes can be handed to a RingLink without a copy.
// The bytes are not initialised.
struct OwnedBuffer {
  std::shared_ptr<std::uint8_t[]> data;
  std::size_t size = 0;
  [[nodiscard]] Bytes bytes() const { return Bytes(data.get(), size, data); }
};
[[nodiscard]] OwnedBuffer allocate(std::size_t size);

// What a collective did on the wire, and what it threw away.
struct RingStats {
  std::uint64_t bytes_sent = 0;  // payload bytes this node sent
  std::uint64_t messages_sent = 0;
  std::uint64_t dropped = 0;          // unexpected, duplicate or malformed messages
  std::uint64_t peak_held_bytes = 0;  // the most data a plan held at once (sparse: frames to sum)
  std::string last_drop;              // why the last one was dropped
  void drop(std::string why) {
    ++dropped;
    last_drop = std::move(why);
  }
};

}  // namespace zring::collective
