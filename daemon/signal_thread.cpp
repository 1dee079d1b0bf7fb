#include "signal_thread.hpp"

#include <pthread.h>

#include <cerrno>
#include <ctime>

namespace zring::daemon {

sigset_t block_async_signals() {
  sigset_t blocked, before;
  ::sigfillset(&blocked);
  for (const int fault : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS})
    ::sigdelset(&blocked, fault);
  ::pthread_sigmask(SIG_BLOCK, &blocked, &before);
  return before;
}

SignalThread::SignalThread(std::initializer_list<int> signals, std::function<void(int)> on_signal)
    : on_signal_(std::move(on_signal)) {
  ::sigemptyset(&waited_);
  for (const int s : signals) ::sigaddset(&waited_, s);
  // Blocked here too, so that they stay pending for sigtimedwait even if
  // the caller forgot block_async_signals().
  ::pthread_sigmask(SIG_BLOCK, &waited_, nullptr);
  thread_ = std::thread([this] { run(); });
}

SignalThread::~SignalThread() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

// Waits in slices of 200 ms, so that stopping needs no signal of its own.
void SignalThread::run() {
  ::pthread_setname_np(::pthread_self(), "zringd-signals");
  const timespec slice{0, 200'000'000};
  while (!stopping_) {
    const int signal = ::sigtimedwait(&waited_, nullptr, &slice);
    if (signal > 0 && !stopping_) on_signal_(signal);
  }
}

}  // namespace zring::daemon
