// ring_allgather.hpp - every node's bytes to every node, in one hop (internal).
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

// Two all-gathers in one pass: every node's summary (a single message,
// Phase::manifest) and, right behind it, the data its summary announces
// (Phase::blobs), each sent by its node straight to every other node
// (RingLink::send_to, hop 0): one hop from the last node to begin to
// everyone, where round the ring it takes N - 1; a node sends as many bytes
// either way. Only a node whose data is more than kFrameWindow frames
// sends its summary and data round the ring, to its successor (hop 1),
// each node passing them on (hop 2, ...), so that the window below bounds
// what every node holds. A node sends its data without waiting for anyone
// else's summary, so a node that is ready early puts its data on the wire
// while slower ones are still preparing theirs; and until this node's own
// are ready (mine.ready(): made on another thread, which then wakes this
// one through RingLink::wake) it already takes (and passes on) what the
// others send. Data is cut into
// pieces of about an eighth of it (64 KiB .. chunk_bytes), so that it moves
// in a pipeline. A message's segment is its origin; its hop is 0, or how far
// round the ring its receiver is from the origin.
//
// data_size(node, summary) is called once per node as its summary arrives
// (its own first) and says what data that node announced, or nullopt when
// the summary is unusable (no data is then taken from it). It must not
// throw and must decide the same on every node: it sees the same bytes
// everywhere. Data arrives behind its summary (each connection keeps
// order); a data chunk that comes before its node's summary is dropped.
// Silence for options.timeout is a timeout naming a node still awaited.
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
  std::function<void()> sent;                     // then: right after they went, if set
};
using DataSize = std::function<std::optional<DataSpec>(std::size_t node, const Bytes& summary)>;
using FrameArrived = std::function<void(std::size_t node, std::size_t frame, const Bytes& bytes)>;
WithData ring_allgather_with_data(RingLink& link, const Mine& mine, const DataSize& data_size,
                                  const RingOptions& options, RingStats& stats,
                                  const Arrived& data_arrived = {},
                                  const FrameArrived& frame_arrived = {});

}  // namespace zring::collective
