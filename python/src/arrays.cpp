#include "arrays.hpp"

#include <pybind11/numpy.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>
#include <zring/error.hpp>

namespace py = pybind11;

namespace zring::python {
namespace {

// What zring compares a torch tensor's attributes with, looked up once per
// dict: torch.Tensor, torch.float32 and torch.strided, when torch is
// imported. No object can be a torch tensor otherwise, so zring never
// imports torch itself. (sys.modules is read through the C API: an
// `import sys` per tensor was a twentieth of a small op's client CPU.)
struct TorchNames {
  py::object tensor, float32, strided;  // null: torch is not imported

  static TorchNames look_up() {
    TorchNames names;
    PyObject* torch = PyDict_GetItemString(PyImport_GetModuleDict(), "torch");  // borrowed
    if (torch == nullptr) return names;
    const auto module = py::reinterpret_borrow<py::object>(torch);
    if (!py::hasattr(module, "Tensor") || !py::hasattr(module, "float32") ||
        !py::hasattr(module, "strided"))
      return names;
    names.tensor = module.attr("Tensor");
    names.float32 = module.attr("float32");
    names.strided = module.attr("strided");
    return names;
  }
  [[nodiscard]] bool is_tensor(const py::handle& value) const {
    return tensor && py::isinstance(value, tensor);
  }
};

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

// A CPU float32 torch tensor taken apart through torch's own accessors
// (data_ptr, shape, stride: no Python objects made but small ints), not
// through a numpy view (detach().numpy() made two objects and cost 1.9 us of
// a tensor's 4.7 per op). keep_alive is the tensor: it holds its storage.
void take_torch(const TorchNames& torch, const py::handle& tensor, const char* op, ArrayRef& a) {
  if (const py::object dtype = tensor.attr("dtype"); !dtype.is(torch.float32))
    bad_value(op, a.name,
              "is a torch tensor of " + py::str(dtype).cast<std::string>() +
                  "; zring reduces float32 only (use tensor.float())");
  if (!on_cpu(tensor))
    bad_value(op, a.name,
              "is on " + py::str(tensor.attr("device")).cast<std::string>() +
                  "; zring reads CPU memory (use tensor.cpu())");
  if (const py::object layout = tensor.attr("layout"); !layout.is(torch.strided))
    bad_value(op, a.name,
              "is a " + py::str(layout).cast<std::string>() +
                  " torch tensor; zring takes dense (strided) tensors (use .to_dense())");
  // Its memory holds the negation of its values (torch._neg_view): numpy()
  // refuses it too.
  if (py::hasattr(tensor, "is_neg") && tensor.attr("is_neg")().cast<bool>())
    bad_value(op, a.name, "is a negated view (its negative bit is set); use tensor.resolve_neg()");
  a.data = reinterpret_cast<char*>(tensor.attr("data_ptr")().cast<std::uintptr_t>());
  const py::tuple shape = tensor.attr("shape");
  const py::tuple strides = tensor.attr("stride")();
  for (std::size_t d = 0; d < shape.size(); ++d) {
    a.shape.push_back(shape[d].cast<std::size_t>());
    a.strides.push_back(strides[d].cast<std::ptrdiff_t>() *
                        static_cast<std::ptrdiff_t>(sizeof(float)));
  }
  a.keep_alive = py::reinterpret_borrow<py::object>(tensor);
  a.is_torch = true;
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

namespace {

// array_ref, with torch's names looked up once for all of a dict's values
// (only when one is not a numpy array).
ArrayRef take_apart(const std::string& name, const py::handle& value, const char* op,
                    std::optional<TorchNames>& torch) {
  ArrayRef a;
  a.name = name;
  if (!py::isinstance<py::array>(value)) {
    if (!torch) torch = TorchNames::look_up();
    if (!torch->is_tensor(value))
      bad_value(
          op, name,
          "is a " + type_name(value) + "; zring takes numpy arrays or torch tensors of float32");
    take_torch(*torch, value, op, a);
    return a;
  }
  auto array = py::reinterpret_borrow<py::array>(value);
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

}  // namespace

py::array numpy_view(const ArrayRef& a) {
  if (!a.is_torch) return py::reinterpret_borrow<py::array>(a.keep_alive);
  return py::array(py::dtype::of<float>(), std::vector<py::ssize_t>(a.shape.begin(), a.shape.end()),
                   std::vector<py::ssize_t>(a.strides.begin(), a.strides.end()), a.data,
                   a.keep_alive);
}

ArrayRef array_ref(const std::string& name, const py::handle& value, const char* op) {
  std::optional<TorchNames> torch;
  return take_apart(name, value, op, torch);
}

std::vector<ArrayRef> array_refs(const py::dict& tensors, const char* op) {
  std::vector<ArrayRef> out;
  out.reserve(tensors.size());
  std::optional<TorchNames> torch;
  for (const auto& [key, value] : tensors) {
    if (!py::isinstance<py::str>(key))
      throw Error(ErrorCode::invalid_argument,
                  std::string(op) + ": tensor names must be str, not " + type_name(key) + " (" +
                      py::repr(key).cast<std::string>() + ")");
    out.push_back(take_apart(key.cast<std::string>(), value, op, torch));
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

float* contiguous_values(const ArrayRef& a, std::unique_ptr<float[]>& room) {
  if (a.contiguous() || a.numel() == 0) return reinterpret_cast<float*>(a.data);
  room = std::make_unique_for_overwrite<float[]>(a.numel());
  copy_out(a, room.get());
  return room.get();
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
