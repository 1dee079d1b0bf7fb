// connected.cpp - CompressedAllReduce joined to a zringd over IPC.
//
// Requests and their replies go over a DaemonChannel (daemon_channel.hpp),
// large values through a SharedBuffer (shared_buffer.hpp). Connected makes
// the ops out of them: which way each op's values travel, when an op is
// submitted again, and what the ops count.
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <zmq.hpp>
#include <zring/error.hpp>

#include "client/daemon_channel.hpp"
#include "client/impl.hpp"
#include "client/local_aggregator.hpp"
#include "client/shared_buffer.hpp"
#include "client/staged_transfer.hpp"
#include "client/tensor_views.hpp"
#include "codec/codec.hpp"
#include "collective/allreduce_op.hpp"
#include "transport/shared_region.hpp"
#include "transport/staging_board.hpp"
#include "wire/wire.hpp"

namespace zring::client {
namespace {

// Values of at least this size are staged through the shared buffer (copied
// in while the ring runs); smaller ones are copied into it whole first.
constexpr std::size_t kSharedBytes = 256 * 1024;

// madvise of the whole pages inside [data, data + n), when they span more
// than `beyond` bytes. Advice only: a kernel that refuses it changes
// nothing but speed.
void advise_pages(const float* data, std::size_t n, int advice, std::uintptr_t beyond = 0) {
  constexpr std::uintptr_t kPage = 4096;
  const auto first = (reinterpret_cast<std::uintptr_t>(data) + kPage - 1) & ~(kPage - 1);
  const auto last = reinterpret_cast<std::uintptr_t>(data + n) & ~(kPage - 1);
  if (last > first + beyond) (void)::madvise(reinterpret_cast<void*>(first), last - first, advice);
}

// Room for a result's values, empty (TensorIo::result), on huge pages
// where the kernel offers them (a 64 MiB result takes 32 faults, not
// 16384); fault_in has them faulted in once the values are staged.
std::vector<float> reserved_values(std::size_t n) {
  std::vector<float> v;
  v.reserve(n);
  advise_pages(v.data(), n, MADV_HUGEPAGE, std::uintptr_t{2} << 20);  // over a huge page
  return v;
}

// Faults the room of the results in while the ring works: the kernel's
// zeroing of fresh pages is the only pass over them before the averages
// are appended; where the kernel refuses, the appends fault.
void fault_in(const std::vector<TensorIo>& ios) {
  for (const TensorIo& io : ios)
    if (io.result) advise_pages(io.result->data(), io.result->capacity(), MADV_POPULATE_WRITE);
}

// The tensors of a map as an op sees them: values from the map, averages
// back into it (in place) or appended to `results`, one per tensor.
std::vector<TensorIo> tensor_ios(const TensorMap& gradients, TensorMap* in_place,
                                 std::vector<std::vector<float>>* results = nullptr) {
  std::vector<TensorIo> ios;
  std::size_t at = 0;
  for (const auto& [name, tensor] : gradients) {
    TensorIo io{tensor.data().data(), nullptr, tensor.numel(), at};
    if (in_place) io.out = in_place->at(name).data().data();
    if (results) io.result = &results->emplace_back(reserved_values(tensor.numel()));
    ios.push_back(io);
    at += tensor.numel();
  }
  return ios;
}

// What an op is: an all-reduce with the object's method, or a broadcast.
struct OpSpec {
  wire::OpKind kind = wire::OpKind::all_reduce;
  std::uint32_t root = 0;
};

class Connected final : public CompressedAllReduce::Impl {
 public:
  Connected(const std::string& endpoint, CompressionMethod method, const ConnectOptions& options)
      : options_(options),
        local_(method, 1),
        method_(std::move(method)),
        channel_(endpoint, options.timeout, [this] {
          ops_buffer_.give_up();
          tensors_buffer_.give_up();
        }) {
    hello();
    local_ = LocalAggregator(method_, world_size_);
  }

  Connected(const Connected&) = delete;
  Connected& operator=(const Connected&) = delete;

  TensorMap all_reduce(const TensorMap& gradients) override {
    check_inputs(gradients);
    std::vector<std::vector<float>> results;
    results.reserve(gradients.size());  // ios point into it
    std::vector<TensorIo> ios = tensor_ios(gradients, nullptr, &results);
    reduce(ios, shapes_of_map(gradients));
    TensorMap out;
    std::size_t i = 0;
    for (const auto& [name, tensor] : gradients)
      out.emplace_hint(out.end(), name, Tensor(std::move(results[i++]), tensor.shape()));
    return out;
  }

