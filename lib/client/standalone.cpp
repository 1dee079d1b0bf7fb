// standalone.cpp - CompressedAllReduce without a transport (the seed's object).
#include <memory>
#include <zring/error.hpp>

#include "client/impl.hpp"
#include "client/local_aggregator.hpp"
#include "client/tensor_views.hpp"

namespace zring::client {
namespace {

class Standalone final : public CompressedAllReduce::Impl {
 public:
  Standalone(CompressionMethod method, std::size_t world_size)
      : aggregator_(std::move(method), world_size) {}

  using CompressedAllReduce::Impl::all_reduce;  // out of place: Impl's, through the one below

  // world_size 1: this rank is the group; the caller sees D(C(g)), the real
  // compression error. world_size > 1: nothing to talk to. Scaling the local
  // gradient instead would not approximate a sum across ranks, so refuse.
  TensorMap all_reduce(const TensorMap& gradients) override {
    refuse_without_peers("all_reduce");
    return aggregator_.average(gradients, {});
  }
  // world_size 1: this rank is the root, its tensors are the result.
  void broadcast(TensorMap& tensors, std::size_t) override {
    refuse_without_peers("broadcast");
    check_inputs(tensors);
  }
  void broadcast(const TensorViews& views, std::size_t) override {
    refuse_without_peers("broadcast");
    (void)fuse_order(views);  // checked as a connected object checks them
  }
  TensorMap all_reduce_with_peers(const TensorMap& gradients,
                                  const std::vector<CompressedMap>& peers) override {
    return aggregator_.average(gradients, peers);
  }
  CompressedMap compress_for_transmission(const TensorMap& gradients) override {
    return aggregator_.compress(gradients);
  }
  std::size_t world_size() const noexcept override { return aggregator_.world_size(); }
  std::size_t rank() const noexcept override { return 0; }
  const CompressionMethod& method() const noexcept override { return aggregator_.method(); }
  bool connected() const noexcept override { return false; }
  CompressedAllReduce::Traffic traffic() const noexcept override { return aggregator_.traffic(); }

 private:
  void refuse_without_peers(const std::string& op) const {
    if (aggregator_.world_size() > 1)
      throw Error(ErrorCode::no_communicator,
                  op + ": this CompressedAllReduce has world_size " +
                      std::to_string(aggregator_.world_size()) +
                      " but no communicator; use CompressedAllReduce::connect(endpoint, ...) "
                      "to go through zringd" +
                      (op == "all_reduce" ? ", or all_reduce_with_peers with the other ranks' "
                                            "compressed gradients"
                                          : ""));
  }

  LocalAggregator aggregator_;
};

}  // namespace

std::unique_ptr<CompressedAllReduce::Impl> make_standalone(CompressionMethod method,
                                                           std::size_t world_size) {
  return std::make_unique<Standalone>(std::move(method), world_size);
}

}  // namespace zring::client
