// shared_storage.hpp - what a SharedTensors holds (internal).
#pragma once

#include <cstddef>
#include <memory>
#include <zring/error.hpp>
#include <zring/shared_tensors.hpp>

#include "transport/shared_region.hpp"

namespace zring {

struct SharedTensors::Storage {
  TensorShapes shapes;
  std::map<std::string, std::size_t> offsets;  // first value of each tensor
  std::size_t elements = 0;
  float* data = nullptr;
  // Keeps data alive: a heap block, or the SharedRegion (`region`).
  std::shared_ptr<void> memory;
  std::shared_ptr<transport::SharedRegion> region;  // when in a buffer zringd mapped
  // Whether zringd maps the region as this process's buffer right now (the
  // connected client clears it when it takes another buffer).
  bool current = false;

  // The layout of `shapes`: offsets and the total; the memory comes later.
  static std::shared_ptr<Storage> lay_out(const TensorShapes& shapes);
  // The values as a TensorMap (a copy), and back from one with the same
  // names and sizes.
  [[nodiscard]] TensorMap tensors() const;
  void set(const TensorMap& tensors);
  // Zero-filled ordinary memory for the layout.
  void allocate_private();
  // In `r`, which holds at least elements floats (zero-filled by the daemon).
  void place_in(std::shared_ptr<transport::SharedRegion> r);
  // zringd may still write into the region (an op the client gave up on):
  // the same addresses become private memory with the same values, so
  // nothing but this process writes them from now on. Clears current.
  void give_up();
};

}  // namespace zring