  void all_reduce_in_place(TensorMap& gradients) override {
    check_inputs(gradients);
    std::vector<TensorIo> ios = tensor_ios(gradients, &gradients);
    reduce(ios, shapes_of_map(gradients));
  }

  void all_reduce_in_place(const TensorViews& views) override {
    const std::vector<FusedView> fused = fuse_order(views);
    std::vector<TensorIo> ios;
    for (const FusedView& f : fused) ios.push_back({f.view->data, f.view->data, f.numel, f.offset});
    reduce(ios, shapes_of(fused));
  }

  // The inputs staged from where they are, the averages into the outputs;
  // the inputs stay as they were, so an op that meets a change of the ring
  // runs again from them (reduce_staged).
  void all_reduce(const TensorViews& inputs, const TensorViews& outputs) override {
    const std::vector<FusedView> fused = fuse_order(inputs, "all_reduce");
    const std::vector<const TensorView*> out = outputs_for(fused, outputs, "all_reduce");
    std::vector<TensorIo> ios;
    for (std::size_t i = 0; i < fused.size(); ++i)
      ios.push_back({fused[i].view->data, out[i]->data, fused[i].numel, fused[i].offset});
    reduce(ios, shapes_of(fused));
  }

  // A broadcast travels as an all-reduce does (the values frame or the
  // shared buffer, staged when large; every rank hands its values over,
  // only the root's are read), its manifest saying what it is: the method
  // "none", since nothing is compressed, so ranks whose objects have other
  // methods still agree.
  void broadcast(TensorMap& tensors, std::size_t root) override {
    check_inputs(tensors);
    std::vector<TensorIo> ios = tensor_ios(tensors, &tensors);
    reduce(ios, shapes_of_map(tensors), broadcast_from(root));
  }

  void broadcast(const TensorViews& views, std::size_t root) override {
    const std::vector<FusedView> fused = fuse_order(views);
    std::vector<TensorIo> ios;
    for (const FusedView& f : fused) ios.push_back({f.view->data, f.view->data, f.numel, f.offset});
    reduce(ios, shapes_of(fused), broadcast_from(root));
  }

  // SharedTensors live in a buffer of their own, in the tensors slot: zringd
  // reads the values there and writes the averages back over them, and ops
  // of other tensors go through the ops slot's buffer, never this one.
  std::shared_ptr<SharedTensors::Storage> make_shared_tensors(const TensorShapes& shapes) override {
    auto storage = SharedTensors::Storage::lay_out(shapes);
    if (storage->elements == 0) {
      storage->allocate_private();
      return storage;
    }
    attach(tensors_buffer_, storage->elements * sizeof(float), false);
    tensors_buffer_.lend(storage);
    return storage;
  }

  void all_reduce_in_place(SharedTensors::Storage& tensors) override {
    if (!tensors_buffer_.holds(tensors)) {
      // Not (or no longer) where zringd looks: staged like caller memory.
      TensorViews views;
      for (const auto& [name, shape] : tensors.shapes)
        views.push_back({name, shape, tensors.data + tensors.offsets.at(name)});
      all_reduce_in_place(views);
      return;
    }
    wire::Submit request = submit_for(tensors.shapes, {});
    request.values = wire::ValuesIn::shared_buffer;
    request.buffer = wire::SharedSlot::tensors;
    DaemonChannel::Reply<wire::Result> reply;
    try {
      reply = channel_.call<wire::Result>(request, std::nullopt,
                                          &transport::board_of(*tensors_buffer_.region()));
    } catch (const Error& e) {
      if (!channel_.daemon_restarted(e)) throw;
      // The daemon restarted: its buffer went with it. Greet the new one and
      // go through a copy this time (the values are still untouched).
      drop_buffers();
      hello();
      all_reduce_in_place(tensors);
      return;
    }
    if (!reply.message.in_shared_buffer)
      throw Error(ErrorCode::malformed_message,
                  "all_reduce: zringd answered a shared-buffer op without its shared result");
    count(reply.message);
  }

