#include "collective/gather_allreduce.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <zring/error.hpp>

#include "collective/float_sum.hpp"
#include "collective/staging.hpp"

namespace zring::collective {

void GatheredValues::floats(const RingLink& link, std::size_t count,
                            std::vector<float>& values) const {
  const std::size_t nodes = link.nodes();
  values.resize(nodes * count);
  for (std::size_t n = 0; n < nodes; ++n) {
    const std::size_t size = n < arrived_.size() ? arrived_[n].size() : 0;
    if (size != count * sizeof(float)) {
      throw Error(ErrorCode::malformed_message,
                  link.describe(n) + " sent " + std::to_string(size) + " bytes of values where " +
                      std::to_string(count * sizeof(float)) + " were expected");
    }
    if (size != 0) std::memcpy(values.data() + n * count, arrived_[n].data(), size);
  }
}

// Segment s of the ring starts at node s, whose values go to node s + 1 as
// the partial sum of one node (lane.carrying(1)); node s + h adds its own to
// the partial sum of h nodes and passes on the sum of h + 1; node s - 1 adds
// the last and sends the complete sum (lane.carrying(N)) round, which every
// node decodes. Here each of those steps is the lane's own encode and
// decode_add, block by block, as the ring does them.
template <class Lane>
void gather_allreduce(const Lane& lane, std::size_t nodes, const float* contributions,
                      float* result, std::size_t elements, std::size_t average_over) {
  // Scratch of one block, or of the op when it is smaller (most ops that
  // come here are: a one-float op need not clear 48 KiB).
  const std::size_t block = std::min<std::size_t>(4096, std::max<std::size_t>(elements, 1));
  std::vector<Lane> lanes;
  for (std::size_t c = 0; c <= nodes; ++c)
    lanes.push_back(lane.carrying(std::max<std::size_t>(c, 1)));
  std::vector<float> acc(block);
  std::vector<std::uint8_t> wire(lanes[nodes].wire_bytes(block) + lanes[1].wire_bytes(block));
  for (std::size_t s = 0; s < nodes; ++s) {
    const std::size_t end = segment_begin(elements, nodes, s + 1);
    for (std::size_t at = segment_begin(elements, nodes, s); at < end; at += block) {
      const std::size_t len = std::min(block, end - at);
      std::copy_n(contributions + s * elements + at, len, acc.data());
      for (std::size_t h = 1; h < nodes; ++h) {
        const float* mine = contributions + ((s + h) % nodes) * elements + at;
        lanes[h].encode(acc.data(), len, wire.data());
        lanes[h].decode_add(wire.data(), len, mine, acc.data());
      }
      lanes[nodes].encode(acc.data(), len, wire.data());
      lanes[nodes].decode(wire.data(), len, result + at);
      if (average_over > 1) divide(result + at, len, average_over);
    }
  }
}

template void gather_allreduce<FloatLane>(const FloatLane&, std::size_t, const float*, float*,
                                          std::size_t, std::size_t);
template void gather_allreduce<HalfLane>(const HalfLane&, std::size_t, const float*, float*,
                                         std::size_t, std::size_t);

}  // namespace zring::collective
