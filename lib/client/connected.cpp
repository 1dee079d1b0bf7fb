// connected.cpp - CompressedAllReduce joined to a zringd over IPC.
//
// One DEALER socket to the daemon's ROUTER. Every request carries an id and
// every reply echoes it, so a late reply to a request that already timed
// out is recognised and ignored. The deadline is one of silence: while an
// op runs the daemon sends a keepalive every heartbeat, so a long op on a
// slow ring is fine, and a daemon that froze is noticed within
// options.timeout. One that died is noticed at once: its end of the socket
// closes (DaemonWatch), and a request that went out on that connection
// fails with peer_lost, as does one sent after it closed to a daemon that
// does not come back within a second.
#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>
#include <variant>
#include <zmq.hpp>
#include <zring/error.hpp>

#include "client/daemon_watch.hpp"
#include "client/impl.hpp"
#include "client/local_aggregator.hpp"
#include "client/staged_transfer.hpp"
#include "client/tensor_views.hpp"
#include "transport/shared_region.hpp"
#include "transport/staging_board.hpp"
#include "transport/zmq_calls.hpp"
#include "wire/wire.hpp"

namespace zring::client {
namespace {

// Values of at least this size travel through the shared buffer.
constexpr std::size_t kSharedBytes = 256 * 1024;

using Clock = std::chrono::steady_clock;

std::string ms(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

// An ipc:// endpoint whose socket file is missing cannot be served: say so
// at once instead of waiting for the timeout.
void check_endpoint(const std::string& endpoint) {
  const std::string prefix = "ipc://";
  if (endpoint.rfind(prefix, 0) != 0) return;
  const std::string path = endpoint.substr(prefix.size());
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw Error(ErrorCode::connection_failed,
                "connect: no zringd socket at " + path + " (" + std::strerror(errno) +
                    "); is zringd running with `ipc: " + endpoint + "` in its config?");
  }
}

// Result values of an op through the shared buffer: faulted in on huge
// pages where the kernel offers them (a 64 MiB result takes 32 faults, not
// 16384), while the ring runs.
std::vector<float> fresh_values(std::size_t n) {
  std::vector<float> v;
  v.reserve(n);
  constexpr std::uintptr_t kPage = 4096;
  const auto first = (reinterpret_cast<std::uintptr_t>(v.data()) + kPage - 1) & ~(kPage - 1);
  const auto last = (reinterpret_cast<std::uintptr_t>(v.data() + n)) & ~(kPage - 1);
  if (last > first + (std::uintptr_t{2} << 20))
    (void)::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);  // advice only
  v.resize(n);
  return v;
}

// The tensors of a map as the staged copy sees them: values from the map,
// averages to `out` (the map itself when in place).
std::vector<TensorIo> tensor_ios(const TensorMap& gradients, TensorMap* out) {
  std::vector<TensorIo> ios;
  std::size_t at = 0;
  for (const auto& [name, tensor] : gradients) {
    float* dest = out ? out->at(name).data().data() : nullptr;
    ios.push_back({tensor.data().data(), dest, tensor.numel(), at});
    at += tensor.numel();
  }
  return ios;
}

// The largest frame a client accepts from zringd (ZMQ_MAXMSGSIZE): values
// below the shared-buffer threshold, and headers naming many tensors.
constexpr std::size_t kMaxReplyBytes = std::size_t{256} << 20;

// What an op is: an all-reduce with the object's method, or a broadcast.
struct OpSpec {
  wire::OpKind kind = wire::OpKind::all_reduce;
  std::uint32_t root = 0;
};

class Connected final : public CompressedAllReduce::Impl {
 public:
  Connected(const std::string& endpoint, CompressionMethod method, const ConnectOptions& options)
      : endpoint_(endpoint),
        options_(options),
        socket_(context_, zmq::socket_type::dealer),
        local_(method, 1),
        method_(std::move(method)) {
    check_endpoint(endpoint);
    socket_.set(zmq::sockopt::linger, 0);
    // Large values travel in the shared buffer: no reply needs more.
    socket_.set(zmq::sockopt::maxmsgsize, static_cast<std::int64_t>(kMaxReplyBytes));
    try {
      transport::retry_interrupted([&] { socket_.connect(endpoint); });
    } catch (const zmq::error_t& e) {
      throw Error(ErrorCode::invalid_argument,
                  "connect: '" + endpoint + "' is not an endpoint ZeroMQ can connect to (" +
                      e.what() +
                      "); zringd's is the `ipc:` of its config, for example "
                      "ipc:///run/zring/zring.sock");
    }
    hello();
    local_ = LocalAggregator(method_, world_size_);
  }

