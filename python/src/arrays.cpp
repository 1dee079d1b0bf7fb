#include "arrays.hpp"

#include <cstdint>
#include <cstring>
#include <utility>

#include <pybind11/numpy.h>
#include <zring/error.hpp>

namespace py = pybind11;

namespace zring::python {
namespace {

// torch.Tensor when torch is imported. No object can be a torch tensor
// otherwise, so zring never imports torch itself.
py::object torch_module() {
  const py::dict modules = py::module_::import("sys").attr("modules");
  if (!modules.contains("torch")) return py::none();
  py::object torch = modules["torch"];
  if (!py::hasattr(torch, "Tensor") || !py::hasattr(torch, "from_numpy")) return py::none();
  return torch;
}

std::string type_name(const py::handle& value) {
  return py::str(py::type::handle_of(value).attr("__module__")).cast<std::string>() + "." +
         py::str(py::type::handle_of(value).attr("__qualname__")).cast<std::string>();
}

[[noreturn]] void bad_value(const char* op, const std::string& name, const std::string& problem) {
  throw Error(ErrorCode::invalid_argument,
              std::string(op) + ": tensor '" + name + "' " + problem);
}

// The numpy array behind a CPU float32 torch tensor (a view: no copy).
py::array torch_view(const py::object& torch, const py::handle& tensor, const char* op,
                     const std::string& name) {
  if (!tensor.attr("dtype").is(torch.attr("float32")))
    bad_value(op, name, "is a torch tensor of " + py::str(tensor.attr("dtype")).cast<std::string>() +
                            "; zring reduces float32 only (use tensor.float())");
  if (py::str(tensor.attr("device").attr("type")).cast<std::string>() != "cpu")
    bad_value(op, name, "is on " + py::str(tensor.attr("device")).cast<std::string>() +
                            "; zring reads CPU memory (use tensor.cpu())");
  if (!tensor.attr("layout").is(torch.attr("strided")))
    bad_value(op, name, "is a " + py::str(tensor.attr("layout")).cast<std::string>() +
                            " torch tensor; zring takes dense (strided) tensors (use .to_dense())");
  return tensor.attr("detach")().attr("numpy")();
}

bool c_contiguous(const InputArray& a) {
  std::ptrdiff_t expected = sizeof(float);
  for (std::size_t d = a.shape.size(); d-- > 0;) {
    if (a.shape[d] != 1 && a.strides[d] != expected) return false;
    expected *= static_cast<std::ptrdiff_t>(a.shape[d]);
  }
  return true;
}

// Gathers a strided array in row-major order.
void gather(const InputArray& a, std::size_t dim, const char* from, float*& out) {
  if (dim + 1 == a.shape.size()) {
    for (std::size_t i = 0; i < a.shape[dim]; ++i)
      std::memcpy(out++, from + static_cast<std::ptrdiff_t>(i) * a.strides[dim], sizeof(float));
    return;
  }
  for (std::size_t i = 0; i < a.shape[dim]; ++i)
    gather(a, dim + 1, from + static_cast<std::ptrdiff_t>(i) * a.strides[dim], out);
}

}  // namespace

InputDict InputDict::from_dict(const py::dict& tensors, const char* op) {
  InputDict in;
  const py::object torch = torch_module();
  for (const auto& [key, value] : tensors) {
    if (!py::isinstance<py::str>(key))
      throw Error(ErrorCode::invalid_argument,
                  std::string(op) + ": tensor names must be str, not " + type_name(key) + " (" +
                      py::repr(key).cast<std::string>() + ")");
    InputArray a;
    a.name = key.cast<std::string>();
    py::array array;
    if (py::isinstance<py::array>(value)) {
      array = py::reinterpret_borrow<py::array>(value);
    } else if (!torch.is_none() && py::isinstance(value, torch.attr("Tensor"))) {
      array = torch_view(torch, value, op, a.name);
      a.is_torch = true;
    } else {
      bad_value(op, a.name, "is a " + type_name(value) +
                                "; zring takes numpy arrays or torch tensors of float32");
    }
    if (!py::isinstance<py::array_t<float>>(array))
      bad_value(op, a.name, "has dtype " + py::str(array.dtype()).cast<std::string>() +
                                "; zring reduces float32 only (use .astype(numpy.float32))");
    a.data = static_cast<const char*>(array.data());
    for (py::ssize_t d = 0; d < array.ndim(); ++d) {
      a.shape.push_back(static_cast<std::size_t>(array.shape(d)));
      a.strides.push_back(array.strides(d));
    }
    a.keep_alive = std::move(array);
    in.arrays_.push_back(std::move(a));
  }
  return in;
}

TensorMap InputDict::to_tensors() const {
  TensorMap out;
  for (const InputArray& a : arrays_) {
    std::vector<float> values(shape_numel(a.shape));
    if (!values.empty()) {
      if (c_contiguous(a)) {
        std::memcpy(values.data(), a.data, values.size() * sizeof(float));
      } else {
        float* at = values.data();
        gather(a, 0, a.data, at);
      }
    }
    out.emplace(a.name, Tensor(std::move(values), a.shape));
  }
  return out;
}

py::dict InputDict::to_dict(TensorMap&& result, const char* op) const {
  py::dict out;
  py::object torch;
  for (const InputArray& a : arrays_) {
    const auto found = result.find(a.name);
    if (found == result.end())
      throw Error(ErrorCode::internal, std::string(op) + ": no result for tensor '" + a.name + "'");
    py::object array = owning_array(std::move(found->second.data()), a.shape);
    if (a.is_torch) {
      if (!torch) torch = py::module_::import("torch");
      array = torch.attr("from_numpy")(array);
    }
    out[py::str(a.name)] = array;
  }
  return out;
}

py::object owning_array(std::vector<float>&& values, const std::vector<std::size_t>& shape) {
  std::vector<py::ssize_t> extents(shape.begin(), shape.end());
  if (values.empty()) return py::array_t<float>(extents);
  auto* owned = new std::vector<float>(std::move(values));
  const py::capsule owner(owned, [](void* p) { delete static_cast<std::vector<float>*>(p); });
  return py::array_t<float>(extents, owned->data(), owner);
}

template <typename T>
py::object readonly_view(const std::vector<T>& values, py::handle owner) {
  py::array_t<T> view({static_cast<py::ssize_t>(values.size())}, values.data(), owner);
  view.attr("setflags")(py::arg("write") = false);
  return view;
}

template py::object readonly_view(const std::vector<float>&, py::handle);
template py::object readonly_view(const std::vector<std::uint32_t>&, py::handle);

}  // namespace zring::python
