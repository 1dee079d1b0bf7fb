// zmq_calls.hpp - ZeroMQ calls that a signal does not interrupt.
//
// Any libzmq call that looks at a socket's command pipe (poll, send, recv,
// even with ZMQ_DONTWAIT) can fail with EINTR when a signal lands on the
// calling thread, and cppzmq throws zmq::error_t for it. In a training
// process (SIGALRM watchdogs, a profiler's SIGPROF, SIGCHLD of a data
// loader) that would escape the API as something other than a zring::Error.
// These retry instead: a signal changes nothing, only real errors (a closed
// context, a bad socket) throw.
#pragma once

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <zmq.hpp>

namespace zring::transport {

// call(), again for as long as it fails with EINTR.
template <typename Call>
decltype(auto) retry_interrupted(Call&& call) {
  for (;;) {
    try {
      return call();
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
    }
  }
}

// zmq::poll's contract (level-triggered, ZeroMQ sockets and plain file
// descriptors), going on sleeping until something is ready or the time is
// up, in fewer system calls: libzmq's zmq_poll polls twice before it
// sleeps (once without waiting) and asks every ZeroMQ socket for its
// events after each poll, two system calls a socket; this asks each before
// it sleeps and afterwards only the ones whose descriptor woke it. A
// negative timeout waits with no end, as zmq::poll's does. For the first
// `busy` of the wait it looks without sleeping, yielding the CPU between
// looks: what comes then is seen without the wake-up of a sleeping thread.
int poll_items(zmq::pollitem_t* items, std::size_t count, std::chrono::milliseconds timeout,
               std::chrono::microseconds busy = std::chrono::microseconds(0));

}  // namespace zring::transport
