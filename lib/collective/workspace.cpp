#include "collective/workspace.hpp"

#include <utility>

namespace zring::collective {

std::shared_ptr<float[]> Workspace::result(std::size_t n) {
  if (!result_ || result_.use_count() > 1 || result_size_ < n) {
    result_size_ = n == 0 ? 1 : n;
    result_ = std::shared_ptr<float[]>(new float[result_size_]);
  }
  return result_;
}

Helper::~Helper() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void Helper::start(std::function<void()> task, std::function<void()> finished) {
  {
    std::lock_guard lock(mutex_);
    task_ = std::move(task);
    on_finished_ = std::move(finished);
    error_ = nullptr;
    done_.store(false, std::memory_order_release);
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  }
  wake_.notify_one();
}

void Helper::wait() {
  std::unique_lock lock(mutex_);
  finished_.wait(lock, [this] { return done_.load(std::memory_order_acquire); });
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void Helper::wait_quietly() noexcept {
  std::unique_lock lock(mutex_);
  finished_.wait(lock, [this] { return done_.load(std::memory_order_acquire); });
  error_ = nullptr;
}

void Helper::loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || task_; });
    if (stop_) return;
    std::function<void()> task = std::move(task_);
    std::function<void()> finished = std::exchange(on_finished_, nullptr);
    task_ = nullptr;
    lock.unlock();
    std::exception_ptr error;
    try {
      task();
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    error_ = error;
    done_.store(true, std::memory_order_release);
    // Under the lock: wait() returns only after it, so what it touches
    // outlives it.
    if (finished) finished();
    finished_.notify_all();
  }
}

}  // namespace zring::collective
