// geometry.hpp - how a fused buffer is cut into ring segments and chunks.
//
// A buffer of `elements` values is split into one segment per node (sizes
// differ by at most one), and each segment into chunks of at most
// chunk_elems values, the unit that is encoded, sent and summed while the
// next one travels.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace zring::collective {

class ChunkGeometry {
 public:
  ChunkGeometry(std::size_t elements, std::size_t segments, std::size_t chunk_elems);

  [[nodiscard]] std::size_t elements() const noexcept { return elements_; }
  [[nodiscard]] std::size_t segments() const noexcept { return seg_begin_.size() - 1; }
  [[nodiscard]] std::size_t chunks(std::size_t segment) const noexcept {
    return first_chunk_[segment + 1] - first_chunk_[segment];
  }
  [[nodiscard]] std::size_t total_chunks() const noexcept { return first_chunk_.back(); }
  // A dense id in [0, total_chunks()) for (segment, chunk).
  [[nodiscard]] std::size_t chunk_id(std::size_t segment, std::size_t chunk) const noexcept {
    return first_chunk_[segment] + chunk;
  }
  // [begin, end) element range of a chunk.
  [[nodiscard]] std::pair<std::size_t, std::size_t> range(std::size_t segment,
                                                          std::size_t chunk) const noexcept;

 private:
  std::size_t elements_;
  std::size_t chunk_elems_;
  std::vector<std::size_t> seg_begin_;    // segments + 1 boundaries
  std::vector<std::size_t> first_chunk_;  // segments + 1 prefix sums of chunk counts
};

}  // namespace zring::collective
