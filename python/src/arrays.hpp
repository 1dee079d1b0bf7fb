// arrays.hpp - dicts of numpy arrays or torch tensors to zring TensorMaps and back.
//
// A dict is taken apart while the GIL is held (names, data pointers, shapes,
// strides, and a reference that keeps each array alive); the values are then
// copied into zring::Tensors with the GIL released, gathering strided
// (non-contiguous) arrays element by element. A result comes back without a
// copy: each Tensor's buffer is moved into the numpy array that is returned
// (torch.from_numpy shares it again for torch inputs).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>
#include <zring/tensor.hpp>

namespace zring::python {

// One input array as the copy needs it.
struct InputArray {
  std::string name;
  pybind11::object keep_alive;         // the numpy array (a view for torch tensors)
  const char* data = nullptr;          // first element
  std::vector<std::size_t> shape;
  std::vector<std::ptrdiff_t> strides;  // in bytes; may be negative
  bool is_torch = false;
};

class InputDict {
 public:
  // Checks and takes apart dict[str, array]; `op` names the call in errors.
  // Throws zring::Error(invalid_argument) for a key that is not a str, a
  // value that is neither a numpy array nor a CPU torch tensor, or a dtype
  // other than float32. Needs the GIL.
  static InputDict from_dict(const pybind11::dict& tensors, const char* op);

  // Copies the values into Tensors of the same shapes. Needs no GIL.
  [[nodiscard]] TensorMap to_tensors() const;

  // The result as a dict with the input's keys in the input's order, each
  // value of its input's kind (numpy or torch). Needs the GIL.
  [[nodiscard]] pybind11::dict to_dict(TensorMap&& result, const char* op) const;

 private:
  std::vector<InputArray> arrays_;
};

// A numpy array that takes over values' buffer (no copy).
pybind11::object owning_array(std::vector<float>&& values, const std::vector<std::size_t>& shape);

// A read-only numpy view of a vector that lives inside `owner`.
template <typename T>
pybind11::object readonly_view(const std::vector<T>& values, pybind11::handle owner);

}  // namespace zring::python
