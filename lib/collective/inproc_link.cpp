#include "collective/inproc_link.hpp"

#include <string>
#include <zring/error.hpp>

namespace zring::collective {

struct InprocRing::Inbox {
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<Message> messages;
  std::string aborted;
  bool woken = false;
};

class InprocRing::Link final : public RingLink {
 public:
  Link(InprocRing& ring, std::size_t node) : ring_(ring), node_(node) {}
  std::size_t node() const noexcept override { return node_; }
  std::size_t nodes() const noexcept override { return ring_.nodes(); }
  std::string describe(std::size_t node) const override { return "node " + std::to_string(node); }

  void send(const ChunkTag& tag, Bytes payload) override {
    deliver((node_ + 1) % nodes(), tag, std::move(payload));
  }

  void send_to(std::size_t to, const ChunkTag& tag, Bytes payload) override {
    if (to == node_ || to >= nodes()) throw Error(ErrorCode::internal, "send_to: no such peer");
    deliver(to, tag, std::move(payload));
  }

  Message recv(Deadline deadline) override {
    do {
      if (std::optional<Message> msg = recv_until(deadline)) return std::move(*msg);
    } while (Clock::now() < deadline);  // woken
    timed_out((node_ + nodes() - 1) % nodes());
  }

  [[noreturn]] void timed_out(std::size_t waited_for) override {
    throw Error(ErrorCode::timeout, "node " + std::to_string(node_) +
                                        ": timed out waiting for node " +
                                        std::to_string(waited_for));
  }

  void wake() noexcept override {
    Inbox& inbox = *ring_.inboxes_[node_];
    {
      std::lock_guard lock(inbox.mutex);
      inbox.woken = true;
    }
    inbox.ready.notify_all();
  }

  void put_back(std::vector<Message> messages) override {
    Inbox& inbox = *ring_.inboxes_[node_];
    std::lock_guard lock(inbox.mutex);
    inbox.messages.insert(inbox.messages.begin(), std::make_move_iterator(messages.begin()),
                          std::make_move_iterator(messages.end()));
  }

  std::optional<Message> recv_until(Deadline deadline) override {
    Inbox& inbox = *ring_.inboxes_[node_];
    std::unique_lock lock(inbox.mutex);
    (void)inbox.ready.wait_until(lock, deadline, [&] {
      return !inbox.messages.empty() || !inbox.aborted.empty() || inbox.woken;
    });
    inbox.woken = false;
    if (!inbox.aborted.empty()) throw Error(ErrorCode::aborted, inbox.aborted);
    if (inbox.messages.empty()) return std::nullopt;
    Message msg = std::move(inbox.messages.front());
    inbox.messages.pop_front();
    return msg;
  }

 private:
  // The filter sees every message, of both kinds of send (one of send_to
  // goes to its origin, the tag's segment, plus its hop).
  void deliver(std::size_t to, const ChunkTag& tag, Bytes payload) {
    Message msg{tag, std::move(payload)};
    std::vector<Message> out;
    {
      std::lock_guard lock(ring_.filter_mutex_);
      if (ring_.filter_)
        out = ring_.filter_(node_, msg);
      else
        out.push_back(std::move(msg));
    }
    // Like a network, every delivery is a copy the receiver owns (RingLink::recv).
    for (Message& m : out) {
      m.payload = Bytes::copy_of(m.payload.data(), m.payload.size());
      ring_.inject(to, std::move(m));
    }
  }

  InprocRing& ring_;
  std::size_t node_;
};

InprocRing::InprocRing(std::size_t nodes) {
  for (std::size_t i = 0; i < nodes; ++i) inboxes_.push_back(std::make_unique<Inbox>());
  for (std::size_t i = 0; i < nodes; ++i) links_.push_back(std::make_unique<Link>(*this, i));
}

InprocRing::~InprocRing() = default;

RingLink& InprocRing::link(std::size_t node) { return *links_.at(node); }

void InprocRing::set_filter(Filter filter) {
  std::lock_guard lock(filter_mutex_);
  filter_ = std::move(filter);
}

void InprocRing::inject(std::size_t node, Message msg) {
  Inbox& inbox = *inboxes_.at(node);
  {
    std::lock_guard lock(inbox.mutex);
    inbox.messages.push_back(std::move(msg));
  }
  inbox.ready.notify_one();
}

void InprocRing::abort_all(const std::string& why) {
  for (auto& inbox : inboxes_) {
    {
      std::lock_guard lock(inbox->mutex);
      inbox->aborted = why;
    }
    inbox->ready.notify_all();
  }
}

}  // namespace zring::collective
