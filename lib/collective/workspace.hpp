// workspace.hpp - buffers an op needs, kept from one op to the next.
//
// Fresh memory costs a page fault per 4 KiB on first touch: for a 64 MiB
// gradient that is more than the arithmetic of the whole op. A node keeps
// one Workspace for its life, so a steady stream of same-sized ops touches
// only memory it touched before.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace zring::collective {

// A thread kept for a node's life that runs one task at a time beside the
// ring thread: an op's compression, while the ring thread forwards what the
// other nodes send. Being the same thread op after op, it keeps its
// thread_local scratch (and so its memory) warm. Started on first use.
class Helper {
 public:
  Helper() = default;
  ~Helper();
  Helper(const Helper&) = delete;
  Helper& operator=(const Helper&) = delete;

  // Runs task on the helper thread; the previous one must have been waited
  // for. Then, once done() is true, calls finished there (which must not
  // throw): to wake a thread that waits for the task some other way.
  void start(std::function<void()> task, std::function<void()> finished = {});
  // Whether the task has finished (what it wrote is then visible here).
  [[nodiscard]] bool done() const noexcept { return done_.load(std::memory_order_acquire); }
  // Until the task has finished; rethrows what it threw.
  void wait();
  // The same, keeping quiet about what it threw (for unwinding).
  void wait_quietly() noexcept;

 private:
  void loop();
  std::mutex mutex_;
  std::condition_variable wake_;      // a task to run, or stop
  std::condition_variable finished_;  // done_ became true
  std::function<void()> task_;
  std::function<void()> on_finished_;
  std::exception_ptr error_;
  std::atomic<bool> done_{true};
  bool stop_ = false;
  std::thread thread_;
};

struct Workspace {
  std::vector<std::vector<float>> corrected;  // per local rank: g + residual
  std::vector<float> decoded;                 // one rank's D(C(x))
  std::vector<float> sum;                     // the node's contribution
  std::vector<float> gathered;                // every node's contribution to a small op
  std::vector<float> sampled;                 // randomk: the ring's sums of samples
  std::vector<std::uint16_t> halves;          // fp16/bf16 round trips
  Helper helper;                              // compresses while the ring thread forwards

  // A buffer for the op's result, at least n floats. The previous one is
  // reused unless someone (a client reply still being sent) holds it.
  std::shared_ptr<float[]> result(std::size_t n);

 private:
  std::shared_ptr<float[]> result_;
  std::size_t result_size_ = 0;
};

// v.resize(n) without keeping or zeroing old content beyond what resize does;
// returns v.data(). Capacity only grows, so memory is reused.
template <class T>
T* sized(std::vector<T>& v, std::size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

}  // namespace zring::collective