  TensorMap all_reduce_with_peers(const TensorMap& gradients,
                                  const std::vector<CompressedMap>& peers) override {
    return local_.average(gradients, peers);
  }
  CompressedMap compress_for_transmission(const TensorMap& gradients) override {
    return local_.compress(gradients);
  }
  std::size_t world_size() const noexcept override { return world_size_; }
  std::size_t rank() const noexcept override { return rank_; }
  const CompressionMethod& method() const noexcept override { return method_; }
  bool connected() const noexcept override { return true; }
  CompressedAllReduce::Traffic traffic() const noexcept override { return traffic_; }

 private:
  static OpSpec broadcast_from(std::size_t root) {
    if (root > std::numeric_limits<std::uint32_t>::max())  // world_size() is a u32
      throw Error(ErrorCode::invalid_argument,
                  "broadcast: root " + std::to_string(root) + " is beyond any ring's ranks");
    return {wire::OpKind::broadcast, static_cast<std::uint32_t>(root)};
  }

  // A submit request naming the tensors, in name order.
  wire::Submit submit_for(const TensorShapes& shapes, const OpSpec& op) const {
    wire::Submit request;
    request.local_rank = static_cast<std::uint32_t>(options_.local_rank);
    request.manifest.kind = op.kind;
    request.manifest.root = op.root;
    request.manifest.method =
        op.kind == wire::OpKind::broadcast ? std::string("none") : method_.to_string();
    for (const auto& [name, shape] : shapes) {
      std::size_t numel = 1;
      for (std::size_t extent : shape) numel *= extent;
      wire::TensorSpec spec{name, {}, numel};
      for (std::size_t extent : shape) spec.shape.push_back(extent);
      request.manifest.tensors.push_back(std::move(spec));
    }
    return request;
  }

  static std::size_t elements_of(const TensorShapes& shapes) {
    std::size_t n = 0;
    for (const auto& [name, shape] : shapes) n += shape_numel(shape);
    return n;
  }

  // A large op through the shared buffer, staged: the values go in while
  // the ring already runs, and the averages come out as zringd publishes
  // them (to ios[i].out, or appended to ios[i].result).
  void reduce_staged(std::vector<TensorIo>& ios, const TensorShapes& shapes, const OpSpec& op) {
    wire::Submit request = submit_for(shapes, op);
    request.values = wire::ValuesIn::staged;
    request.block_stats = block_stats(ios, request.manifest);
    const std::size_t elements = request.manifest.elements();
    const std::size_t bytes = elements * sizeof(float);
    // Staged in the segments of the ring file's full ring, as zringd reads them.
    const collective::StagingOrder order = collective::staging_order(
        request.manifest, method_, listed_world_ / local_ranks_, listed_rank_ / local_ranks_);
    // With retries, an in-place op's values stay the inputs until it is done
    // (the copy form's results are memory of their own).
    const bool in_place = !ios.empty() && ios.front().out == ios.front().in;
    const bool keep_inputs = options_.ring_change_retries != 0 && in_place;
    // Staged in waves (one local rank), each block's statistics go with its
    // values, after them in the buffer (StagedTransfer::stage).
    const std::size_t stats_floats = order.waves() > 1 && local_ranks_ == 1
                                         ? collective::block_stats_count(request.manifest, method_)
                                         : 0;
    const std::unique_ptr<codec::Codec> stats_codec =
        stats_floats ? codec::make_codec(method_.base()) : nullptr;
    // (A buffer for them is made to measure: rounded up to a power of two,
    // as others are for the ops to come, a 64 MiB op's would take 128 MiB.)
    const std::size_t room =
        stats_floats ? (transport::stats_area(elements) + stats_floats) * sizeof(float) : bytes;
    Attempts attempts(*this);
    for (;;) {
      if (!ops_buffer_.region() || ops_buffer_.region()->size() < room)
        attach(ops_buffer_, room, stats_floats == 0);
      transport::SharedRegion& region = *ops_buffer_.region();
      transport::StagingBoard& board = transport::board_of(region);
      board.reset(stats_floats);
      StagedTransfer transfer(ios, reinterpret_cast<float*>(region.data()), board, order,
                              dynamic_cast<const codec::AffineCodec*>(stats_codec.get()));
      const std::uint64_t id = channel_.send_request(request, std::nullopt);
      transfer.stage();
      fault_in(ios);
      DaemonChannel::Reply<wire::Result> reply;
      try {
        reply = channel_.await<wire::Result>(id, false, keep_inputs ? nullptr : &transfer, &board);
      } catch (const Error& e) {
        // Only while the caller's values are as they were.
        if ((in_place && transfer.copied_any()) || !attempts.again(e)) throw;
        continue;
      }
      if (!reply.message.in_shared_buffer)
        throw Error(ErrorCode::malformed_message,
                    "all_reduce: zringd answered a staged op without its shared result");
      transfer.take_rest();
      count(reply.message);
      return;
    }
  }

