// zring/compressed_all_reduce.hpp - the client API: compress, aggregate, average.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include <zring/compression.hpp>
#include <zring/error.hpp>
#include <zring/shared_tensors.hpp>
#include <zring/tensor.hpp>

namespace zring {

// Options for CompressedAllReduce::connect.
struct ConnectOptions {
  // Which of the daemon's local_ranks this process is (0 .. local_ranks-1).
  std::size_t local_rank = 0;
  // Deadline of every request to the daemon (connect, all_reduce). A request
  // that is not answered in time throws zring::Error(timeout); it never hangs.
  std::chrono::milliseconds timeout{30000};
  // An op that meets a change of the ring's members (a node dropped, back
  // or taken in: ErrorCode::ring_changed) is submitted again, with the same
  // inputs, on the new ring, up to this many times; 0: the error reaches the
  // caller. Ops of a TensorMap or TensorViews keep their inputs for it: with
  // retries, their averages are copied out once the op is done, not while it
  // runs. SharedTensors are never submitted again (the daemon writes the
  // averages over the values as the ring makes them): their error reaches
  // the caller. docs/membership.md says when an op meets a change.
  std::size_t ring_change_retries = 0;
  // Called with the ring_changed error before each retry (on the calling
  // thread): to log the change. May be empty.
  std::function<void(const Error&)> on_ring_change;
};

// Distributed gradient aggregator with compression.
//
// Standalone (constructor): no transport.
//   world_size == 1: all_reduce compresses and decompresses, so the caller
//                    sees the real compression error.
//   world_size > 1:  all_reduce throws no_communicator; all_reduce_with_peers
//                    performs the real average given the peers' contributions.
// Connected (connect): all_reduce goes round the ring of zringd daemons and
//   returns, on every rank, the same average of what each rank compressed.
//
// Not thread-safe: one object per training process (or per thread).
// With error feedback, the residual of each tensor (by name) is kept across
// calls: in this object when standalone, in the daemon when connected.
class CompressedAllReduce {
 public:
  CompressedAllReduce(CompressionMethod method, std::size_t world_size);
  // Joins the zringd listening on endpoint (for example
  // "ipc:///run/zring/zringd.sock"); learns the world size and this rank.
  // Throws connection_failed / timeout when the daemon does not answer.
  static CompressedAllReduce connect(const std::string& endpoint, CompressionMethod method,
                                     ConnectOptions options = {});

  CompressedAllReduce(CompressedAllReduce&&) noexcept;
  CompressedAllReduce& operator=(CompressedAllReduce&&) noexcept;
  CompressedAllReduce(const CompressedAllReduce&) = delete;
  CompressedAllReduce& operator=(const CompressedAllReduce&) = delete;
  ~CompressedAllReduce();

  // Compresses, aggregates and averages gradients across the process group.
  // The result has the same names and shapes as the input.
  [[nodiscard]] TensorMap all_reduce(const TensorMap& gradients);

  // The same op for a map the caller gives up (`all_reduce(std::move(g))`,
  // or a temporary), with the same bits: the result is that map, its
  // values averaged as all_reduce_in_place does. Connected, the averages
  // are written where the values were: no new memory per call, and the
  // speed of all_reduce_in_place. When it throws, the map the caller moved
  // from is as all_reduce_in_place leaves it.
  [[nodiscard]] TensorMap all_reduce(TensorMap&& gradients);

  // The same op as all_reduce, with the averages written over the values of
  // `gradients` (same bits as all_reduce would return). Connected, it
  // allocates nothing per call: the form for large tensors in a loop. When
  // it throws, `gradients` is unchanged, except after an op of 256 KiB or
  // more that failed half-way without ring_change_retries (then partly
  // averaged: the averages are copied out as they are final).
  void all_reduce_in_place(TensorMap& gradients);

  // The same op for tensors in the caller's own memory, the averages written
  // over their values: the same bits as all_reduce of a TensorMap with these
  // names, shapes and values. Names must be distinct and every data non-null
  // (or the shape empty of values): invalid_argument otherwise, naming the
  // tensor. Connected, the values are staged through the shared buffer
  // chunk by chunk while the ring already runs, and the averages copied
  // back as they become final. When it throws, the values are unchanged,
  // except after an op that failed half-way without ring_change_retries
  // (then partly averaged, as for SharedTensors).
  void all_reduce_in_place(const TensorViews& tensors);

