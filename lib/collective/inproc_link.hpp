// inproc_link.hpp - a ring of RingLinks inside one process (internal).
//
// Each node runs on its own thread; send() appends to the successor's inbox.
// Used by the unit tests to run the real ring schedules without sockets, and
// able to misbehave on purpose (drop, duplicate or inject messages, go
// silent) to test that collectives notice.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "collective/link.hpp"

namespace zring::collective {

class InprocRing {
 public:
  explicit InprocRing(std::size_t nodes);
  ~InprocRing();
  InprocRing(const InprocRing&) = delete;
  InprocRing& operator=(const InprocRing&) = delete;

  [[nodiscard]] RingLink& link(std::size_t node);
  [[nodiscard]] std::size_t nodes() const noexcept { return inboxes_.size(); }

  // Test hooks. A filter sees every message a node sends and returns the
  // messages to deliver instead (none to drop it, two to duplicate it).
  using Filter = std::function<std::vector<Message>(std::size_t from, const Message&)>;
  void set_filter(Filter filter);
  // Puts a message straight into node's inbox, as if its predecessor sent it.
  void inject(std::size_t node, Message msg);
  // Wakes every receiver with zring::Error(aborted) (a peer failed).
  void abort_all(const std::string& why);

  struct Inbox;

 private:
  class Link;
  std::vector<std::unique_ptr<Inbox>> inboxes_;
  std::vector<std::unique_ptr<Link>> links_;
  std::mutex filter_mutex_;
  Filter filter_;
};

}  // namespace zring::collective
