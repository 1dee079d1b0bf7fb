#include "answer_backlog.hpp"

namespace zring::daemon {

std::size_t AnswerBacklog::answers() const noexcept {
  std::size_t n = 0;
  for (const auto& [client, queue] : waiting_) n += queue.answers.size();
  return n;
}

bool AnswerBacklog::park(const std::string& client, Answer answer) {
  Queue& queue = waiting_[client];
  if (queue.bytes + answer.bytes() > max_bytes_ && !queue.answers.empty()) return false;
  queue.bytes += answer.bytes();
  queue.answers.push_back(std::move(answer));
  return true;
}

std::size_t AnswerBacklog::flush(const Send& send) {
  std::size_t sent = 0;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    Queue& queue = it->second;
    Sent outcome = Sent::yes;
    while (!queue.answers.empty()) {
      outcome = send(it->first, queue.answers.front());
      if (outcome != Sent::yes) break;
      queue.bytes -= queue.answers.front().bytes();
      queue.answers.pop_front();
      ++sent;
    }
    if (queue.answers.empty() || outcome == Sent::gone)
      it = waiting_.erase(it);
    else
      ++it;
  }
  return sent;
}

}  // namespace zring::daemon