  // An affine method's statistics of every block of this rank's values
  // (wire::Submit::block_stats), one read of them before they are staged:
  // zringd's summary then goes out at once, instead of after the last value
  // is copied in, and the staging overlaps the ring's data. Empty when the
  // op does not take them, or several local ranks make the node's
  // statistics together (zringd combines them).
  std::vector<float> block_stats(const std::vector<TensorIo>& ios,
                                 const wire::Manifest& manifest) const {
    if (local_ranks_ != 1) return {};
    const std::size_t count =
        collective::client_block_stats(manifest, method_, listed_world_ / local_ranks_);
    if (count == 0) return {};
    const auto codec = codec::make_codec(method_.base());
    const auto& affine = dynamic_cast<const codec::AffineCodec&>(*codec);
    const std::size_t per_block = affine.stats_per_block();
    std::vector<float> stats(count);
    float* at = stats.data();
    for (const TensorIo& io : ios) {  // in manifest order, as zringd's blocks
      for (std::size_t b = 0; b < io.numel; b += codec::kBlockElems, at += per_block)
        affine.block_stats(io.in + b, std::min(codec::kBlockElems, io.numel - b), at);
    }
    return stats;
  }

  // Whether an op whose inputs are intact is submitted again after `e`: once
  // after the daemon restarted since we connected (it is greeted again
  // first), and up to ring_change_retries times after ring_changed (the
  // caller's on_ring_change hears of each).
  class Attempts {
   public:
    explicit Attempts(Connected& c) : c_(c) {}
    bool again(const Error& e) {
      if (e.code() == ErrorCode::ring_changed) {
        if (ring_changes_ == c_.options_.ring_change_retries) return false;
        ++ring_changes_;
        if (c_.options_.on_ring_change) c_.options_.on_ring_change(e);
        return true;
      }
      if (greeted_ || !c_.channel_.daemon_restarted(e)) return false;
      greeted_ = true;
      c_.drop_buffers();
      c_.hello();
      return true;
    }

   private:
    Connected& c_;
    std::size_t ring_changes_ = 0;
    bool greeted_ = false;
  };

  void count(const wire::Result& result) {
    // world_size() and rank() follow the ring that ran the last op.
    if (result.world_size != 0 && result.rank < result.world_size) {
      world_size_ = result.world_size;
      rank_ = result.rank;
    }
    traffic_.wire_bytes += result.wire_bytes;
    traffic_.dense_bytes += result.dense_bytes;
    ++traffic_.ops;
  }

  static TensorShapes shapes_of_map(const TensorMap& gradients) {
    TensorShapes shapes;
    for (const auto& [name, tensor] : gradients) shapes.emplace(name, tensor.shape());
    return shapes;
  }

  // One op over ios (ordered by offset): a small one copied whole into the
  // shared buffer (or, without one, in the request's values frame), a large
  // one staged through it.
  void reduce(std::vector<TensorIo>& ios, const TensorShapes& shapes, const OpSpec& op = {}) {
    if (elements_of(shapes) * sizeof(float) >= kSharedBytes) {
      reduce_staged(ios, shapes, op);
      return;
    }
    const wire::Submit request = submit_for(shapes, op);
    const std::size_t bytes = request.manifest.elements() * sizeof(float);
    Attempts attempts(*this);
    for (;;) {
      // Through the shared buffer when there is one: the answer is then a
      // wake on its board, which zringd's ring thread writes itself, where a
      // values frame would come back through zringd's io thread and both
      // sockets.
      transport::SharedRegion* region = small_buffer(bytes);
      wire::Submit submit = request;
      std::optional<zmq::message_t> frame;
      float* values = nullptr;
      if (region) {
        submit.values = wire::ValuesIn::shared_buffer;
        values = reinterpret_cast<float*>(region->data());
      } else {
        values = frame.emplace(bytes).data<float>();
      }
      for (const TensorIo& io : ios)
        if (io.numel != 0) std::memcpy(values + io.offset, io.in, io.numel * sizeof(float));
      DaemonChannel::Reply<wire::Result> reply;
      try {
        reply = channel_.call<wire::Result>(submit, std::move(frame),
                                            region ? &transport::board_of(*region) : nullptr);
      } catch (const Error& e) {
        if (!attempts.again(e)) throw;
        continue;
      }
      if (region && !reply.message.in_shared_buffer)
        throw Error(ErrorCode::malformed_message,
                    "all_reduce: zringd answered a shared-buffer op without its shared result");
      if (!region && (reply.message.in_shared_buffer || reply.data.size() != bytes))
        throw Error(ErrorCode::malformed_message,
                    "all_reduce: zringd returned " + std::to_string(reply.data.size()) +
                        " bytes of values for " + std::to_string(bytes / 4) + " elements");
      const float* averages = region ? values : reply.data.data<float>();
      count(reply.message);
      for (const TensorIo& io : ios) {
        const float* from = averages + io.offset;
        if (io.result)
          io.result->assign(from, from + io.numel);
        else if (io.numel != 0)
          std::memcpy(io.out, from, io.numel * sizeof(float));
      }
      return;
    }
  }

