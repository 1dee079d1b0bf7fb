// staging.hpp - a node's own values arriving while the ring runs (internal).
//
// A client that hands its values over through the shared buffer ("staged"
// submission) copies them in while the op already runs, in the order the
// ring reads them, and copies the averages out as they become final. The
// ring learns what is there through LocalStaging; both sides agree on the
// order through StagingOrder.
#pragma once

#include <cstddef>

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
class StagingOrder {
 public:
  StagingOrder(std::size_t elements, std::size_t nodes, std::size_t node) noexcept
      : elements_(elements), nodes_(nodes == 0 ? 1 : nodes), node_(node % nodes_) {}

  [[nodiscard]] std::size_t elements() const noexcept { return elements_; }
  [[nodiscard]] std::size_t segments() const noexcept { return nodes_; }
  [[nodiscard]] std::size_t node() const noexcept { return node_; }
  // The k-th segment in staging order.
  [[nodiscard]] std::size_t segment_at(std::size_t k) const noexcept {
    return (node_ + nodes_ - k % nodes_) % nodes_;
  }
  [[nodiscard]] std::size_t begin(std::size_t s) const noexcept {
    return segment_begin(elements_, nodes_, s);
  }
  [[nodiscard]] std::size_t end(std::size_t s) const noexcept {
    return segment_begin(elements_, nodes_, s + 1);
  }
  // The position just past the first `upto` elements of segment s.
  [[nodiscard]] std::size_t position(std::size_t s, std::size_t upto) const noexcept {
    const std::size_t k = (node_ + nodes_ - s) % nodes_;  // s is the k-th segment
    std::size_t before = 0;
    if (k > 0) {
      // Segments node, node-1, ..., node-k+1: a run that may wrap below 0.
      const std::size_t first = (node_ + nodes_ + 1 - k) % nodes_;  // lowest index of the run
      before = first <= node_ ? end(node_) - begin(first) : end(node_) + (elements_ - begin(first));
    }
    return before + upto;
  }

 private:
  std::size_t elements_;
  std::size_t nodes_;
  std::size_t node_;
};

// What the ring asks of values that arrive while it runs. The waits throw
// zring::Error (timeout) when the client stops handing values over.
class LocalStaging {
 public:
  virtual ~LocalStaging() = default;
  // Blocks until the first `upto` elements of segment s are in place.
  virtual void wait_staged(std::size_t segment, std::size_t upto) = 0;
  // Blocks until every value is in place.
  virtual void wait_all() = 0;
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
