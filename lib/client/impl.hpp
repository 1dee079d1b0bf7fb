// impl.hpp - the two faces of CompressedAllReduce (internal).
//
// Standalone objects are a LocalAggregator; connected objects talk to their
// zringd (lib/client/connected.*) and keep a LocalAggregator for the two
// operations that never leave the process (compress_for_transmission,
// all_reduce_with_peers).
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>
#include <zring/compressed_all_reduce.hpp>

#include "client/shared_storage.hpp"
#include "client/tensor_views.hpp"

namespace zring {

class CompressedAllReduce::Impl {
 public:
  virtual ~Impl() = default;
  virtual TensorMap all_reduce(const TensorMap& gradients) = 0;
  // By default through all_reduce; the connected client writes in place.
  virtual void all_reduce_in_place(TensorMap& gradients) {
    TensorMap averaged = all_reduce(gradients);
    for (auto& [name, tensor] : gradients) tensor.data() = std::move(averaged.at(name).data());
  }
  // TensorViews: by default through a TensorMap copy; the connected client
  // stages them through its shared buffer.
  virtual void all_reduce_in_place(const TensorViews& views) {
    const std::vector<client::FusedView> fused = client::fuse_order(views);
    TensorMap copy = client::map_of(fused);
    all_reduce_in_place(copy);
    for (const client::FusedView& f : fused)
      std::copy(copy.at(f.view->name).data().begin(), copy.at(f.view->name).data().end(),
                f.view->data);
  }
  // Out of place into the caller's memory: by default through all_reduce of
  // a TensorMap copy of the inputs; the connected client stages them
  // through its shared buffer and writes the averages to the outputs.
  virtual void all_reduce(const TensorViews& inputs, const TensorViews& outputs) {
    const std::vector<client::FusedView> fused = client::fuse_order(inputs, "all_reduce");
    const std::vector<const TensorView*> out = client::outputs_for(fused, outputs, "all_reduce");
    const TensorMap averaged = all_reduce(client::map_of(fused));
    for (std::size_t i = 0; i < fused.size(); ++i) {
      const std::vector<float>& values = averaged.at(fused[i].view->name).data();
      std::copy(values.begin(), values.end(), out[i]->data);
    }
  }
  // SharedTensors: ordinary memory by default, reduced through a TensorMap
  // copy; the connected client shares them with its zringd.
  virtual std::shared_ptr<SharedTensors::Storage> make_shared_tensors(const TensorShapes& shapes) {
    auto storage = SharedTensors::Storage::lay_out(shapes);
    storage->allocate_private();
    return storage;
  }
  virtual void all_reduce_in_place(SharedTensors::Storage& tensors) {
    TensorMap copy = tensors.tensors();
    all_reduce_in_place(copy);
    tensors.set(copy);
  }
  // The root's values over every rank's tensors (root < world_size(),
  // checked by the caller).
  virtual void broadcast(TensorMap& tensors, std::size_t root) = 0;
  virtual void broadcast(const TensorViews& views, std::size_t root) = 0;
  virtual TensorMap all_reduce_with_peers(const TensorMap& gradients,
                                          const std::vector<CompressedMap>& peers) = 0;
  virtual CompressedMap compress_for_transmission(const TensorMap& gradients) = 0;
  [[nodiscard]] virtual std::size_t world_size() const noexcept = 0;
  [[nodiscard]] virtual std::size_t rank() const noexcept = 0;
  [[nodiscard]] virtual const CompressionMethod& method() const noexcept = 0;
  [[nodiscard]] virtual bool connected() const noexcept = 0;
  [[nodiscard]] virtual CompressedAllReduce::Traffic traffic() const noexcept = 0;
};

namespace client {
// Defined in standalone.cpp: the seed's semantics, no transport.
std::unique_ptr<CompressedAllReduce::Impl> make_standalone(CompressionMethod method,
                                                           std::size_t world_size);
// Defined in connected.cpp: joins a zringd over IPC.
std::unique_ptr<CompressedAllReduce::Impl> make_connected(const std::string& endpoint,
                                                          CompressionMethod method,
                                                          const ConnectOptions& options);
}  // namespace client

}  // namespace zring
