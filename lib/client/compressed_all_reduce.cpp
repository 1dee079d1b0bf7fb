// compressed_all_reduce.cpp - the public CompressedAllReduce, forwarding to
// its Impl (standalone or connected).
#include <new>
#include <zmq.hpp>
#include <zring/compressed_all_reduce.hpp>
#include <zring/error.hpp>

#include "client/impl.hpp"

namespace zring {
namespace {

// The public API throws zring::Error and nothing else: what a lower layer
// lets through (ZeroMQ's own error type, an allocation that failed) becomes
// one here, named after the call it ended.
template <typename Call>
decltype(auto) translated(const char* what, Call&& call) {
  try {
    return call();
  } catch (const Error&) {
    throw;
  } catch (const zmq::error_t& e) {
    throw Error(ErrorCode::connection_failed, std::string(what) + ": ZeroMQ failed: " + e.what() +
                                                  " (errno " + std::to_string(e.num()) + ")");
  } catch (const std::bad_alloc&) {
    throw Error(ErrorCode::resource_limit, std::string(what) + ": out of memory");
  }
}

}  // namespace

CompressedAllReduce::CompressedAllReduce(CompressionMethod method, std::size_t world_size)
    : impl_(client::make_standalone(std::move(method), world_size)) {}

CompressedAllReduce::CompressedAllReduce(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

CompressedAllReduce CompressedAllReduce::connect(const std::string& endpoint,
                                                 CompressionMethod method, ConnectOptions options) {
  return translated("connect", [&] {
    return CompressedAllReduce(client::make_connected(endpoint, std::move(method), options));
  });
}

CompressedAllReduce::CompressedAllReduce(CompressedAllReduce&&) noexcept = default;
CompressedAllReduce& CompressedAllReduce::operator=(CompressedAllReduce&&) noexcept = default;
CompressedAllReduce::~CompressedAllReduce() = default;

namespace {
// A moved-from object has no Impl; using it is a caller bug worth a clear
// message rather than a null dereference.
CompressedAllReduce::Impl& checked(const std::unique_ptr<CompressedAllReduce::Impl>& impl) {
  if (!impl)
    throw Error(ErrorCode::invalid_argument, "CompressedAllReduce: use of a moved-from object");
  return *impl;
}
}  // namespace

TensorMap CompressedAllReduce::all_reduce(const TensorMap& gradients) {
  return translated("all_reduce", [&] { return checked(impl_).all_reduce(gradients); });
}

TensorMap CompressedAllReduce::all_reduce(TensorMap&& gradients) {
  return translated("all_reduce", [&] {
    checked(impl_).all_reduce_in_place(gradients);
    return std::move(gradients);
  });
}

void CompressedAllReduce::all_reduce_in_place(TensorMap& gradients) {
  translated("all_reduce_in_place", [&] { checked(impl_).all_reduce_in_place(gradients); });
}

void CompressedAllReduce::all_reduce_in_place(const TensorViews& tensors) {
  translated("all_reduce_in_place", [&] { checked(impl_).all_reduce_in_place(tensors); });
}

void CompressedAllReduce::all_reduce(const TensorViews& inputs, const TensorViews& outputs) {
  translated("all_reduce", [&] { checked(impl_).all_reduce(inputs, outputs); });
}

SharedTensors CompressedAllReduce::make_shared_tensors(const TensorShapes& shapes) {
  return translated("make_shared_tensors",
                    [&] { return SharedTensors(checked(impl_).make_shared_tensors(shapes)); });
}

void CompressedAllReduce::all_reduce_in_place(SharedTensors& tensors) {
  translated("all_reduce_in_place", [&] {
    Impl& impl = checked(impl_);
    if (tensors.storage_)
      impl.all_reduce_in_place(*tensors.storage_);
    else {
      TensorMap none;  // no tensors: the op still runs, as for an empty TensorMap
      impl.all_reduce_in_place(none);
    }
  });
}

namespace {
// A root is a rank of the ring: below world_size(), or no rank has it.
void check_root(const CompressedAllReduce::Impl& impl, std::size_t root) {
  if (root >= impl.world_size())
    throw Error(ErrorCode::invalid_argument,
                "broadcast: root " + std::to_string(root) + " is not a rank: world_size() is " +
                    std::to_string(impl.world_size()) + ", so root must be 0.." +
                    std::to_string(impl.world_size() - 1));
}
}  // namespace

void CompressedAllReduce::broadcast(TensorMap& tensors, std::size_t root) {
  translated("broadcast", [&] {
    Impl& impl = checked(impl_);
    check_root(impl, root);
    impl.broadcast(tensors, root);
  });
}

void CompressedAllReduce::broadcast(const TensorViews& tensors, std::size_t root) {
  translated("broadcast", [&] {
    Impl& impl = checked(impl_);
    check_root(impl, root);
    impl.broadcast(tensors, root);
  });
}

TensorMap CompressedAllReduce::all_reduce_with_peers(const TensorMap& gradients,
                                                     const std::vector<CompressedMap>& peers) {
  return translated("all_reduce_with_peers",
                    [&] { return checked(impl_).all_reduce_with_peers(gradients, peers); });
}

CompressedMap CompressedAllReduce::compress_for_transmission(const TensorMap& gradients) {
  return translated("compress_for_transmission",
                    [&] { return checked(impl_).compress_for_transmission(gradients); });
}

// The noexcept observers answer neutrally for a moved-from object.
std::size_t CompressedAllReduce::world_size() const noexcept {
  return impl_ ? impl_->world_size() : 0;
}

std::size_t CompressedAllReduce::rank() const noexcept { return impl_ ? impl_->rank() : 0; }

const CompressionMethod& CompressedAllReduce::method() const noexcept {
  static const CompressionMethod none;
  return impl_ ? impl_->method() : none;
}

bool CompressedAllReduce::connected() const noexcept { return impl_ && impl_->connected(); }

CompressedAllReduce::Traffic CompressedAllReduce::traffic() const noexcept {
  return impl_ ? impl_->traffic() : Traffic{};
}

}  // namespace zring