  // The SharedTensors in this object's buffer are no longer where a zringd
  // looks for this process: zero_copy() says so from now on.
  ~Connected() override {
    if (const auto tensors = lent_.lock()) tensors->current = false;
  }
  Connected(const Connected&) = delete;
  Connected& operator=(const Connected&) = delete;

  TensorMap all_reduce(const TensorMap& gradients) override {
    check_inputs(gradients);
    TensorMap out;
    std::vector<TensorIo> ios = tensor_ios(gradients, nullptr);
    reduce(ios, shapes_of_map(gradients), [&] {
      std::size_t i = 0;
      for (const auto& [name, tensor] : gradients) {
        Tensor& t =
            out.emplace(name, Tensor(fresh_values(tensor.numel()), tensor.shape())).first->second;
        ios[i++].out = t.data().data();
      }
    });
    return out;
  }

  void all_reduce_in_place(TensorMap& gradients) override {
    check_inputs(gradients);
    std::vector<TensorIo> ios = tensor_ios(gradients, &gradients);
    reduce(ios, shapes_of_map(gradients), [] {});
  }

  void all_reduce_in_place(const TensorViews& views) override {
    const std::vector<FusedView> fused = fuse_order(views);
    std::vector<TensorIo> ios;
    for (const FusedView& f : fused) ios.push_back({f.view->data, f.view->data, f.numel, f.offset});
    reduce(ios, shapes_of(fused), [] {});
  }

  // A broadcast travels as an all-reduce does (the values frame or the
  // shared buffer, staged when large; every rank hands its values over,
  // only the root's are read), its manifest saying what it is: the method
  // "none", since nothing is compressed, so ranks whose objects have other
  // methods still agree.
  void broadcast(TensorMap& tensors, std::size_t root) override {
    check_inputs(tensors);
    std::vector<TensorIo> ios = tensor_ios(tensors, &tensors);
    reduce(
        ios, shapes_of_map(tensors), [] {}, broadcast_from(root));
  }

  void broadcast(const TensorViews& views, std::size_t root) override {
    const std::vector<FusedView> fused = fuse_order(views);
    std::vector<TensorIo> ios;
    for (const FusedView& f : fused) ios.push_back({f.view->data, f.view->data, f.numel, f.offset});
    reduce(
        ios, shapes_of(fused), [] {}, broadcast_from(root));
  }

  // SharedTensors live in a buffer of their own, which becomes this
  // object's buffer: zringd reads the values there and writes the averages
  // back over them.
  std::shared_ptr<SharedTensors::Storage> make_shared_tensors(const TensorShapes& shapes) override {
    auto storage = SharedTensors::Storage::lay_out(shapes);
    if (storage->elements == 0) {
      storage->allocate_private();
      return storage;
    }
    attach(storage->elements * sizeof(float), false);
    storage->place_in(region_);
    lent_ = storage;
    return storage;
  }

