// ring_allgather.hpp - every node's bytes to every node, round the ring (internal).
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "collective/link.hpp"
#include "collective/ring_allreduce.hpp"

namespace zring::collective {

// Each node contributes `mine`; returns the contributions of all nodes,
// indexed by node (this node's own is `mine` itself). Node r's bytes travel
// P - 1 hops, cut into chunks of options.chunk_bytes that are forwarded
// without copies as they arrive.
//
// sizes: the byte size of every node's contribution when known in advance
// (and validated: a chunk that does not fit it is dropped); when empty, each
// contribution must be a single message (no larger than the link accepts),
// as for the small manifest exchange that learns the sizes.
//
// arrived: when set, called with (node, bytes) as soon as a node's whole
// contribution is here (this node's own first), while later ones are still
// on the wire, so the caller can work on it meanwhile. It must not throw.
using Arrived = std::function<void(std::size_t node, const Bytes& bytes)>;
std::vector<Bytes> ring_allgather(RingLink& link, Phase phase, Bytes mine,
                                  const std::vector<std::size_t>& sizes,
                                  const RingOptions& options, RingStats& stats,
                                  const Arrived& arrived = {});

}  // namespace zring::collective
