// connected.cpp - CompressedAllReduce joined to a zringd over IPC.
//
// One DEALER socket to the daemon's ROUTER. Every request carries an id and
// every reply echoes it, so a late reply to a request that already timed
// out is recognised and ignored. The deadline is one of silence: while an
// op runs the daemon sends a keepalive every heartbeat, so a long op on a
// slow ring is fine, and a daemon that died or froze is noticed within
// options.timeout.
#include <sys/stat.h>

#include <bit>
#include <cstring>
#include <optional>

#include <zmq.hpp>

#include <zring/error.hpp>

#include "client/impl.hpp"
#include "client/local_aggregator.hpp"
#include "transport/shared_region.hpp"
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

// The largest frame a client accepts from zringd (ZMQ_MAXMSGSIZE): values
// below the shared-buffer threshold, and headers naming many tensors.
constexpr std::size_t kMaxReplyBytes = std::size_t{256} << 20;

class Connected final : public CompressedAllReduce::Impl {
 public:
  Connected(const std::string& endpoint, CompressionMethod method, const ConnectOptions& options)
      : endpoint_(endpoint), options_(options), socket_(context_, zmq::socket_type::dealer),
        local_(method, 1), method_(std::move(method)) {
    check_endpoint(endpoint);
    socket_.set(zmq::sockopt::linger, 0);
    // Large values travel in the shared buffer: no reply needs more.
    socket_.set(zmq::sockopt::maxmsgsize, static_cast<std::int64_t>(kMaxReplyBytes));
    socket_.connect(endpoint);
    hello();
    local_ = LocalAggregator(method_, world_size_);
  }

  TensorMap all_reduce(const TensorMap& gradients) override {
    Reply reply = reduce(gradients);
    TensorMap out;
    std::size_t at = 0;
    for (const auto& [name, tensor] : gradients) {
      std::vector<float> v(tensor.numel());
      if (!v.empty()) std::memcpy(v.data(), reply.values + at, v.size() * 4);
      at += v.size() * 4;
      out.emplace(name, Tensor(std::move(v), tensor.shape()));
    }
    return out;
  }

