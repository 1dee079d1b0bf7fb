// staging.hpp - a node's own values arriving while the ring runs (internal).
//
// A client that hands its values over through the shared buffer ("staged"
// submission) copies them in while the op already runs, in the order the
// ring reads them, and copies the averages out as they become final. The
// ring learns what is there through LocalStaging; both sides agree on the
// order through StagingOrder.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace zring::collective {

// First element of segment s when `elements` values are cut into `segments`
// segments (sizes differ by at most one): the ring's cut (ChunkGeometry).
[[nodiscard]] inline std::size_t segment_begin(std::size_t elements, std::size_t segments,
                                               std::size_t s) noexcept {
  return segments == 0 ? 0 : elements * s / segments;
}

// The order in which node `node` of a ring of `nodes` reads its own values:
// its own segment first (it starts that one), then the segments whose
// partial sums reach it hop after hop: node, node - 1, ..., node + 1.
// Positions count elements in that order.
//
// In waves (an affine method's large op: affine_staging_order): each
// segment is cut into `waves` pieces, and the order takes the first piece
// of every segment (in the order above), then the second of every
// segment, and so on. The cuts fall on the starts of statistics blocks
// (block_starts), so that a block is never split between two pieces: the
// block that straddles the start of segment s goes whole with the first
// piece of s. So every node has the blocks of wave w in place at about
// w / waves of its copy, which is when the ring first needs them, and the
// statistics of a wave can travel before the next is staged.
class StagingOrder {
 public:
  StagingOrder(std::size_t elements, std::size_t nodes, std::size_t node);
  // In waves; block_start(i) is the start of the block that holds element i.
  template <class BlockStart>
  StagingOrder(std::size_t elements, std::size_t nodes, std::size_t node, std::size_t waves,
               BlockStart block_start);

  [[nodiscard]] std::size_t elements() const noexcept { return elements_; }
  [[nodiscard]] std::size_t segments() const noexcept { return nodes_; }
  [[nodiscard]] std::size_t node() const noexcept { return node_; }
  [[nodiscard]] std::size_t waves() const noexcept { return waves_; }
  // The k-th segment in staging order (within each wave).
  [[nodiscard]] std::size_t segment_at(std::size_t k) const noexcept {
    return (node_ + nodes_ - k % nodes_) % nodes_;
  }
  // The ring's segment s: [begin(s), end(s)).
  [[nodiscard]] std::size_t begin(std::size_t s) const noexcept {
    return segment_begin(elements_, nodes_, s);
  }
  [[nodiscard]] std::size_t end(std::size_t s) const noexcept {
    return segment_begin(elements_, nodes_, s + 1);
  }

  // The pieces in staging order: piece k is [piece(k).begin, piece(k).end),
  // the wave of segment `segment` (without waves: the whole segment).
  struct Piece {
    std::size_t segment, wave, begin, end;
  };
  [[nodiscard]] std::size_t pieces() const noexcept { return nodes_ * waves_; }
  [[nodiscard]] Piece piece(std::size_t k) const noexcept;
  // The position just past the first `upto` elements of segment s: once
  // the copy got there, all of them are in place.
  [[nodiscard]] std::size_t position(std::size_t s, std::size_t upto) const noexcept;
  // The position just past the last element of the pieces of wave w.
  [[nodiscard]] std::size_t wave_end(std::size_t w) const noexcept;

 private:
  void place_pieces();
  // Piece (wave w, segment s) is [cuts_[s * waves_ + w], cuts_[s * waves_ + w + 1]).
  [[nodiscard]] std::size_t cut(std::size_t s, std::size_t w) const noexcept {
    return cuts_[s * waves_ + w];
  }

  std::size_t elements_;
  std::size_t nodes_;
  std::size_t node_;
  std::size_t waves_ = 1;
  std::vector<std::size_t> cuts_;       // nodes_ * waves_ + 1, in element order
  std::vector<std::size_t> piece_pos_;  // by cut index: where the piece starts in the order
};

template <class BlockStart>
StagingOrder::StagingOrder(std::size_t elements, std::size_t nodes, std::size_t node,
                           std::size_t waves, BlockStart block_start)
    : elements_(elements),
      nodes_(nodes == 0 ? 1 : nodes),
      node_(node % nodes_),
      waves_(waves == 0 ? 1 : waves) {
  cuts_.assign(nodes_ * waves_ + 1, 0);
  for (std::size_t s = 0; s < nodes_; ++s) {
    const std::size_t b = begin(s), length = end(s) - b;
    for (std::size_t w = 0; w < waves_; ++w) {
      const std::size_t at = b + length * w / waves_;
      std::size_t c = at < elements_ ? block_start(at) : elements_;
      if (s == 0 && w == 0) c = 0;
      cuts_[s * waves_ + w] = std::max(c, s * waves_ + w == 0 ? 0 : cuts_[s * waves_ + w - 1]);
    }
  }
  cuts_.back() = elements_;
  place_pieces();
}

// What the ring asks of values that arrive while it runs. The waits throw
// zring::Error (timeout) when the client stops handing values over.
class LocalStaging {
 public:
  virtual ~LocalStaging() = default;
  // Blocks until the first `upto` elements of segment s are in place.
  virtual void wait_staged(std::size_t segment, std::size_t upto) = 0;
  // Blocks until every value is in place.
  virtual void wait_all() = 0;
  // Blocks until the pieces of wave w (StagingOrder) are in place, and
  // whether they are, at once.
  virtual void wait_wave(std::size_t wave) = 0;
  [[nodiscard]] virtual bool staged_wave(std::size_t wave) = 0;
  // The client's own statistics of every block (`count` floats, by block,
  // as codec::AffineCodec::block_stats makes them), once those of wave w
  // are in place (waiting for them); nullptr when it leaves none.
  [[nodiscard]] virtual const float* client_stats(std::size_t /*wave*/, std::size_t /*count*/) {
    return nullptr;
  }
  // Whether the first `upto` elements of segment s are in place, at once.
  [[nodiscard]] virtual bool staged(std::size_t segment, std::size_t upto) = 0;
  // The first `upto` elements of segment s of the result are final (the
  // values are written before this is called).
  virtual void publish(std::size_t segment, std::size_t upto) = 0;
  // The first `end` elements of the whole result are final: for plans that
  // write the result front to back.
  virtual void publish_prefix(std::size_t end) = 0;
};

}  // namespace zring::collective
