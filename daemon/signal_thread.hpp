// signal_thread.hpp - zringd's signals, taken by one thread of their own.
//
// Every other thread of zringd blocks the asynchronous signals (main() calls
// block_async_signals() before any thread starts, and threads inherit the
// mask), so no ZeroMQ call anywhere is ever ended by one with EINTR. The
// SignalThread waits for the signals zringd acts on and hands each to a
// callback (which posts to the io_context).
#pragma once

#include <signal.h>

#include <atomic>
#include <functional>
#include <initializer_list>
#include <thread>

namespace zring::daemon {

// Blocks every signal but the synchronous faults (SIGSEGV, SIGBUS, SIGFPE,
// SIGILL, SIGABRT, SIGTRAP, SIGSYS) in the calling thread; returns the mask
// it had before.
sigset_t block_async_signals();

class SignalThread {
 public:
  SignalThread(std::initializer_list<int> signals, std::function<void(int)> on_signal);
  ~SignalThread();  // stops the thread
  SignalThread(const SignalThread&) = delete;
  SignalThread& operator=(const SignalThread&) = delete;

 private:
  void run();

  sigset_t waited_;
  std::function<void(int)> on_signal_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace zring::daemon