  void all_reduce_in_place(TensorMap& gradients) override {
    Reply reply = reduce(gradients);
    std::size_t at = 0;
    for (auto& [name, tensor] : gradients) {
      if (tensor.numel() != 0) std::memcpy(tensor.data().data(), reply.values + at, tensor.numel() * 4);
      at += tensor.numel() * 4;
    }
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
      // Not (or no longer) where zringd looks: through a copy.
      TensorMap copy = tensors.tensors();
      all_reduce_in_place(copy);
      tensors.set(copy);
      return;
    }
    wire::IpcHeader request = header_for(tensors.shapes);
    request.kind = wire::IpcKind::submit_shared;
    std::pair<wire::IpcHeader, zmq::message_t> reply;
    try {
      reply = call(request, std::nullopt);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::connection_failed || last_reply_was_silence_) throw;
      // The daemon restarted: its buffer went with it. Greet the new one and
      // go through a copy this time (the values are still untouched).
      drop_region();
      hello();
      all_reduce_in_place(tensors);
      return;
    }
    if (reply.first.kind != wire::IpcKind::result_shared)
      throw Error(ErrorCode::malformed_message,
                  "all_reduce: zringd answered a shared-buffer op without its shared result");
    count(reply.first);
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
  // The averages of one op: in the shared buffer or in the reply's frame.
  struct Reply {
    zmq::message_t frame;
    const std::uint8_t* values = nullptr;
  };

  // A submit request naming the tensors, in name order.
  wire::IpcHeader header_for(const TensorShapes& shapes) const {
    wire::IpcHeader request;
    request.local_rank = static_cast<std::uint32_t>(options_.local_rank);
    request.manifest.method = method_.to_string();
    for (const auto& [name, shape] : shapes) {
      std::size_t numel = 1;
      for (std::size_t extent : shape) numel *= extent;
      collective::TensorSpec spec{name, {}, numel};
      for (std::size_t extent : shape) spec.shape.push_back(extent);
      request.manifest.tensors.push_back(std::move(spec));
    }
    return request;
  }

  void count(const wire::IpcHeader& result) {
    traffic_.wire_bytes += result.wire_bytes;
    traffic_.dense_bytes += result.dense_bytes;
    ++traffic_.ops;
  }

  Reply reduce(const TensorMap& gradients) {
    TensorShapes shapes;
    for (const auto& [name, tensor] : gradients) shapes.emplace(name, tensor.shape());
    wire::IpcHeader request = header_for(shapes);
    const std::size_t bytes = request.manifest.elements() * sizeof(float);
    const std::size_t total = request.manifest.elements();
    std::pair<wire::IpcHeader, zmq::message_t> reply;
    try {
      reply = submit(request, gradients, bytes);
    } catch (const Error& e) {
      // The daemon restarted since we connected: greet it again, once.
      if (e.code() != ErrorCode::connection_failed || last_reply_was_silence_) throw;
      drop_region();
      hello();
      reply = submit(request, gradients, bytes);
    }
    const bool shared = reply.first.kind == wire::IpcKind::result_shared && region_;
    const std::size_t got = shared ? bytes : reply.second.size();
    if (got != bytes) {
      throw Error(ErrorCode::malformed_message,
                  "all_reduce: zringd returned " + std::to_string(got) +
                      " bytes of values for " + std::to_string(total) + " elements");
    }
    count(reply.first);
    Reply out{std::move(reply.second), nullptr};
    out.values = shared ? region_->data() : out.frame.data<std::uint8_t>();
    return out;
  }

  void hello() {
    wire::IpcHeader request;
    request.kind = wire::IpcKind::hello;
    request.local_rank = static_cast<std::uint32_t>(options_.local_rank);
    auto [welcome, unused] = call(request, std::nullopt);
    world_size_ = welcome.world_size;
    rank_ = welcome.rank;
    node_ = welcome.node;
  }

  // Large values go through the shared buffer, small ones in the message.
  std::pair<wire::IpcHeader, zmq::message_t> submit(wire::IpcHeader request,
                                                    const TensorMap& gradients, std::size_t bytes) {
    if (bytes < kSharedBytes) {
      request.kind = wire::IpcKind::submit;
      zmq::message_t data(bytes);
      fuse(gradients, data.data<std::uint8_t>());
      return call(request, std::move(data));
    }
    // Never over the values of the SharedTensors that hold the buffer.
    if (!region_ || region_->size() < bytes || lent()) attach(bytes, true);
    fuse(gradients, region_->data());
    request.kind = wire::IpcKind::submit_shared;
    return call(request, std::nullopt);
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
  // another one.
  void attach(std::size_t bytes, bool room) {
    drop_region();
    wire::IpcHeader request;
    request.kind = wire::IpcKind::attach;
    request.local_rank = static_cast<std::uint32_t>(options_.local_rank);
    request.wire_bytes = room ? std::bit_ceil(bytes) : bytes;
    auto [reply, unused] = call(request, std::nullopt);
    region_ = transport::SharedRegion::open(reply.text, reply.wire_bytes);
  }

  static void fuse(const TensorMap& gradients, std::uint8_t* out) {
    for (const auto& [name, tensor] : gradients) {
      if (tensor.numel() != 0) std::memcpy(out, tensor.data().data(), tensor.numel() * 4);
      out += tensor.numel() * 4;
    }
  }

  // Sends a request and waits for its reply: the header and, if any, the
  // values frame. Throws the daemon's error, or timeout.
  std::pair<wire::IpcHeader, zmq::message_t> call(wire::IpcHeader request,
                                                   std::optional<zmq::message_t> data) {
    request.request = ++last_request_;
    const std::vector<std::uint8_t> header = wire::encode_ipc_header(request);
    const auto more = data ? zmq::send_flags::sndmore : zmq::send_flags::none;
    socket_.send(zmq::buffer(header.data(), header.size()), more);
    if (data) socket_.send(std::move(*data), zmq::send_flags::none);
    return await(request.request, request.kind == wire::IpcKind::hello);
  }

  std::pair<wire::IpcHeader, zmq::message_t> await(std::uint64_t id, bool connecting) {
    auto deadline = Clock::now() + options_.timeout;
    for (;;) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
      if (left.count() <= 0 || zmq::poll(&item, 1, left) == 0) {
        last_reply_was_silence_ = true;
        // zringd may still write the averages of the abandoned op into the
        // shared buffer: the next op takes a new one, and SharedTensors in
        // it become private memory (the same addresses, the same values).
        if (const auto tensors = lent_.lock(); tensors && tensors->current) tensors->give_up();
        drop_region();
        throw silence(connecting);
      }
      last_reply_was_silence_ = false;
      zmq::message_t frame;
      (void)socket_.recv(frame);
      zmq::message_t data;
      if (frame.more()) (void)socket_.recv(data);
      while (data.more()) (void)socket_.recv(data);  // never expected: drop extras
      wire::IpcHeader reply = wire::decode_ipc_header(frame.data<std::uint8_t>(), frame.size());
      if (reply.request != id) continue;  // a late answer to a request that timed out
      if (reply.kind == wire::IpcKind::keepalive) {
        deadline = Clock::now() + options_.timeout;
        continue;
      }
      if (reply.kind == wire::IpcKind::error)
        throw Error(static_cast<ErrorCode>(reply.error_code), reply.text);
      return {std::move(reply), std::move(data)};
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

  std::string endpoint_;
  ConnectOptions options_;
  zmq::context_t context_{1};
  zmq::socket_t socket_;
  LocalAggregator local_;
  CompressionMethod method_;
  std::size_t world_size_ = 1;
  std::size_t rank_ = 0;
  std::string node_;
  std::uint64_t last_request_ = 0;
  bool last_reply_was_silence_ = false;
  std::shared_ptr<transport::SharedRegion> region_;  // large values, once attached
  std::weak_ptr<SharedTensors::Storage> lent_;        // the SharedTensors standing in region_
  CompressedAllReduce::Traffic traffic_;
};

}  // namespace

std::unique_ptr<CompressedAllReduce::Impl> make_connected(const std::string& endpoint,
                                                          CompressionMethod method,
                                                          const ConnectOptions& options) {
  return std::make_unique<Connected>(endpoint, std::move(method), options);
}

}  // namespace zring::client