  void all_reduce_in_place(SharedTensors::Storage& tensors) override {
    if (!(tensors.current && tensors.region && tensors.region == region_)) {
      // Not (or no longer) where zringd looks: staged like caller memory.
      TensorViews views;
      for (const auto& [name, shape] : tensors.shapes)
        views.push_back({name, shape, tensors.data + tensors.offsets.at(name)});
      all_reduce_in_place(views);
      return;
    }
    wire::Submit request = submit_for(tensors.shapes, {});
    request.values = wire::ValuesIn::shared_buffer;
    Reply<wire::Result> reply;
    try {
      reply = call<wire::Result>(request, std::nullopt);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::connection_failed || last_reply_was_silence_) throw;
      // The daemon restarted: its buffer went with it. Greet the new one and
      // go through a copy this time (the values are still untouched).
      drop_region();
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
  // them (ios[i].out). after_staging runs once the values are in: the copy
  // form makes its results' memory there, while the ring works.
  template <class AfterStaging>
  void reduce_staged(std::vector<TensorIo>& ios, const TensorShapes& shapes,
                     AfterStaging&& after_staging, const OpSpec& op) {
    wire::Submit request = submit_for(shapes, op);
    request.values = wire::ValuesIn::staged;
    const std::size_t elements = request.manifest.elements();
    const std::size_t bytes = elements * sizeof(float);
    // Staged in the segments of the ring file's full ring, as zringd reads them.
    const collective::StagingOrder order(elements, listed_world_ / local_ranks_,
                                         listed_rank_ / local_ranks_);
    // With retries, an in-place op's values stay the inputs until it is done
    // (the copy form's results are memory of their own).
    const bool in_place = !ios.empty() && ios.front().out == ios.front().in;
    const bool keep_inputs = options_.ring_change_retries != 0 && in_place;
    Attempts attempts(*this);
    for (bool staged_once = false;; staged_once = true) {
      // Never over the values of the SharedTensors that hold the buffer.
      if (!region_ || region_->size() < bytes || lent()) attach(bytes, true);
      transport::StagingBoard& board = transport::board_of(*region_);
      board.reset();
      StagedTransfer transfer(ios, reinterpret_cast<float*>(region_->data()), board, order);
      const std::uint64_t id = send_request(request, std::nullopt);
      transfer.stage();
      if (!staged_once) after_staging();
      Reply<wire::Result> reply;
      try {
        reply = await<wire::Result>(id, false, keep_inputs ? nullptr : &transfer);
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
      if (greeted_ || e.code() != ErrorCode::connection_failed || c_.last_reply_was_silence_)
        return false;
      greeted_ = true;
      c_.drop_region();
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

  // One op over ios (ordered by offset): a small one in the request's
  // values frame, a large one staged through the shared buffer. Before any
  // average comes out, after_submit runs once: the copy form makes its
  // results' memory there (while the ring works, for a staged op).
  template <class AfterSubmit>
  void reduce(std::vector<TensorIo>& ios, const TensorShapes& shapes, AfterSubmit&& after_submit,
              const OpSpec& op = {}) {
    if (elements_of(shapes) * sizeof(float) >= kSharedBytes) {
      reduce_staged(ios, shapes, after_submit, op);
      return;
    }
    const wire::Submit request = submit_for(shapes, op);
    const std::size_t bytes = request.manifest.elements() * sizeof(float);
    Attempts attempts(*this);
    for (;;) {
      zmq::message_t data(bytes);
      for (const TensorIo& io : ios)
        if (io.numel != 0)
          std::memcpy(data.data<float>() + io.offset, io.in, io.numel * sizeof(float));
      Reply<wire::Result> reply;
      try {
        reply = call<wire::Result>(request, std::move(data));
      } catch (const Error& e) {
        if (!attempts.again(e)) throw;
        continue;
      }
      if (reply.message.in_shared_buffer || reply.data.size() != bytes)
        throw Error(ErrorCode::malformed_message,
                    "all_reduce: zringd returned " + std::to_string(reply.data.size()) +
                        " bytes of values for " + std::to_string(bytes / 4) + " elements");
      count(reply.message);
      after_submit();
      for (const TensorIo& io : ios)
        if (io.numel != 0)
          std::memcpy(io.out, reply.data.data<float>() + io.offset, io.numel * sizeof(float));
      return;
    }
  }

  void hello() {
    wire::Hello request;
    request.local_rank = static_cast<std::uint32_t>(options_.local_rank);
    const wire::Welcome welcome = call<wire::Welcome>(request, std::nullopt).message;
    world_size_ = listed_world_ = welcome.world_size;
    rank_ = listed_rank_ = welcome.rank;
    local_ranks_ = std::max<std::size_t>(welcome.local_ranks, 1);
    node_ = welcome.node;
  }

  // Lets go of the buffer (zringd takes another or has lost it); the
  // SharedTensors standing in it, if any, go through a copy from now on.
  void drop_region() {
    if (const auto tensors = lent_.lock()) tensors->current = false;
    lent_.reset();
    region_.reset();
  }

  // Whether the buffer is the one a live SharedTensors stands in.
  bool lent() const {
    const auto tensors = lent_.lock();
    return tensors && tensors->current && tensors->region == region_;
  }

  // A new shared buffer, which zringd takes for this rank instead of the
  // last. With room, it has room to grow, so slightly larger ops do not need
  // another one. A zringd that restarted since the hello does not know
  // this process: it is greeted again, once (else every later large op
  // would fail the same way, its buffer asked for before any retry).
  void attach(std::size_t bytes, bool room) {
    drop_region();
    wire::Attach request;
    request.local_rank = static_cast<std::uint32_t>(options_.local_rank);
    request.bytes = room ? std::bit_ceil(bytes) : bytes;
    Reply<wire::Attached> reply;
    try {
      reply = call<wire::Attached>(request, std::nullopt);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::connection_failed || last_reply_was_silence_) throw;
      hello();
      reply = call<wire::Attached>(request, std::nullopt);
    }
    region_ = transport::SharedRegion::open(reply.message.path, reply.message.bytes);
  }

  // A reply of the kind Answer and the frame after it (empty if none).
  template <class Answer>
  struct Reply {
    Answer message;
    zmq::message_t data;
  };

  // Sends a request (a Hello, Submit or Attach) and waits for its reply, of
  // the kind Answer. Throws the daemon's error, or timeout.
  template <class Answer, class Request>
  Reply<Answer> call(Request request, std::optional<zmq::message_t> data) {
    constexpr bool hello = std::is_same_v<Request, wire::Hello>;
    return await<Answer>(send_request(std::move(request), std::move(data)), hello);
  }

  // Sends a request with a new id (returned), and its values frame if any.
  template <class Request>
  std::uint64_t send_request(Request request, std::optional<zmq::message_t> data) {
    request.request = ++last_request_;
    // When this process gives up on the request: after its timeout of
    // silence from now (steady_clock is the host's CLOCK_MONOTONIC, as
    // zringd's). A zringd that reads it too late refuses it rather than
    // run it with the other ranks' next op.
    request.wait.timeout_ms = static_cast<std::uint32_t>(std::min<std::int64_t>(
        options_.timeout.count(), std::numeric_limits<std::uint32_t>::max()));
    request.wait.sent_ns = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
            .count());
    const std::vector<std::uint8_t> header = wire::encode_ipc(request);
    watch_.sending();
    // Never blocks: with no zringd on the socket, ZeroMQ queues requests up
    // to its high-water mark and would then wait for one forever.
    const auto more = data ? zmq::send_flags::sndmore : zmq::send_flags::none;
    if (!transport::retry_interrupted([&] {
          return socket_.send(zmq::buffer(header.data(), header.size()),
                              more | zmq::send_flags::dontwait);
        }))
      throw Error(ErrorCode::connection_failed,
                  "zringd at " + endpoint_ +
                      " takes no requests (its queue is full: it has been "
                      "gone for a while); is zringd running (systemctl status zringd)?");
    if (data)  // the rest of a message goes with it
      transport::retry_interrupted(
          [&] { return socket_.send(std::move(*data), zmq::send_flags::none); });
    return request.request;
  }

  // What a wait for the reply came to.
  enum class Waited { reply, silence, closed_during, gone };

  // One look at the socket and the connection's state, sleeping up to
  // `wait` for either (no longer than the watch needs to decide). A reply
  // that is there counts, even if the connection closed behind it.
  std::optional<Waited> look(std::chrono::milliseconds wait) {
    zmq::pollitem_t items[2] = {{socket_.handle(), 0, ZMQ_POLLIN, 0}, watch_.item()};
    const auto decides_by = watch_.decides_by();
    if (wait.count() > 0 && decides_by != Clock::time_point::max())
      wait = std::clamp(std::chrono::ceil<std::chrono::milliseconds>(decides_by - Clock::now()),
                        std::chrono::milliseconds(0), wait);
    if (transport::poll_items(items, 2, wait) > 0 && (items[0].revents & ZMQ_POLLIN))
      return Waited::reply;
    switch (watch_.check()) {
      case DaemonWatch::State::open:
        return std::nullopt;
      case DaemonWatch::State::closed_during:
        break;
      case DaemonWatch::State::gone:
        return Waited::gone;
    }
    // What the daemon sent before its end closed is queued ahead of the news.
    zmq::pollitem_t dealer{socket_.handle(), 0, ZMQ_POLLIN, 0};
    if (transport::poll_items(&dealer, 1, std::chrono::milliseconds(0)) > 0) return Waited::reply;
    return Waited::closed_during;
  }

  // Whether the reply is there within `wait`, or what happened instead.
  // With a staged op in flight (and not finished), it copies out what
  // zringd publishes meanwhile, sleeping on the board between looks.
  Waited wait_reply(std::chrono::milliseconds wait, StagedTransfer* staged) {
    const auto until = Clock::now() + wait;
    while (staged && !staged->complete() && !staged->finished()) {
      staged->take_published();
      if (const auto got = look(std::chrono::milliseconds(0))) return *got;
      const auto left = std::chrono::duration_cast<std::chrono::microseconds>(until - Clock::now());
      if (left.count() <= 0) return Waited::silence;
      if (!staged->complete()) staged->sleep(std::min(left, std::chrono::microseconds(2000)));
    }
    for (;;) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now());
      if (left.count() <= 0) return Waited::silence;
      if (const auto got = look(left)) return *got;
    }
  }