  // The same op out of place, into the caller's own memory (as
  // MPI_Allreduce with a send and a receive buffer): the averages of
  // `inputs` written to `outputs`, the same bits as all_reduce of a
  // TensorMap with the inputs' names, shapes and values; the inputs are
  // only read. Every input needs exactly one output of its name and shape,
  // and no output may share memory with another output or an input (use
  // all_reduce_in_place for that): invalid_argument otherwise, naming the
  // tensor. Connected, the inputs are staged through the shared buffer while
  // the ring already runs and the averages written to the outputs as they
  // become final: no new memory per call, and the inputs stay as they were,
  // so an op that meets a change of the ring runs again from them
  // (ring_change_retries). When it throws, the inputs are unchanged and the
  // outputs may hold part of the averages.
  void all_reduce(const TensorViews& inputs, const TensorViews& outputs);

  // Tensors for all_reduce_in_place(SharedTensors&), zero-filled. Connected,
  // they live in a buffer this process shares with its zringd, apart from
  // the one the object's ops of other tensors go through, and the most
  // recently made SharedTensors of an object keep it until the daemon
  // restarts or goes silent and the object gives the buffer up: after that
  // they still work, with one copy each way (zero_copy() tells). Standalone,
  // they are ordinary memory. Throws invalid_argument when a shape's size
  // overflows.
  [[nodiscard]] SharedTensors make_shared_tensors(const TensorShapes& shapes);

  // all_reduce_in_place for SharedTensors: the same op, the same bits as
  // all_reduce would return, the averages written over the values. When it
  // throws, the values are those before the call or, for a connected object
  // whose op failed half-way, partly averaged: set them again before
  // retrying. After a timeout zringd can no longer write into them.
  void all_reduce_in_place(SharedTensors& tensors);

  // Broadcast: after it returns, every rank's `tensors` hold, bit for bit,
  // the values of rank `root` (a rank of the ring that runs the op, as
  // rank() and world_size() number them: node by node). Every rank passes
  // the same names and shapes and the same root (otherwise every rank gets
  // manifest_mismatch naming the first difference and the ranks). Nothing
  // is compressed, whatever method(): any bit pattern (NaN payloads, -0.0)
  // arrives as it left, and no error-feedback residual changes. This is how
  // a rank that joins gets the current weights from a live one
  // (docs/membership.md). Throws invalid_argument when root >= world_size()
  // (or >= the op's ring's ranks, on every rank, should the ring have
  // shrunk since), and as all_reduce otherwise (timeout, peer_lost, ...);
  // a standalone object with world_size 1 has nothing to do (root must be
  // 0), one with more throws no_communicator. When it throws, `tensors`
  // are unchanged, except after an op of 256 KiB or more (staged through
  // the shared buffer, copied out as the values arrive) that failed
  // half-way: then a prefix of them may already hold the root's values.
  // Either way, retry it.
  void broadcast(TensorMap& tensors, std::size_t root);

  // The same for tensors in the caller's own memory (names distinct, data
  // non-null: invalid_argument otherwise, naming the tensor), with the
  // same guarantees when it throws.
  void broadcast(const TensorViews& tensors, std::size_t root);

  // The genuine compressed all-reduce given the other ranks' compressed
  // gradients (one map per other rank): each parameter's contributions are
  // summed in the dense domain and divided by the number of contributions.
  // Throws size_mismatch when a peer's gradient has another length,
  // missing_tensor when names differ, count_mismatch when
  // peers.size() + 1 != world_size().
  [[nodiscard]] TensorMap all_reduce_with_peers(const TensorMap& gradients,
                                                const std::vector<CompressedMap>& peers);

  // Compresses gradients for transmission to the other ranks (with error
  // feedback, the residual is updated exactly as all_reduce would).
  [[nodiscard]] CompressedMap compress_for_transmission(const TensorMap& gradients);

  // Connected: the ranks of the ring that ran this object's last op (ranks
  // numbered node by node in it), and this rank's place among them; before
  // the first op, the ring file's full ring. When nodes are gone the ring
  // is smaller (docs/membership.md): an op's average is over its ranks.
  [[nodiscard]] std::size_t world_size() const noexcept;
  [[nodiscard]] std::size_t rank() const noexcept;
  [[nodiscard]] const CompressionMethod& method() const noexcept;
  [[nodiscard]] bool connected() const noexcept;

  // Bytes this object's all_reduce calls put on the wire (connected: what
  // the ring moved for the ops, as reported by the daemon; standalone: the
  // payload bytes), and what dense float32 would have cost.
  struct Traffic {
    std::uint64_t wire_bytes = 0;
    std::uint64_t dense_bytes = 0;
    std::uint64_t ops = 0;
  };
  [[nodiscard]] Traffic traffic() const noexcept;

  class Impl;

 private:
  explicit CompressedAllReduce(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace zring
