// answer_backlog.hpp - answers zringd could not hand to a client yet.
//
// The IPC socket never blocks on one client: when a client's pipe is full
// (it reads nothing: stopped, swapped out, or flooding the daemon with
// requests), an answer to it waits here and goes out, in order, once the
// client reads again. Keepalives are not kept: a client whose pipe is full
// has messages to read already. Socket-free: the IpcServer sends.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

namespace zring::daemon {

class AnswerBacklog {
 public:
  struct Answer {
    std::vector<std::uint8_t> header;      // the encoded IpcMessage frame
    std::optional<zmq::message_t> values;  // a values frame, if the answer has one
    [[nodiscard]] std::size_t bytes() const noexcept {
      return header.size() + (values ? values->size() : 0);
    }
  };
  // What one attempt to hand an answer to the socket came to.
  enum class Sent { yes, full, gone };
  using Send = std::function<Sent(const std::string& client, Answer& answer)>;

  // Up to max_bytes of answers wait per client; beyond that they are dropped.
  explicit AnswerBacklog(std::size_t max_bytes) : max_bytes_(max_bytes) {}

  // Whether answers to `client` are waiting (a new one must queue behind them).
  [[nodiscard]] bool holds(const std::string& client) const { return waiting_.count(client) != 0; }
  [[nodiscard]] bool empty() const noexcept { return waiting_.empty(); }
  [[nodiscard]] std::size_t answers() const noexcept;

  // Queues `answer` for `client`; false (and the answer dropped) when that
  // client already has max_bytes waiting.
  bool park(const std::string& client, Answer answer);

  // Hands over what the socket takes, each client's answers in order:
  // a client whose pipe is still full keeps the rest, one that is gone
  // loses them. Returns how many answers went out.
  std::size_t flush(const Send& send);

 private:
  struct Queue {
    std::deque<Answer> answers;
    std::size_t bytes = 0;
  };
  std::size_t max_bytes_;
  std::map<std::string, Queue> waiting_;
};

}  // namespace zring::daemon
