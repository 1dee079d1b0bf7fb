#include "collective/staging.hpp"

namespace zring::collective {

StagingOrder::StagingOrder(std::size_t elements, std::size_t nodes, std::size_t node)
    : elements_(elements), nodes_(nodes == 0 ? 1 : nodes), node_(node % nodes_) {
  cuts_.resize(nodes_ + 1);
  for (std::size_t s = 0; s <= nodes_; ++s) cuts_[s] = segment_begin(elements_, nodes_, s);
  place_pieces();
}

// Where each piece starts in the order: wave after wave, and within a
// wave the segments in segment_at order.
void StagingOrder::place_pieces() {
  piece_pos_.assign(nodes_ * waves_, 0);
  std::size_t at = 0;
  for (std::size_t k = 0; k < pieces(); ++k) {
    const Piece p = piece(k);
    piece_pos_[p.segment * waves_ + p.wave] = at;
    at += p.end - p.begin;
  }
}

StagingOrder::Piece StagingOrder::piece(std::size_t k) const noexcept {
  const std::size_t w = k / nodes_, s = segment_at(k % nodes_);
  return {s, w, cut(s, w), cuts_[s * waves_ + w + 1]};
}

std::size_t StagingOrder::position(std::size_t s, std::size_t upto) const noexcept {
  // The piece (by cut index) that holds element x: the last cut at or below it.
  const auto holding = [this](std::size_t x) {
    const auto after = std::upper_bound(cuts_.begin(), cuts_.end(), x);
    return std::min<std::size_t>(static_cast<std::size_t>(after - cuts_.begin()) - 1,
                                 cuts_.size() - 2);
  };
  const std::size_t first = begin(s);
  if (upto == 0) {  // where the segment's own first piece is up to its first element
    const std::size_t j = s * waves_;
    return piece_pos_[j] + (std::clamp(first, cuts_[j], cuts_[j + 1]) - cuts_[j]);
  }
  const std::size_t j0 = holding(first);
  const std::size_t last = first + upto - 1;  // the last element asked for
  std::size_t position = 0;
  // Every piece from the one holding the segment's first element to the one
  // holding `last` must be in place up to `last`.
  for (std::size_t j = j0, i = holding(last); j <= i; ++j) {
    const std::size_t hi = std::min(cuts_[j + 1], last + 1);
    if (hi > cuts_[j]) position = std::max(position, piece_pos_[j] + (hi - cuts_[j]));
  }
  return position;
}

std::size_t StagingOrder::wave_end(std::size_t w) const noexcept {
  return w + 1 < waves_ ? piece_pos_[node_ * waves_ + w + 1] : elements_;
}

}  // namespace zring::collective
