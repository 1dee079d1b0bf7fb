#include "client/staged_transfer.hpp"

#include <algorithm>
#include <cstring>

#include "collective/float_sum.hpp"

namespace zring::client {
namespace {

// Values copied in before zringd is told: big enough that telling costs
// nothing next to the copy, small enough that the ring starts at once.
constexpr std::size_t kPieceElems = std::size_t{1} << 18;  // 1 MiB

// The first tensor whose values reach past `at`.
std::vector<TensorIo>::const_iterator tensor_at(const std::vector<TensorIo>& tensors,
                                                std::size_t at) {
  return std::upper_bound(tensors.begin(), tensors.end(), at,
                          [](std::size_t v, const TensorIo& t) { return v < t.offset + t.numel; });
}

}  // namespace

StagedTransfer::StagedTransfer(std::vector<TensorIo>& tensors, float* buffer,
                               transport::StagingBoard& board, collective::StagingOrder order,
                               const codec::AffineCodec* stats)
    : tensors_(tensors),
      buffer_(buffer),
      board_(board),
      order_(std::move(order)),
      stats_(stats),
      taken_(order_.segments(), 0),
      remaining_(order_.elements()) {
  std::size_t blocks = 0;
  for (TensorIo& t : tensors_) {
    if (t.result) t.result->clear();
    if (!stats_) continue;
    first_block_.push_back(blocks);
    blocks += (t.numel + codec::kBlockElems - 1) / codec::kBlockElems;
  }
}

void StagedTransfer::stage() {
  std::size_t position = 0;
  for (std::size_t k = 0; k < order_.pieces(); ++k) {
    const collective::StagingOrder::Piece piece = order_.piece(k);
    const std::size_t end = piece.end;
    std::size_t with_stats = piece.begin;  // blocks before it have theirs
    for (std::size_t at = piece.begin; at < end;) {
      const std::size_t piece_end = std::min(end, at + kPieceElems);
      const std::size_t from = at;
      for (auto t = tensor_at(tensors_, at); at < piece_end; ++t) {
        const std::size_t lo = at - t->offset;
        const std::size_t n = std::min(piece_end, t->offset + t->numel) - at;
        if (n == 0) continue;  // an empty tensor
        copy(buffer_ + at, t->in + lo, n);
        at += n;
      }
      if (stats_) with_stats = take_stats(with_stats, at);
      position += at - from;
      board_.stage(position);
    }
    // A wave's pieces are all in, their statistics with them (a piece
    // ends where a block begins).
    if (stats_ && k % order_.segments() == order_.segments() - 1) {
      board_.stats_waves.store(static_cast<std::uint32_t>(piece.wave + 1),
                               std::memory_order_release);
      board_.stage(position);  // wakes zringd
    }
  }
}

// The statistics of the blocks from `from` (a block's start) that end by
// `to`, into the buffer's statistics area; returns where the next block
// starts. The values were just copied: they are read from the cache.
std::size_t StagedTransfer::take_stats(std::size_t from, std::size_t to) {
  float* area = buffer_ + transport::stats_area(order_.elements());
  const std::size_t spb = stats_->stats_per_block();
  for (auto t = tensor_at(tensors_, from); from < to && t != tensors_.end(); ++t) {
    const std::size_t tensor_end = t->offset + t->numel;
    while (from < tensor_end) {
      const std::size_t j = (from - t->offset) / codec::kBlockElems;
      const std::size_t block_end = std::min(tensor_end, from + codec::kBlockElems);
      if (block_end > to) return from;
      const std::size_t index = first_block_[static_cast<std::size_t>(t - tensors_.begin())] + j;
      stats_->block_stats(t->in + (from - t->offset), block_end - from, area + index * spb);
      from = block_end;
    }
  }
  return from;
}

// A large op's copies stream past the cache: its values are read once
// more, by zringd or the caller, long after the copy's cache would hold them.
void StagedTransfer::copy(float* to, const float* from, std::size_t n) const {
  if (order_.elements() >= collective::kStreamElems)
    collective::copy_streamed(to, from, n);
  else
    std::memcpy(to, from, n * sizeof(float));
}

void StagedTransfer::copy_out(std::size_t begin, std::size_t end) {
  for (auto t = tensor_at(tensors_, begin); begin < end; ++t) {
    const std::size_t lo = begin - t->offset;
    const std::size_t n = std::min(end, t->offset + t->numel) - begin;
    if (n == 0) continue;  // an empty tensor
    if (t->result)
      copy_out(*t->result, lo, buffer_ + begin, n);
    else
      copy(t->out + lo, buffer_ + begin, n);
    begin += n;
  }
}

// A result holds the averages up to the furthest published so far: those
// past its end are appended (written once). The segments are published out
// of order (each node's ring finishes another one first), and a gap below
// one published early is zeroed until its own averages come: waiting for
// them instead would leave most of the copying until the op is over.
void StagedTransfer::copy_out(std::vector<float>& result, std::size_t lo, const float* from,
                              std::size_t n) {
  const std::size_t within = result.size() > lo ? std::min(n, result.size() - lo) : 0;
  if (within != 0) copy(result.data() + lo, from, within);
  if (within == n) return;
  if (result.size() < lo) result.resize(lo);
  result.insert(result.end(), from + within, from + n);
}

void StagedTransfer::take_published() {
  seen_ = board_.published_seq.load(std::memory_order_acquire);
  const std::size_t segments = std::min(order_.segments(), transport::StagingBoard::kSegments);
  for (std::size_t s = 0; s < segments; ++s) {
    const std::size_t length = order_.end(s) - order_.begin(s);
    const std::size_t published = static_cast<std::size_t>(
        std::min<std::uint64_t>(board_.published[s].load(std::memory_order_acquire), length));
    if (published <= taken_[s]) continue;
    copy_out(order_.begin(s) + taken_[s], order_.begin(s) + published);
    remaining_ -= published - taken_[s];
    taken_[s] = published;
  }
}

void StagedTransfer::sleep(std::chrono::microseconds for_at_most) const {
  transport::StagingBoard::sleep_while(board_.published_seq, seen_, for_at_most);
}

void StagedTransfer::take_rest() {
  for (std::size_t s = 0; s < order_.segments(); ++s) {
    const std::size_t length = order_.end(s) - order_.begin(s);
    if (taken_[s] < length) copy_out(order_.begin(s) + taken_[s], order_.end(s));
    remaining_ -= length - taken_[s];
    taken_[s] = length;
  }
}

}  // namespace zring::client
