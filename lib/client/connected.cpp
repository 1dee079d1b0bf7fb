// connected.cpp - CompressedAllReduce joined to a zringd over IPC.
//
// One DEALER socket to the daemon's ROUTER. Every request carries an id and
// every reply echoes it, so a late reply to a request that already timed
// out is recognised and ignored. The deadline is one of silence: while an
// op runs the daemon sends a keepalive every heartbeat, so a long op on a
// slow ring is fine, and a daemon that died or froze is noticed within
// options.timeout.
#include <sys/stat.h>

#include <cstring>
#include <optional>

#include <zmq.hpp>

#include <zring/error.hpp>

#include "client/impl.hpp"
#include "client/local_aggregator.hpp"
#include "wire/wire.hpp"

namespace zring::client {
namespace {

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

class Connected final : public CompressedAllReduce::Impl {
 public:
  Connected(const std::string& endpoint, CompressionMethod method, const ConnectOptions& options)
      : endpoint_(endpoint), options_(options), socket_(context_, zmq::socket_type::dealer),
        local_(method, 1), method_(std::move(method)) {
    check_endpoint(endpoint);
    socket_.set(zmq::sockopt::linger, 0);
    socket_.connect(endpoint);
    hello();
    local_ = LocalAggregator(method_, world_size_);
  }

  TensorMap all_reduce(const TensorMap& gradients) override {
    wire::IpcHeader request;
    request.kind = wire::IpcKind::submit;
    request.local_rank = static_cast<std::uint32_t>(options_.local_rank);
    request.manifest.method = method_.to_string();
    std::size_t total = 0;
    for (const auto& [name, tensor] : gradients) {
      collective::TensorSpec spec{name, {}, tensor.numel()};
      for (std::size_t extent : tensor.shape()) spec.shape.push_back(extent);
      request.manifest.tensors.push_back(std::move(spec));
      total += tensor.numel();
    }
    zmq::message_t data(total * sizeof(float));
    std::size_t at = 0;
    for (const auto& [name, tensor] : gradients) {
      if (tensor.numel() != 0)
        std::memcpy(data.data<std::uint8_t>() + at, tensor.data().data(), tensor.numel() * 4);
      at += tensor.numel() * 4;
    }
    auto [reply, values] = call(request, std::move(data));
    if (values.size() != total * sizeof(float)) {
      throw Error(ErrorCode::malformed_message,
                  "all_reduce: zringd returned " + std::to_string(values.size()) +
                      " bytes of values for " + std::to_string(total) + " elements");
    }
    traffic_.wire_bytes += reply.wire_bytes;
    traffic_.dense_bytes += reply.dense_bytes;
    ++traffic_.ops;
    return split(gradients, values);
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
  void hello() {
    wire::IpcHeader request;
    request.kind = wire::IpcKind::hello;
    request.local_rank = static_cast<std::uint32_t>(options_.local_rank);
    auto [welcome, unused] = call(request, std::nullopt);
    world_size_ = welcome.world_size;
    rank_ = welcome.rank;
    node_ = welcome.node;
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
      if (left.count() <= 0 || zmq::poll(&item, 1, left) == 0) throw silence(connecting);
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

  static TensorMap split(const TensorMap& gradients, const zmq::message_t& values) {
    TensorMap out;
    std::size_t at = 0;
    for (const auto& [name, tensor] : gradients) {
      std::vector<float> v(tensor.numel());
      if (!v.empty()) std::memcpy(v.data(), values.data<std::uint8_t>() + at, v.size() * 4);
      at += v.size() * 4;
      out.emplace(name, Tensor(std::move(v), tensor.shape()));
    }
    return out;
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
  CompressedAllReduce::Traffic traffic_;
};

}  // namespace

std::unique_ptr<CompressedAllReduce::Impl> make_connected(const std::string& endpoint,
                                                          CompressionMethod method,
                                                          const ConnectOptions& options) {
  return std::make_unique<Connected>(endpoint, std::move(method), options);
}

}  // namespace zring::client
