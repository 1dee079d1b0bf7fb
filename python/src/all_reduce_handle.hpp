// all_reduce_handle.hpp - what a Python zring.CompressedAllReduce holds.
#pragma once

#include <pybind11/pybind11.h>

#include <mutex>
#include <optional>
#include <utility>
#include <zring/compressed_all_reduce.hpp>
#include <zring/error.hpp>

namespace zring::python {

// The C++ object and a lock: it is not thread-safe, and every call that
// does real work runs with the GIL released, so two Python threads could
// otherwise enter it at once. close() drops it (and, connected, the
// daemon's hold on this rank) before garbage collection would.
class AllReduceHandle {
 public:
  explicit AllReduceHandle(CompressedAllReduce ar) : ar_(std::move(ar)) {}

  // Runs f(ar) with the GIL released and the lock held.
  template <typename F>
  auto run(F&& f) {
    pybind11::gil_scoped_release no_gil;
    std::lock_guard lock(mutex_);
    return f(checked());
  }

  // Observers: cheap, under the lock but with the GIL (they never wait).
  template <typename F>
  auto observe(F&& f) {
    std::lock_guard lock(mutex_);
    return f(checked());
  }

  void close() {
    pybind11::gil_scoped_release no_gil;
    std::lock_guard lock(mutex_);
    ar_.reset();
  }
  bool closed() {
    std::lock_guard lock(mutex_);
    return !ar_;
  }

 private:
  CompressedAllReduce& checked() {
    if (!ar_)
      throw Error(ErrorCode::invalid_argument,
                  "CompressedAllReduce: this object was closed; make a new one (or connect again)");
    return *ar_;
  }

  std::mutex mutex_;
  std::optional<CompressedAllReduce> ar_;
};

}  // namespace zring::python
