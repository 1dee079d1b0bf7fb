#include "arrays.hpp"

#include <pybind11/numpy.h>

#include <cstdint>
#include <cstring>
#include <utility>
#include <zring/error.hpp>

namespace py = pybind11;

namespace zring::python {
namespace {

// torch when torch is imported. No object can be a torch tensor otherwise,
// so zring never imports torch itself.
// (sys.modules is read through the C API: an `import sys` per tensor was a
// twentieth of a small op's client CPU.)
py::object torch_module() {
  PyObject* torch = PyDict_GetItemString(PyImport_GetModuleDict(), "torch");  // borrowed
  if (torch == nullptr) return py::none();
  const auto module = py::reinterpret_borrow<py::object>(torch);
  if (!py::hasattr(module, "Tensor") || !py::hasattr(module, "from_numpy")) return py::none();
  return module;
}

// Whether a torch tensor is in CPU memory: its is_cpu, where torch has it
// (a bool, not a new torch.device object per call), else its device's type.
bool on_cpu(const py::handle& tensor) {
  if (PyObject* is_cpu = PyObject_GetAttrString(tensor.ptr(), "is_cpu")) {
    const bool known = PyBool_Check(is_cpu);
    const bool cpu = is_cpu == Py_True;
    Py_DECREF(is_cpu);
    if (known) return cpu;
  } else {
    PyErr_Clear();
  }
  return py::str(tensor.attr("device").attr("type")).cast<std::string>() == "cpu";
}

std::string type_name(const py::handle& value) {
  return py::str(py::type::handle_of(value).attr("__module__")).cast<std::string>() + "." +
         py::str(py::type::handle_of(value).attr("__qualname__")).cast<std::string>();
}

[[noreturn]] void bad_value(const char* op, const std::string& name, const std::string& problem) {
  throw Error(ErrorCode::invalid_argument, std::string(op) + ": tensor '" + name + "' " + problem);
}

// The numpy array behind a CPU float32 torch tensor (a view: no copy).
py::array torch_view(const py::object& torch, const py::handle& tensor, const char* op,
                     const std::string& name) {
  if (!tensor.attr("dtype").is(torch.attr("float32")))
    bad_value(op, name,
              "is a torch tensor of " + py::str(tensor.attr("dtype")).cast<std::string>() +
                  "; zring reduces float32 only (use tensor.float())");
  if (!on_cpu(tensor))
    bad_value(op, name,
              "is on " + py::str(tensor.attr("device")).cast<std::string>() +
                  "; zring reads CPU memory (use tensor.cpu())");
  if (!tensor.attr("layout").is(torch.attr("strided")))
    bad_value(op, name,
              "is a " + py::str(tensor.attr("layout")).cast<std::string>() +
                  " torch tensor; zring takes dense (strided) tensors (use .to_dense())");
  return tensor.attr("detach")().attr("numpy")();
}

// Walks a strided array in row-major order, one innermost row at a time:
// row(address of its first element, its extent, its stride).
template <typename Row>
void for_each_row(const ArrayRef& a, std::size_t dim, char* from, Row&& row) {
  if (dim + 1 == a.shape.size()) {
    row(from, a.shape[dim], a.strides[dim]);
    return;
  }
  for (std::size_t i = 0; i < a.shape[dim]; ++i)
    for_each_row(a, dim + 1, from + static_cast<std::ptrdiff_t>(i) * a.strides[dim], row);
}

}  // namespace

bool ArrayRef::contiguous() const {
  if (reinterpret_cast<std::uintptr_t>(data) % alignof(float) != 0) return false;
  std::ptrdiff_t expected = sizeof(float);
  for (std::size_t d = shape.size(); d-- > 0;) {
    if (shape[d] != 1 && strides[d] != expected) return false;
    expected *= static_cast<std::ptrdiff_t>(shape[d]);
  }
  return true;
}

ArrayRef array_ref(const std::string& name, const py::handle& value, const char* op) {
  ArrayRef a;
  a.name = name;
  py::array array;
  if (py::isinstance<py::array>(value)) {
    array = py::reinterpret_borrow<py::array>(value);
  } else if (const py::object torch = torch_module();
             !torch.is_none() && py::isinstance(value, torch.attr("Tensor"))) {
    array = torch_view(torch, value, op, name);
    a.is_torch = true;
  } else {
    bad_value(
        op, name,
        "is a " + type_name(value) + "; zring takes numpy arrays or torch tensors of float32");
  }
  if (!py::isinstance<py::array_t<float>>(array))
    bad_value(op, name,
              "has dtype " + py::str(array.dtype()).cast<std::string>() +
                  "; zring reduces float32 only (use .astype(numpy.float32))");
  a.data = static_cast<char*>(const_cast<void*>(array.data()));
  for (py::ssize_t d = 0; d < array.ndim(); ++d) {
    a.shape.push_back(static_cast<std::size_t>(array.shape(d)));
    a.strides.push_back(array.strides(d));
  }
  a.writeable = array.writeable();
  a.keep_alive = std::move(array);
  return a;
}

std::vector<ArrayRef> array_refs(const py::dict& tensors, const char* op) {
  std::vector<ArrayRef> out;
  out.reserve(tensors.size());
  for (const auto& [key, value] : tensors) {
    if (!py::isinstance<py::str>(key))
      throw Error(ErrorCode::invalid_argument,
                  std::string(op) + ": tensor names must be str, not " + type_name(key) + " (" +
                      py::repr(key).cast<std::string>() + ")");
    out.push_back(array_ref(key.cast<std::string>(), value, op));
  }
  return out;
}

std::vector<std::size_t> shape_from(const py::handle& shape, const std::string& name,
                                    const char* op) {
  const auto bad = [&] {
    bad_value(op, name,
              "has the shape " + py::repr(shape).cast<std::string>() +
                  "; give a tuple of non-negative ints, e.g. (512, 64), or () for a scalar");
  };
  std::vector<std::size_t> out;
  // An int or anything with __index__ (numpy's integers), but not a bool.
  const auto is_int = [](const py::handle& v) {
    return !py::isinstance<py::bool_>(v) && PyIndex_Check(v.ptr()) != 0;
  };
  const auto extent = [&](const py::handle& v) {
    if (!is_int(v)) bad();
    const Py_ssize_t n = PyNumber_AsSsize_t(v.ptr(), nullptr);
    if (n == -1 && PyErr_Occurred()) throw py::error_already_set();
    if (n < 0) bad();
    out.push_back(static_cast<std::size_t>(n));
  };
  if (is_int(shape)) {
    extent(shape);
  } else if (py::isinstance<py::sequence>(shape) && !py::isinstance<py::str>(shape)) {
    for (const py::handle v : py::reinterpret_borrow<py::sequence>(shape)) extent(v);
  } else {
    bad();
  }
  return out;
}

void copy_out(const ArrayRef& a, float* out) {
  if (a.numel() == 0) return;
  if (a.contiguous() || a.shape.empty()) {
    std::memcpy(out, a.data, a.numel() * sizeof(float));
    return;
  }
  char* at = reinterpret_cast<char*>(out);
  for_each_row(a, 0, a.data, [&](const char* row, std::size_t n, std::ptrdiff_t stride) {
    if (stride == sizeof(float)) {
      std::memcpy(at, row, n * sizeof(float));
      at += n * sizeof(float);
      return;
    }
    for (std::size_t i = 0; i < n; ++i, at += sizeof(float))
      std::memcpy(at, row + static_cast<std::ptrdiff_t>(i) * stride, sizeof(float));
  });
}

void copy_in(const float* in, const ArrayRef& a) {
  if (a.numel() == 0) return;
  if (a.contiguous() || a.shape.empty()) {
    std::memcpy(a.data, in, a.numel() * sizeof(float));
    return;
  }
  const char* at = reinterpret_cast<const char*>(in);
  for_each_row(a, 0, a.data, [&](char* row, std::size_t n, std::ptrdiff_t stride) {
    if (stride == sizeof(float)) {
      std::memcpy(row, at, n * sizeof(float));
      at += n * sizeof(float);
      return;
    }
    for (std::size_t i = 0; i < n; ++i, at += sizeof(float))
      std::memcpy(row + static_cast<std::ptrdiff_t>(i) * stride, at, sizeof(float));
  });
}

TensorMap to_tensors(const std::vector<ArrayRef>& arrays) {
  TensorMap out;
  for (const ArrayRef& a : arrays) {
    std::vector<float> values(a.numel());
    copy_out(a, values.data());
    out.emplace(a.name, Tensor(std::move(values), a.shape));
  }
  return out;
}

py::array new_array(const std::vector<std::size_t>& shape) {
  return py::array_t<float>(std::vector<py::ssize_t>(shape.begin(), shape.end()));
}

py::dict result_dict(const std::vector<ArrayRef>& refs, const std::vector<py::array>& arrays) {
  py::dict out;
  py::object torch;
  for (std::size_t i = 0; i < refs.size(); ++i) {
    py::object value = arrays[i];
    if (refs[i].is_torch) {
      if (!torch) torch = py::module_::import("torch");
      value = torch.attr("from_numpy")(value);
    }
    out[py::str(refs[i].name)] = value;
  }
  return out;
}

py::array owning_array(std::vector<float>&& values, const std::vector<std::size_t>& shape) {
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