  template <class Answer>
  Reply<Answer> await(std::uint64_t id, bool connecting, StagedTransfer* staged = nullptr) {
    auto deadline = Clock::now() + options_.timeout;
    for (;;) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      const Waited waited = left.count() <= 0 ? Waited::silence : wait_reply(left, staged);
      if (waited != Waited::reply) {
        last_reply_was_silence_ = true;
        // zringd may still write the averages of the abandoned op into the
        // shared buffer: the next op takes a new one, and SharedTensors in
        // it become private memory (the same addresses, the same values).
        if (const auto tensors = lent_.lock(); tensors && tensors->current) tensors->give_up();
        drop_region();
        throw waited == Waited::silence ? silence(connecting) : closed(connecting, waited);
      }
      last_reply_was_silence_ = false;
      zmq::message_t frame;
      const auto receive = [this](zmq::message_t& into) {
        // The reply is queued (look() said so); its frames come together.
        return transport::retry_interrupted(
            [&] { return socket_.recv(into, zmq::recv_flags::none); });
      };
      (void)receive(frame);
      zmq::message_t data;
      if (frame.more()) (void)receive(data);
      while (data.more()) (void)receive(data);  // never expected: drop extras
      wire::IpcMessage reply = wire::decode_ipc(frame.data<std::uint8_t>(), frame.size());
      if (wire::request_of(reply) != id) continue;  // a late answer to a request that timed out
      if (std::holds_alternative<wire::Keepalive>(reply)) {
        deadline = Clock::now() + options_.timeout;
        continue;
      }
      if (const auto* error = std::get_if<wire::ErrorReply>(&reply))
        throw Error(error->code, error->text);
      if (auto* answer = std::get_if<Answer>(&reply)) return {std::move(*answer), std::move(data)};
      throw Error(ErrorCode::malformed_message,
                  "zringd at " + endpoint_ + " answered request " + std::to_string(id) +
                      " with an IPC message of kind " +
                      std::to_string(static_cast<int>(wire::kind_of(reply))));
    }
  }

