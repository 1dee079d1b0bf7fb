// fed_staging.hpp - staged input for the collective tests: values that a
// feeder thread (or each wait) copies in while the op runs, in StagingOrder,
// and snapshots of what the op publishes as final.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "collective/staging.hpp"

namespace zring::collective::ring_test {

// Values copied in by a feeder thread, piece by piece in staging order; every
// publish snapshots the range it declares final.
class FedStaging final : public LocalStaging {
 public:
  FedStaging(const std::vector<float>& source, float* buffer, StagingOrder order)
      : source_(source),
        buffer_(buffer),
        order_(order),
        published_(order.segments(), 0),
        snapshots_(order.segments()) {}

  // Copies the values in, `piece` at a time in staging order, telling the
  // ring after each piece.
  void feed(std::size_t piece) {
    for (;;) {
      {
        std::lock_guard lock(mutex_);
        if (staged_ >= order_.elements()) return;
        stage_upto(std::min(order_.elements(), staged_ + piece));
        changed_.notify_all();
      }
      std::this_thread::yield();
    }
  }

  // Lazy: nothing is fed; a wait copies in just what it waits for, so a
  // value read without a wait before it is still the buffer's old one.
  void set_lazy() { lazy_ = true; }

  void wait_staged(std::size_t segment, std::size_t upto) override {
    wait_for(order_.position(segment, upto));
  }
  void wait_all() override { wait_for(order_.elements()); }
  void wait_wave(std::size_t wave) override { wait_for(order_.wave_end(wave)); }
  // Lazy, a look at a wave brings it in, as a client that goes on copying
  // would (nothing else would: a ring whose every node waits for the next
  // wave's statistics waits for their values).
  bool staged_wave(std::size_t wave) override {
    std::lock_guard lock(mutex_);
    if (lazy_) stage_upto(order_.wave_end(wave));
    return staged_ >= order_.wave_end(wave);
  }
  bool staged(std::size_t segment, std::size_t upto) override {
    std::lock_guard lock(mutex_);
    return staged_ >= order_.position(segment, upto);
  }

  // Where the first wait waited for (every value: a plan that does not stream).
  std::size_t first_needed() const { return first_needed_; }
  void publish(std::size_t segment, std::size_t upto) override {
    std::lock_guard lock(mutex_);  // (ring threads: no Boost.Test assertions here)
    if (segment >= published_.size() || upto <= published_[segment]) {
      backwards_ = true;
      return;
    }
    published_[segment] = upto;
    const float* from = buffer_ + order_.begin(segment);
    snapshots_[segment].assign(from, from + upto);
  }

  void publish_prefix(std::size_t end) override {
    for (std::size_t s = 0; s < order_.segments(); ++s) {
      const std::size_t begin = order_.begin(s), length = order_.end(s) - begin;
      const std::size_t upto = end <= begin ? 0 : std::min(end - begin, length);
      if (upto > published_[s]) publish(s, upto);
    }
  }

  const StagingOrder& order() const { return order_; }

 private:
  void wait_for(std::size_t position) {
    std::unique_lock lock(mutex_);
    if (lazy_) stage_upto(position);
    changed_.wait(lock, [&] { return staged_ >= position; });
    if (!waited_) first_needed_ = position;
    waited_ = true;
    if (position > max_needed_) max_needed_ = position;
  }

  // Copies in, in staging order, up to `position` (the mutex held; the ring
  // reads only what is below staged_, so nothing it reads is written here).
  void stage_upto(std::size_t position) {
    std::size_t before = 0;  // where piece k starts in the order
    for (std::size_t k = 0; k < order_.pieces() && staged_ < position; ++k) {
      const StagingOrder::Piece piece = order_.piece(k);
      const std::size_t length = piece.end - piece.begin;
      if (staged_ < before + length) {
        const std::size_t from = staged_ - before;
        const std::size_t to = std::min(length, position - before);
        std::memcpy(buffer_ + piece.begin + from, source_.data() + piece.begin + from,
                    (to - from) * sizeof(float));
        staged_ = before + to;
      }
      before += length;
    }
  }

  const std::vector<float>& source_;
  float* buffer_;
  StagingOrder order_;

 public:
  std::vector<std::size_t> published_;
  std::vector<std::vector<float>> snapshots_;
  bool backwards_ = false;
  std::size_t max_needed_ = 0;

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::size_t staged_ = 0;
  bool lazy_ = false;
  bool waited_ = false;
  std::size_t first_needed_ = 0;
};

}  // namespace zring::collective::ring_test
