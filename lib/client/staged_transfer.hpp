// staged_transfer.hpp - a client's values through the shared buffer while
// the ring runs (internal).
//
// For a staged op (IpcKind::submit_staged) the client copies its values into
// the buffer in the order its node's ring reads them (StagingOrder), moving
// the board's `staged` counter after every piece, so zringd starts the ring
// after the first piece and never waits for the rest; then, while waiting for
// the reply, it copies out each segment's averages as zringd publishes them.
// What is left is copied when the reply comes.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "codec/codec.hpp"
#include "collective/staging.hpp"
#include "transport/staging_board.hpp"

namespace zring::client {

// One tensor of a fused op: where its values come from and where its
// averages go (the same memory for an in-place op), and where it sits in
// the fused buffer. The copy form's averages go to `result` instead, its
// capacity reserved: they are appended to it as they are published, so
// most of its memory is written once, not zeroed first.
struct TensorIo {
  const float* in = nullptr;
  float* out = nullptr;
  std::size_t numel = 0;
  std::size_t offset = 0;
  std::vector<float>* result = nullptr;
};

class StagedTransfer {
 public:
  // tensors ordered by offset, covering order.elements() values; buffer
  // holds as many floats and board is its progress board. Results are
  // emptied: every attempt appends from the start. With stats (an order in
  // waves), the buffer also has room for every block's statistics at
  // transport::stats_area.
  StagedTransfer(std::vector<TensorIo>& tensors, float* buffer, transport::StagingBoard& board,
                 collective::StagingOrder order, const codec::AffineCodec* stats = nullptr);

  // Copies every value in, piece by piece, telling zringd after each one;
  // with stats, also each block's statistics, taken from the values just
  // copied (still in the cache), and the board's stats_waves after each
  // wave.
  void stage();
  // Copies out what zringd published since the last call.
  void take_published();
  // Sleeps until zringd publishes more than take_published saw, at most
  // `for_at_most`.
  void sleep(std::chrono::microseconds for_at_most) const;
  // Whether every average was copied out already.
  [[nodiscard]] bool complete() const noexcept { return remaining_ == 0; }
  // Whether zringd is done with the op (its answer is on the way).
  [[nodiscard]] bool finished() const noexcept {
    return board_.finished.load(std::memory_order_acquire) != 0;
  }
  // Whether some averages were copied out (the caller's values changed).
  [[nodiscard]] bool copied_any() const noexcept { return remaining_ != order_.elements(); }
  // The op is done: copies out whatever was not yet.
  void take_rest();

 private:
  void copy_out(std::size_t begin, std::size_t end);
  void copy_out(std::vector<float>& result, std::size_t lo, const float* from, std::size_t n);
  void copy(float* to, const float* from, std::size_t n) const;
  std::size_t take_stats(std::size_t from, std::size_t to);
  std::vector<TensorIo>& tensors_;
  float* buffer_;
  transport::StagingBoard& board_;
  collective::StagingOrder order_;
  const codec::AffineCodec* stats_;
  std::vector<std::size_t> first_block_;  // with stats: per tensor, its first block's index
  std::vector<std::size_t> taken_;        // per segment: elements copied out from its start
  std::size_t remaining_;
  std::uint32_t seen_ = 0;  // published_seq when take_published last looked
};

}  // namespace zring::client
