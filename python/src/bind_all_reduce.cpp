// zring.CompressedAllReduce: the client API, taking and giving dicts of arrays.
#include <pybind11/stl.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>
#include <zring/compressed_all_reduce.hpp>
#include <zring/error.hpp>

#include "all_reduce_handle.hpp"
#include "arrays.hpp"
#include "bindings.hpp"
#include "in_place.hpp"
#include "shared_tensors_handle.hpp"

namespace py = pybind11;

namespace zring::python {
namespace {

std::vector<CompressedMap> peer_maps(const py::list& peers) {
  std::vector<CompressedMap> out;
  for (std::size_t r = 0; r < peers.size(); ++r) {
    if (!py::isinstance<py::dict>(peers[r]))
      throw Error(ErrorCode::invalid_argument,
                  "all_reduce_with_peers: peers[" + std::to_string(r) +
                      "] must be a dict[str, CompressedGradient] (from compress_for_transmission)");
    CompressedMap map;
    for (const auto& [name, gradient] : peers[r].cast<py::dict>()) {
      if (!py::isinstance<CompressedGradient>(gradient))
        throw Error(ErrorCode::invalid_argument,
                    "all_reduce_with_peers: peers[" + std::to_string(r) + "]['" +
                        py::str(name).cast<std::string>() + "'] is not a zring.CompressedGradient");
      map.emplace(name.cast<std::string>(), gradient.cast<const CompressedGradient&>());
    }
    out.push_back(std::move(map));
  }
  return out;
}

// ConnectOptions::on_ring_change for a Python callable (or None): called
// with a zring.Error, the GIL taken for it (the op runs without); what the
// callable raises is reported as unraisable, never through the op. The
// callable is released with the GIL held, on whichever thread lets it go.
std::function<void(const Error&)> ring_change_callback(py::object callable) {
  if (callable.is_none()) return {};
  if (!PyCallable_Check(callable.ptr()))
    throw Error(ErrorCode::invalid_argument,
                "connect: on_ring_change must be callable (it gets the zring.Error) or None");
  const std::shared_ptr<py::object> held(new py::object(std::move(callable)), [](py::object* o) {
    if (!Py_IsInitialized()) return;  // the interpreter is gone: nothing to release it to
    py::gil_scoped_acquire gil;
    delete o;
  });
  return [held](const Error& e) {
    py::gil_scoped_acquire gil;
    try {
      const py::object error_class = py::module_::import("zring._errors").attr("Error");
      (*held)(error_class(to_string(e.code()), e.what()));
    } catch (py::error_already_set& raised) {
      raised.discard_as_unraisable("zring: on_ring_change");
    }
  };
}

// New arrays for the averages, written by the op itself (out of place): a
// C-contiguous input is read where it is, any other gathered into a
// temporary first.
py::dict all_reduce(AllReduceHandle& self, const py::dict& gradients) {
  const std::vector<ArrayRef> in = array_refs(gradients, "all_reduce");
  std::vector<py::array> results;
  TensorViews inputs, outputs;
  results.reserve(in.size());
  for (const ArrayRef& a : in) {
    results.push_back(new_array(a.shape));
    outputs.push_back({a.name, a.shape, static_cast<float*>(results.back().mutable_data())});
    inputs.push_back({a.name, a.shape, nullptr});  // contiguous_values, below
  }
  self.run([&](CompressedAllReduce& ar) {
    std::vector<std::unique_ptr<float[]>> gathered(in.size());
    for (std::size_t i = 0; i < in.size(); ++i)
      inputs[i].data = contiguous_values(in[i], gathered[i]);
    ar.all_reduce(inputs, outputs);
  });
  return result_dict(in, results);
}

void all_reduce_in_place(AllReduceHandle& self, const py::object& tensors) {
  if (py::isinstance<SharedTensorsHandle>(tensors)) {
    SharedTensors shared = tensors.cast<SharedTensorsHandle&>().checked("all_reduce_in_place");
    self.run([&](CompressedAllReduce& ar) { ar.all_reduce_in_place(shared); });
    return;
  }
  if (!py::isinstance<py::dict>(tensors))
    throw py::type_error(
        "all_reduce_in_place: takes a dict[str, array] or a zring.SharedTensors, not " +
        py::str(py::type::handle_of(tensors).attr("__name__")).cast<std::string>());
  const InPlaceDict in = InPlaceDict::from_dict(tensors.cast<py::dict>(), "all_reduce_in_place");
  self.run([&](CompressedAllReduce& ar) { in.reduce(ar); });
}

void broadcast(AllReduceHandle& self, const py::object& tensors, std::size_t root) {
  if (!py::isinstance<py::dict>(tensors))
    throw py::type_error(
        "broadcast: takes a dict[str, array], not " +
        py::str(py::type::handle_of(tensors).attr("__name__")).cast<std::string>());
  const InPlaceDict in = InPlaceDict::from_dict(tensors.cast<py::dict>(), "broadcast");
  self.run([&](CompressedAllReduce& ar) { in.broadcast(ar, root); });
}

void all_reduce_in_place_packed(AllReduceHandle& self, const py::object& buffer,
                                const py::object& layout) {
  const PackedBuffer packed = PackedBuffer::from(buffer, layout, "all_reduce_in_place_packed");
  self.run([&](CompressedAllReduce& ar) { packed.reduce(ar); });
}

SharedTensorsHandle make_shared_tensors(AllReduceHandle& self, const py::dict& shapes) {
  const TensorShapes parsed = tensor_shapes_from(shapes, "make_shared_tensors");
  return SharedTensorsHandle(
      self.run([&](CompressedAllReduce& ar) { return ar.make_shared_tensors(parsed); }));
}

py::dict all_reduce_with_peers(AllReduceHandle& self, const py::dict& gradients,
                               const py::list& peers) {
  const std::vector<ArrayRef> in = array_refs(gradients, "all_reduce_with_peers");
  const std::vector<CompressedMap> maps = peer_maps(peers);
  TensorMap result = self.run(
      [&](CompressedAllReduce& ar) { return ar.all_reduce_with_peers(to_tensors(in), maps); });
  std::vector<py::array> arrays;
  for (const ArrayRef& a : in) {
    const auto found = result.find(a.name);
    if (found == result.end())
      throw Error(ErrorCode::internal,
                  "all_reduce_with_peers: no result for tensor '" + a.name + "'");
    arrays.push_back(owning_array(std::move(found->second.data()), a.shape));
  }
  return result_dict(in, arrays);
}

py::dict compress_for_transmission(AllReduceHandle& self, const py::dict& gradients) {
  const std::vector<ArrayRef> in = array_refs(gradients, "compress_for_transmission");
  CompressedMap result = self.run(
      [&](CompressedAllReduce& ar) { return ar.compress_for_transmission(to_tensors(in)); });
  py::dict out;
  for (auto& [name, gradient] : result) out[py::str(name)] = py::cast(std::move(gradient));
  return out;
}

std::string describe_all_reduce(AllReduceHandle& self) {
  if (self.closed()) return "<zring.CompressedAllReduce (closed)>";
  return self.observe([](CompressedAllReduce& ar) {
    return std::string("<zring.CompressedAllReduce ") +
           (ar.connected() ? "connected" : "standalone") + ", rank " + std::to_string(ar.rank()) +
           " of " + std::to_string(ar.world_size()) + ", method '" + ar.method().to_string() + "'>";
  });
}

const char* kAllReduceDoc = R"doc(
Distributed gradient aggregator with compression.

Standalone, CompressedAllReduce(method, world_size): no transport.
  world_size == 1: all_reduce compresses and decompresses (the caller sees the
                   real compression error).
  world_size > 1:  all_reduce raises zring.Error(kind 'no_communicator');
                   all_reduce_with_peers averages given the other ranks'
                   compressed gradients.
Connected, CompressedAllReduce.connect(endpoint, method, ...): all_reduce goes
round the ring of zringd daemons and returns, on every rank, the same bits:
the average of what each rank compressed.

Tensors are a dict[str, array] of numpy arrays or CPU torch tensors of
float32, of any shape, contiguous or not; results are a dict with the same
keys, each of the input's kind and shape (new arrays: inputs are not
modified). Every rank must pass the same names, shapes and method. The GIL is
released while values are copied and reduced. With error feedback, residuals
are kept per tensor name (in the daemon when connected), so keep names stable
across steps.

Without copies: all_reduce_in_place(dict) writes the averages over the
arrays themselves; make_shared_tensors(shapes) gives tensors that live in the
buffer zringd reads (zring.SharedTensors), which all_reduce_in_place(shared)
reduces with no copy at all.

Not meant to be shared by threads (calls are serialised). close(), or a
`with` block, releases the connection.
)doc";

}  // namespace

