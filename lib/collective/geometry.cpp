#include "collective/geometry.hpp"

#include <algorithm>

#include "collective/staging.hpp"

namespace zring::collective {

ChunkGeometry::ChunkGeometry(std::size_t elements, std::size_t segments, std::size_t chunk_elems)
    : elements_(elements), chunk_elems_(std::max<std::size_t>(chunk_elems, 1)) {
  seg_begin_.resize(segments + 1);
  first_chunk_.resize(segments + 1);
  first_chunk_[0] = 0;
  for (std::size_t s = 0; s <= segments; ++s) seg_begin_[s] = segment_begin(elements, segments, s);
  for (std::size_t s = 0; s < segments; ++s) {
    const std::size_t len = seg_begin_[s + 1] - seg_begin_[s];
    first_chunk_[s + 1] = first_chunk_[s] + (len + chunk_elems_ - 1) / chunk_elems_;
  }
}

std::pair<std::size_t, std::size_t> ChunkGeometry::range(std::size_t segment,
                                                         std::size_t chunk) const noexcept {
  const std::size_t begin = seg_begin_[segment] + chunk * chunk_elems_;
  return {begin, std::min(begin + chunk_elems_, seg_begin_[segment + 1])};
}

}  // namespace zring::collective
