// zring.SharedTensors: tensors in the buffer this process shares with its zringd.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "arrays.hpp"
#include "bindings.hpp"
#include "shared_tensors_handle.hpp"

namespace py = pybind11;

namespace zring::python {
namespace {

// A writeable numpy view of values, whose base keeps their memory alive.
py::array view_of(const SharedTensors& tensors, Span<float> values,
                  const std::vector<std::size_t>& shape) {
  auto* owner = new SharedTensors(tensors);
  const py::capsule keep_alive(owner, [](void* p) { delete static_cast<SharedTensors*>(p); });
  return py::array_t<float>(std::vector<py::ssize_t>(shape.begin(), shape.end()), values.data(),
                            keep_alive);
}

std::vector<std::string> names_of(const SharedTensors& tensors) {
  std::vector<std::string> names;
  for (const auto& [name, shape] : tensors.shapes()) names.push_back(name);
  return names;
}

py::array tensor_view(SharedTensorsHandle& self, const std::string& name) {
  SharedTensors& tensors = self.checked("SharedTensors");
  const auto found = tensors.shapes().find(name);
  if (found == tensors.shapes().end()) {
    std::string have;
    for (const std::string& n : names_of(tensors)) have += (have.empty() ? "'" : ", '") + n + "'";
    throw Error(ErrorCode::missing_tensor, "SharedTensors: no tensor named '" + name +
                                               "' (it has " + (have.empty() ? "none" : have) + ")");
  }
  return view_of(tensors, tensors[name], found->second);
}

std::string describe_shared_tensors(SharedTensorsHandle& self) {
  if (self.closed()) return "<zring.SharedTensors (closed)>";
  const SharedTensors& t = self.checked("SharedTensors");
  return "<zring.SharedTensors of " + std::to_string(t.shapes().size()) + " tensors, " +
         std::to_string(t.numel()) + " values, " +
         (t.zero_copy() ? "in zringd's buffer" : "in private memory") + ">";
}

const char* kSharedTensorsDoc = R"doc(
Tensors that live in the buffer this process shares with its zringd: made by
CompressedAllReduce.make_shared_tensors({"w": (512, 64), "b": (64,)}),
reduced by CompressedAllReduce.all_reduce_in_place(shared) with no copy: the
daemon reads the values there and writes the averages over them.

shared["w"] is a writeable numpy array that IS that memory (its base keeps
the memory alive); shared.torch("w") is torch.from_numpy of it. Write the
gradients into them (or compute them there), reduce, read the averages.
The tensors lie one after another in name order (shared.values, a flat
view of all of them).

shared.zero_copy says whether the values sit in zringd's buffer right now:
False for a standalone object, once newer SharedTensors of the same
CompressedAllReduce replaced these, or once it gave its buffers up (a
timeout, a zringd restart); all_reduce_in_place(shared) still works then,
with one copy each way. Ops of other tensors go through a buffer of their
own and leave these where they are.

close() (or the end of a with block) lets go of the tensors: shared[...] and
all_reduce_in_place(shared) then raise zring.Error (kind 'invalid_argument').
Views handed out before stay valid arrays (they keep the memory alive), but
nothing reduces them any more.
)doc";

}  // namespace

TensorShapes tensor_shapes_from(const py::dict& shapes, const char* op) {
  TensorShapes out;
  for (const auto& [key, shape] : shapes) {
    if (!py::isinstance<py::str>(key))
      throw Error(
          ErrorCode::invalid_argument,
          std::string(op) + ": tensor names must be str, not " + py::repr(key).cast<std::string>());
    const std::string name = key.cast<std::string>();
    out.emplace(name, shape_from(shape, name, op));
  }
  return out;
}

void bind_shared_tensors(py::module_& m) {
  py::class_<SharedTensorsHandle>(m, "SharedTensors", kSharedTensorsDoc)
      .def("__getitem__", &tensor_view, py::arg("name"),
           "The tensor `name` as a writeable numpy view of the shared memory; zring.Error "
           "(kind 'missing_tensor') for a name it does not have.")
      .def(
          "torch",
          [](SharedTensorsHandle& self, const std::string& name) {
            return py::module_::import("torch").attr("from_numpy")(tensor_view(self, name));
          },
          py::arg("name"),
          "The tensor `name` as a CPU float32 torch tensor view of the shared memory.")
      .def_property_readonly(
          "values",
          [](SharedTensorsHandle& self) {
            SharedTensors& t = self.checked("SharedTensors");
            return view_of(t, t.values(), {t.numel()});
          },
          "Every value, the tensors one after another in name order (a flat numpy view).")
      .def_property_readonly(
          "names",
          [](SharedTensorsHandle& self) { return names_of(self.checked("SharedTensors")); },
          "The tensors' names, in name order (the order they lie in memory).")
      .def_property_readonly(
          "shapes",
          [](SharedTensorsHandle& self) {
            py::dict out;
            for (const auto& [name, shape] : self.checked("SharedTensors").shapes())
              out[py::str(name)] = py::tuple(py::cast(shape));
            return out;
          },
          "dict[str, tuple]: each tensor's shape.")
      .def_property_readonly(
          "numel", [](SharedTensorsHandle& self) { return self.checked("SharedTensors").numel(); },
          "The number of values of all tensors together.")
      .def_property_readonly(
          "zero_copy",
          [](SharedTensorsHandle& self) { return self.checked("SharedTensors").zero_copy(); },
          "Whether the values sit in zringd's buffer, so all_reduce_in_place copies nothing.")
      .def_property_readonly("closed", &SharedTensorsHandle::closed)
      .def("close", &SharedTensorsHandle::close,
           "Lets go of the tensors; views handed out before keep their memory as plain arrays.")
      .def("__len__",
           [](SharedTensorsHandle& self) { return self.checked("SharedTensors").shapes().size(); })
      .def("__iter__",
           [](SharedTensorsHandle& self) {
             return py::iter(py::cast(names_of(self.checked("SharedTensors"))));
           })
      .def("__contains__",
           [](SharedTensorsHandle& self, const py::object& name) {
             return py::isinstance<py::str>(name) &&
                    self.checked("SharedTensors").shapes().count(name.cast<std::string>()) != 0;
           })
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](SharedTensorsHandle& self, const py::args&) { self.close(); })
      .def("__repr__", &describe_shared_tensors);
}

}  // namespace zring::python