  Error silence(bool connecting) const {
    if (connecting)
      return Error(ErrorCode::connection_failed,
                   "connect: no answer from zringd at " + endpoint_ + " within " +
                       ms(options_.timeout) + "; is zringd running (systemctl status zringd)?");
    return Error(ErrorCode::timeout, "all_reduce: zringd at " + endpoint_ + " (node '" + node_ +
                                         "') went silent for " + ms(options_.timeout) +
                                         " during the op; it may have died or been stopped");
  }

  // The daemon's end of the socket closed: during the op, or before it
  // and it did not come back.
  Error closed(bool connecting, Waited waited) const {
    const std::string how = waited == Waited::closed_during
                                ? std::string(connecting ? "before it answered" : "during the op") +
                                      ": it died or was restarted"
                                : std::string(connecting ? "before the hello" : "before the op") +
                                      " and did not come back within " +
                                      ms(DaemonWatch::kComeBack) + ": it died or was stopped";
    if (connecting)
      return Error(ErrorCode::connection_failed,
                   "connect: zringd at " + endpoint_ + " closed the connection " + how +
                       "; is zringd running (systemctl status zringd)?");
    return Error(ErrorCode::peer_lost,
                 "all_reduce: zringd at " + endpoint_ + " (node '" + node_ +
                     "') closed the connection " + how +
                     "; retry the step once it is back (systemctl status zringd)");
  }

  std::string endpoint_;
  ConnectOptions options_;
  zmq::context_t context_{1};
  zmq::socket_t socket_;
  DaemonWatch watch_{context_, socket_};  // before socket_ connects
  LocalAggregator local_;
  CompressionMethod method_;
  std::size_t world_size_ = 1;    // of the last op's ring (at first: the full ring)
  std::size_t listed_world_ = 1;  // of the ring file's full ring (the welcome's)
  std::size_t listed_rank_ = 0;
  std::size_t rank_ = 0;
  std::size_t local_ranks_ = 1;
  std::string node_;
  std::uint64_t last_request_ = 0;
  bool last_reply_was_silence_ = false;
  std::shared_ptr<transport::SharedRegion> region_;  // large values, once attached
  std::weak_ptr<SharedTensors::Storage> lent_;       // the SharedTensors standing in region_
  CompressedAllReduce::Traffic traffic_;
};

}  // namespace

std::unique_ptr<CompressedAllReduce::Impl> make_connected(const std::string& endpoint,
                                                          CompressionMethod method,
                                                          const ConnectOptions& options) {
  return std::make_unique<Connected>(endpoint, std::move(method), options);
}

}  // namespace zring::client
