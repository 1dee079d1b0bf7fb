// ring_allgather.hpp - every node's bytes to every node, round the ring (internal).
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "collective/link.hpp"
#include "collective/ring_allreduce.hpp"

namespace zring::collective {

// arrived: when set, called with (node, bytes) as soon as a node's whole
// contribution is here (this node's own first), while later ones are still
// on the wire, so the caller can work on it meanwhile. It must not throw.
using Arrived = std::function<void(std::size_t node, const Bytes& bytes)>;

// Two all-gathers in one pass round the ring: every node's summary (a
// single message, Phase::manifest) and, right behind it, the data its
// summary announces (Phase::blobs). A node sends its data without waiting
// for anyone else's summary, so a node that is ready early puts its data on
// the wire while slower ones are still preparing theirs; and until this
// node's own are ready (mine.ready(), polled while it is made on another
// thread) it already forwards what the others send. Data is cut into
// pieces of about an eighth of it (64 KiB .. chunk_bytes), so it moves
// round the ring in a pipeline.
//
// data_size(node, summary) is called once per node as its summary arrives
// (its own first) and says what data that node announced, or nullopt when
// the summary is unusable (no data is then taken from it). It must not
// throw and must decide the same on every node: it sees the same bytes
// everywhere. Data arrives behind its summary (each link keeps order); a
// data chunk that comes before its node's summary is dropped.
//
// Framed data (DataSpec::frames > 0) is what a plan makes and reads frame
// by frame, never whole: a node's frames are made one at a time as they
// may go (mine.frame(f), on this thread), handed to frame_arrived in order
// on every node (this node's own as it sends them) and not kept here. A
// node sends its frame f only once every node's frame f - kFrameWindow is
// here (a node with fewer frames has sent all it has), so that when a
// frame of any node arrives, every node's frames up to kFrameWindow before
// it have arrived too: a plan that finishes each frame as soon as every
// node's is here holds at most kFrameWindow + 1 frames of each node.
// Frames may be of any size, together at most DataSpec::bytes.
struct DataSpec {
  std::size_t bytes = 0;
  std::size_t frames = 0;  // 0: bytes in pieces the gather cuts itself
};
inline constexpr std::size_t kFrameWindow = 32;
struct WithData {
  std::vector<Bytes> summaries;
  std::vector<Bytes> data;  // empty for a node that sent frames
};
struct Mine {
  std::function<bool()> ready;                    // this node's summary and data are made
  std::function<std::pair<Bytes, Bytes>()> take;  // then: them (called once)
  std::function<Bytes(std::size_t frame)> frame;  // then its frames, if it announced any
};
using DataSize = std::function<std::optional<DataSpec>(std::size_t node, const Bytes& summary)>;
using FrameArrived = std::function<void(std::size_t node, std::size_t frame, const Bytes& bytes)>;
WithData ring_allgather_with_data(RingLink& link, const Mine& mine, const DataSize& data_size,
                                  const RingOptions& options, RingStats& stats,
                                  const Arrived& data_arrived = {},
                                  const FrameArrived& frame_arrived = {});

}  // namespace zring::collective
