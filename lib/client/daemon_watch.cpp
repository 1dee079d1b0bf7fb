// daemon_watch.cpp - the DEALER's monitor events, read for the client.
#include "client/daemon_watch.hpp"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <zring/error.hpp>

#include "transport/zmq_calls.hpp"

namespace zring::client {

namespace {

// A monitor endpoint of its own in the context (one per watched socket).
std::string monitor_endpoint(const void* socket) {
  char name[64];
  std::snprintf(name, sizeof name, "inproc://zring-daemon-watch-%p", socket);
  return name;
}

}  // namespace

DaemonWatch::DaemonWatch(zmq::context_t& context, zmq::socket_t& dealer)
    : dealer_(dealer), monitor_(context, zmq::socket_type::pair) {
  const std::string endpoint = monitor_endpoint(dealer.handle());
  int watched = -1;
  do {  // a signal may end the call (EINTR): it is simply made again
    watched = zmq_socket_monitor(dealer.handle(), endpoint.c_str(),
                                 ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED);
  } while (watched != 0 && zmq_errno() == EINTR);
  if (watched != 0)
    throw Error(ErrorCode::internal,
                std::string("cannot watch the connection to zringd: ") + zmq_strerror(zmq_errno()));
  monitor_.set(zmq::sockopt::linger, 0);
  transport::retry_interrupted([&] { monitor_.connect(endpoint); });
}

DaemonWatch::~DaemonWatch() {
  (void)zmq_socket_monitor(dealer_.handle(), nullptr, 0);  // stop: best effort
}

void DaemonWatch::sending() {
  read_events();
  sent_down_ = down_;
  closed_since_ = false;
  sent_at_ = Clock::now();
}

DaemonWatch::State DaemonWatch::check() {
  read_events();
  if (closed_since_) return State::closed_during;
  if (sent_down_ && down_ && Clock::now() >= sent_at_ + kComeBack) return State::gone;
  return State::open;
}

DaemonWatch::Clock::time_point DaemonWatch::decides_by() const {
  return sent_down_ && down_ && !closed_since_ ? sent_at_ + kComeBack : Clock::time_point::max();
}

// Each event is two frames: 16-bit event id and 32-bit value, then the
// endpoint it concerns.
void DaemonWatch::read_events() {
  for (;;) {
    zmq::message_t event;
    if (!transport::retry_interrupted(
            [&] { return monitor_.recv(event, zmq::recv_flags::dontwait); }))
      return;
    for (bool more = event.more(); more;) {  // the endpoint: not needed
      zmq::message_t rest;
      more = transport::retry_interrupted(
                 [&] { return monitor_.recv(rest, zmq::recv_flags::dontwait); }) &&
             rest.more();
    }
    if (event.size() < sizeof(std::uint16_t)) continue;
    std::uint16_t id = 0;
    std::memcpy(&id, event.data(), sizeof id);
    if (id == ZMQ_EVENT_DISCONNECTED) {
      down_ = true;
      closed_since_ = true;
    } else if (id == ZMQ_EVENT_CONNECTED) {
      down_ = false;
    }
  }
}

}  // namespace zring::client