void bind_all_reduce(py::module_& m) {
  py::class_<CompressedAllReduce::Traffic>(m, "Traffic",
                                           "Bytes this object's all_reduce calls put on the wire.")
      .def_readonly("wire_bytes", &CompressedAllReduce::Traffic::wire_bytes,
                    "Connected: what the ring moved for this rank's node in the ops; "
                    "standalone: the payload bytes.")
      .def_readonly("dense_bytes", &CompressedAllReduce::Traffic::dense_bytes,
                    "What the same tensors cost as dense float32.")
      .def_readonly("ops", &CompressedAllReduce::Traffic::ops, "all_reduce calls counted.")
      .def("__repr__", [](const CompressedAllReduce::Traffic& t) {
        return "Traffic(wire_bytes=" + std::to_string(t.wire_bytes) +
               ", dense_bytes=" + std::to_string(t.dense_bytes) + ", ops=" + std::to_string(t.ops) +
               ")";
      });

  py::class_<AllReduceHandle>(m, "CompressedAllReduce", kAllReduceDoc)
      .def(py::init([](CompressionMethod method, std::size_t world_size) {
             return std::make_unique<AllReduceHandle>(
                 CompressedAllReduce(std::move(method), world_size));
           }),
           py::arg("method"), py::arg("world_size"),
           "A standalone object (no daemon). method: a CompressionMethod or its text.")
      .def_static(
          "connect",
          [](const std::string& endpoint, CompressionMethod method, std::size_t local_rank,
             std::int64_t timeout_ms, std::size_t ring_change_retries, py::object on_ring_change) {
            if (timeout_ms <= 0)
              throw Error(
                  ErrorCode::invalid_argument,
                  "connect: timeout_ms must be positive, not " + std::to_string(timeout_ms));
            ConnectOptions options;
            options.local_rank = local_rank;
            options.timeout = std::chrono::milliseconds(timeout_ms);
            options.ring_change_retries = ring_change_retries;
            options.on_ring_change = ring_change_callback(std::move(on_ring_change));
            py::gil_scoped_release no_gil;
            return std::make_unique<AllReduceHandle>(
                CompressedAllReduce::connect(endpoint, std::move(method), options));
          },
          py::arg("endpoint"), py::arg("method"), py::kw_only(), py::arg("local_rank") = 0,
          py::arg("timeout_ms") = 30000, py::arg("ring_change_retries") = 0,
          py::arg("on_ring_change") = py::none(), R"doc(
Joins the zringd listening on endpoint (e.g. "ipc:///run/zring/zringd.sock")
and learns the world size and this rank (node-major). local_rank: which of the
daemon's local_ranks this process is. timeout_ms: the longest silence from
the daemon any call waits for. ring_change_retries: how many times an op that
met a change of the ring's members (zring.Error kind 'ring_changed') is
submitted again, with the same inputs, on the new ring (0: the error is
raised; SharedTensors are never submitted again). on_ring_change: called
with that zring.Error before each retry (e.g. to log it). Raises zring.Error
(kind 'connection_failed' or 'timeout') when the daemon does not answer.
)doc")
      .def("all_reduce", &all_reduce, py::arg("gradients"),
           "Compresses, aggregates and averages gradients (dict[str, array]) across the group; "
           "returns a dict of the same names, kinds and shapes.")
      .def("all_reduce_in_place", &all_reduce_in_place, py::arg("tensors"), R"doc(
The op of all_reduce, with the averages written over the values themselves
(the same bits all_reduce returns). tensors: a dict[str, array] (numpy
arrays or CPU torch tensors of float32) or a zring.SharedTensors.

A C-contiguous array is reduced where it is (no copy in Python or in the
glue; connected, the client stages it through the shared buffer while the
ring runs). Any other array (transposed, sliced with steps, reversed) is
gathered into a temporary, reduced in the same op and scattered back.
Refused with zring.Error (kind 'invalid_argument', naming the tensor): a
read-only array, one whose elements share memory (broadcast_to, expand),
two arrays that overlap in memory, and whatever all_reduce refuses. Each
call is a new op: the dict may change its tensors and shapes between calls
(every rank the same way). When it raises, the values are unchanged, except
after an op that failed half-way (then partly averaged: set them again
before retrying). Returns None.
)doc")
      .def("broadcast", &broadcast, py::arg("tensors"), py::arg("root"), R"doc(
Broadcast: after it returns, every rank's tensors (a dict[str, array] of
float32 numpy arrays or CPU torch tensors, changed in place) hold rank
root's values, bit for bit. root is a rank of the ring (0 ..
world_size - 1, as rank numbers them). Nothing is compressed, whatever the
object's method: any bit pattern arrives as it left (NaN payloads, -0.0),
so bytes can travel viewed as float32. Every rank passes the same names,
shapes and root; otherwise every rank gets zring.Error 'manifest_mismatch'
naming the first difference. Raises zring.Error 'invalid_argument' for a
root >= world_size, and refuses the arrays all_reduce_in_place refuses
(read-only, elements sharing memory, overlapping tensors). Standalone with
world_size 1 it changes nothing. When it raises, the values are unchanged,
except after an op of 256 KiB or more that failed half-way (then some may
hold root's already): call it again. Returns None.
)doc")
      .def("all_reduce_in_place_packed", &all_reduce_in_place_packed, py::arg("buffer"),
           py::arg("layout"), R"doc(
all_reduce_in_place of tensors laid out one after another in one buffer (a
DDP bucket): buffer a writeable C-contiguous float32 numpy array or CPU torch
tensor, layout a sequence of (name, shape) pairs whose sizes add up to the
buffer's. Each (name, shape) is a tensor of its own (a method applies per
tensor, error feedback keeps one residual per name), reduced in the buffer.
)doc")
      .def("make_shared_tensors", &make_shared_tensors, py::arg("shapes"), R"doc(
A zring.SharedTensors of the given shapes (dict[str, tuple of ints]),
zero-filled. Connected, they live in a buffer this process shares with its
zringd: all_reduce_in_place(shared) copies nothing. The most recently made
SharedTensors of an object keep that buffer (ops of other tensors go
through another) until the object gives it up after a timeout or a zringd
restart (then shared.zero_copy turns False and it works with a copy each
way). Standalone, they are ordinary memory.
)doc")
      .def("all_reduce_with_peers", &all_reduce_with_peers, py::arg("gradients"), py::arg("peers"),
           "The average given the other ranks' compressed gradients (a list of one "
           "dict[str, CompressedGradient] per other rank). Raises zring.Error with kind "
           "size_mismatch, missing_tensor or count_mismatch when they do not fit.")
      .def("compress_for_transmission", &compress_for_transmission, py::arg("gradients"),
           "dict[str, CompressedGradient]: what would travel (updates error-feedback residuals "
           "exactly as all_reduce would).")
      .def_property_readonly(
          "rank", [](AllReduceHandle& h) { return h.observe([](auto& ar) { return ar.rank(); }); },
          "This process's rank (0 when standalone).")
      .def_property_readonly(
          "world_size",
          [](AllReduceHandle& h) { return h.observe([](auto& ar) { return ar.world_size(); }); })
      .def_property_readonly(
          "method",
          [](AllReduceHandle& h) { return h.observe([](auto& ar) { return ar.method(); }); })
      .def_property_readonly(
          "connected",
          [](AllReduceHandle& h) { return h.observe([](auto& ar) { return ar.connected(); }); })
      .def_property_readonly(
          "traffic",
          [](AllReduceHandle& h) { return h.observe([](auto& ar) { return ar.traffic(); }); },
          "A Traffic: wire and dense bytes of the all_reduce calls so far, and their count.")
      .def_property_readonly("closed", &AllReduceHandle::closed)
      .def("close", &AllReduceHandle::close,
           "Releases the object (and its connection to zringd); later calls raise zring.Error.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](AllReduceHandle& h, const py::args&) { h.close(); })
      .def("__repr__", &describe_all_reduce);
}

}  // namespace zring::python