  // The shared buffer for a small op of `bytes`: the attached one when no
  // SharedTensors stand in it and it is large enough, else a new one of
  // kSharedBytes (the first small op's: every later one fits). Null for an
  // empty op, or when no buffer can be made (memory or files short on
  // either side: the values go in a frame then); any other failure (zringd
  // silent or gone) is the op's.
  transport::SharedRegion* small_buffer(std::size_t bytes) {
    if (bytes == 0) return nullptr;
    if (!ops_buffer_.region() || ops_buffer_.region()->size() < bytes) {
      try {
        attach(ops_buffer_, kSharedBytes, true);
      } catch (const Error& e) {
        if (e.code() != ErrorCode::resource_limit && e.code() != ErrorCode::system_error) throw;
        return nullptr;
      }
    }
    return ops_buffer_.region().get();
  }

  void hello() {
    wire::Hello request;
    request.local_rank = static_cast<std::uint32_t>(options_.local_rank);
    const wire::Welcome welcome = channel_.call<wire::Welcome>(request, std::nullopt).message;
    world_size_ = listed_world_ = welcome.world_size;
    rank_ = listed_rank_ = welcome.rank;
    local_ranks_ = std::max<std::size_t>(welcome.local_ranks, 1);
    channel_.set_node(welcome.node);
    // Alone on its node, this process's ops in the shared buffer start on
    // zringd's ring thread: no other rank's request is to wait for.
    channel_.use_bell(local_ranks_ == 1);
  }

  // A new shared buffer in buffer's slot (SharedBuffer::attach). A zringd
  // that restarted since the hello does not know this process: it is
  // greeted again, once (else every later large op would fail the same
  // way, its buffer asked for before any retry); both buffers went with it.
  void attach(SharedBuffer& buffer, std::size_t bytes, bool room) {
    const auto local_rank = static_cast<std::uint32_t>(options_.local_rank);
    try {
      buffer.attach(channel_, local_rank, bytes, room);
    } catch (const Error& e) {
      if (!channel_.daemon_restarted(e)) throw;
      drop_buffers();
      hello();
      buffer.attach(channel_, local_rank, bytes, room);
    }
  }

  void drop_buffers() {
    ops_buffer_.drop();
    tensors_buffer_.drop();
  }

  ConnectOptions options_;
  LocalAggregator local_;
  CompressionMethod method_;
  DaemonChannel channel_;
  // Both given up by channel_ when it gives up on a request.
  SharedBuffer ops_buffer_{wire::SharedSlot::ops};          // ops of caller memory
  SharedBuffer tensors_buffer_{wire::SharedSlot::tensors};  // the latest SharedTensors
  std::size_t world_size_ = 1;    // of the last op's ring (at first: the full ring)
  std::size_t listed_world_ = 1;  // of the ring file's full ring (the welcome's)
  std::size_t listed_rank_ = 0;
  std::size_t rank_ = 0;
  std::size_t local_ranks_ = 1;
  CompressedAllReduce::Traffic traffic_;
};

}  // namespace

std::unique_ptr<CompressedAllReduce::Impl> make_connected(const std::string& endpoint,
                                                          CompressionMethod method,
                                                          const ConnectOptions& options) {
  return std::make_unique<Connected>(endpoint, std::move(method), options);
}

}  // namespace zring::client
