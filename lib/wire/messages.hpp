// messages.hpp - the op types that travel in wire messages (internal).
//
// What an op reduces (Manifest, TensorSpec), what each node tells the others
// before the data moves (NodeSummary, NonFinite), and how a data message of
// an op is told apart (ChunkTag, Phase). lib/wire encodes them (wire.hpp) and
// lib/collective computes with them; they live here, below both, so that
// collective includes wire and never the reverse. Nothing here depends on any
// other layer of lib/ (status.hpp is the library's own, include/zring only).
// lib/collective re-exports them under their old names (collective::Manifest,
// collective::ChunkTag, ...) in manifest.hpp and link.hpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "status.hpp"

namespace zring::wire {

// The phase of an op a data message belongs to.
enum class Phase : std::uint8_t {
  manifest = 1,   // all-gather of each node's manifest, statistics, sizes
  reduce = 2,     // reduce-scatter: partial sums travelling to their owner
  gather = 3,     // all-gather of reduced segments
  blobs = 4,      // all-gather of each node's compressed payloads (sparse methods)
  broadcast = 5,  // a broadcast: the root's values along the ring (segment: the root's node)
  // The direct schedule of a medium op (collective/ring_allreduce.hpp): a
  // node's own values of a chunk, straight to the chunk's owner (hop: the
  // node's place in the segment's summation order, 1 .. N - 1), and the
  // complete sum, straight from the owner to every other node (hop 0).
  to_owner = 6,
  from_owner = 7,
  // An affine op's block statistics of a later wave (plan_affine.cpp),
  // straight from their node to every other (segment: that node, chunk:
  // the wave, 1 .. waves - 1; hop 0): the summary carries wave 0.
  stats = 8,
};

// Identifies one data message within an op. The transport adds and checks
// version, ring generation, op sequence and sender.
struct ChunkTag {
  Phase phase = Phase::manifest;
  // reduce, gather, to_owner, from_owner: segment; manifest, blobs, stats: origin node
  std::uint32_t segment = 0;
  std::uint32_t chunk = 0;  // chunk within the segment or blob
  // How many nodes the message has passed through; manifest/blobs: 0 when
  // its origin sent it straight to every node; to_owner: the sender's place
  // in the segment's summation order; from_owner: 0.
  std::uint32_t hop = 0;

  friend bool operator==(const ChunkTag& a, const ChunkTag& b) {
    return a.phase == b.phase && a.segment == b.segment && a.chunk == b.chunk && a.hop == b.hop;
  }
};

struct TensorSpec {
  std::string name;
  std::vector<std::uint64_t> shape;
  std::uint64_t numel = 0;
  friend bool operator==(const TensorSpec& a, const TensorSpec& b) {
    return a.name == b.name && a.shape == b.shape && a.numel == b.numel;
  }
};

// What an op does with the values. Values are part of the wire format.
enum class OpKind : std::uint8_t {
  all_reduce = 1,  // every rank gets the average of what every rank compressed
  broadcast = 2,   // every rank gets the values of rank `root`, bit for bit
};

// The tensors of an op (sorted by name: the order they are fused in), the
// method, as text, and what the op is. Every rank of an op must submit the
// same manifest.
struct Manifest {
  std::string method;
  std::vector<TensorSpec> tensors;
  OpKind kind = OpKind::all_reduce;
  // broadcast: the rank (of the ring that runs the op, numbered node by
  // node) whose values every rank receives; 0 for an all-reduce.
  std::uint32_t root = 0;
  [[nodiscard]] std::uint64_t elements() const noexcept {
    std::uint64_t total = 0;
    for (const TensorSpec& t : tensors) total += t.numel;
    return total;
  }
  friend bool operator==(const Manifest& a, const Manifest& b) {
    return a.method == b.method && a.tensors == b.tensors && a.kind == b.kind && a.root == b.root;
  }
};

// A non-finite value of a randomk contribution outside the sampled indices:
// it travels on its own so that inf/nan always reach the result.
struct NonFinite {
  std::uint32_t tensor = 0;  // index in the manifest
  std::uint32_t index = 0;   // element within the tensor
  float value = 0.0f;
};

// What one node tells every other node before the data moves: its manifest,
// whether it can take part at all, and what the method needs agreed first.
struct NodeSummary {
  Manifest manifest;
  std::optional<Status> failure;     // this node fails the op, and says why
  std::vector<float> stats;          // affine methods: per-block statistics of its ranks
  std::vector<NonFinite> nonfinite;  // randomk: see NonFinite
  std::uint64_t blob_bytes = 0;      // sparse methods: size of its payload blob
};

}  // namespace zring::wire
