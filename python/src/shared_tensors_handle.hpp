// shared_tensors_handle.hpp - what a Python zring.SharedTensors holds.
#pragma once

#include <pybind11/pybind11.h>

#include <optional>
#include <string>
#include <utility>
#include <zring/error.hpp>
#include <zring/shared_tensors.hpp>

namespace zring::python {

// A zring::SharedTensors until close(). The numpy views it hands out hold
// copies of it (which share its memory), so a view never outlives the memory
// it shows; after close() the views still work as plain arrays, but this
// object no longer hands out views or takes part in an op.
class SharedTensorsHandle {
 public:
  explicit SharedTensorsHandle(SharedTensors tensors) : tensors_(std::move(tensors)) {}

  SharedTensors& checked(const char* op) {
    if (!tensors_)
      throw Error(ErrorCode::invalid_argument,
                  std::string(op) +
                      ": this zring.SharedTensors was closed (close() or the end of its with "
                      "block); its views are now plain arrays: make new tensors with "
                      "make_shared_tensors");
    return *tensors_;
  }
  void close() { tensors_.reset(); }
  [[nodiscard]] bool closed() const { return !tensors_; }

 private:
  std::optional<SharedTensors> tensors_;
};

// CompressedAllReduce.make_shared_tensors's argument: dict[str, shape].
TensorShapes tensor_shapes_from(const pybind11::dict& shapes, const char* op);

}  // namespace zring::python
