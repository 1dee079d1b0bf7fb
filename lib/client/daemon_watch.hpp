// daemon_watch.hpp - notices when zringd's end of the IPC connection closes.
//
// A zringd that dies (kill -9, a crash, a restart) closes its end of the
// Unix socket at once, and ZeroMQ reports it on the DEALER's monitor
// (ZMQ_EVENT_DISCONNECTED) while it quietly reconnects. A DaemonWatch reads
// those events and tells the waiting client what became of the connection
// its request went out on:
//   - closed after the request was sent: zringd went away during the op,
//     no answer will come;
//   - already closed when it was sent, and still closed kComeBack later:
//     zringd is gone (a restarted one would have taken the request and
//     answered it).
// A close before a request that zringd recovers from in time (a restart
// between ops) is history: the request goes to the new daemon, which says
// it does not know the client, and the client greets it again.
#pragma once

#include <chrono>
#include <string>
#include <zmq.hpp>

namespace zring::client {

class DaemonWatch {
 public:
  using Clock = std::chrono::steady_clock;

  // How long a request sent while the connection is closed waits for a
  // zringd to come back on the socket.
  static constexpr std::chrono::milliseconds kComeBack{1000};

  enum class State {
    open,           // nothing known against the request's connection
    closed_during,  // it closed after the request went out
    gone,           // it was closed when the request went out, and is still
  };

  // Watches `dealer`, which must not have connected yet (so that the watch
  // sees its first connection), until this object goes.
  DaemonWatch(zmq::context_t& context, zmq::socket_t& dealer);
  ~DaemonWatch();
  DaemonWatch(const DaemonWatch&) = delete;
  DaemonWatch& operator=(const DaemonWatch&) = delete;

  // Call just before a request is sent: what happened before it is history.
  void sending();
  // Reads the events that came (never blocks) and says what they mean for
  // the request sent last.
  State check();
  // To poll with the DEALER: readable when there are events to check().
  zmq::pollitem_t item() { return {monitor_.handle(), 0, ZMQ_POLLIN, 0}; }
  // When check() may turn to `gone` without another event (Clock's max if
  // it cannot): the longest a poll may sleep.
  Clock::time_point decides_by() const;

 private:
  void read_events();

  zmq::socket_t& dealer_;
  zmq::socket_t monitor_;
  bool down_ = false;          // the last event was a close, not a (re)connect
  bool sent_down_ = false;     // down_ when the request went out
  bool closed_since_ = false;  // a close came after the request went out
  Clock::time_point sent_at_{};
};

}  // namespace zring::client
