// zring.CompressedAllReduce: the client API, taking and giving dicts of arrays.
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/stl.h>
#include <zring/compressed_all_reduce.hpp>
#include <zring/error.hpp>

#include "arrays.hpp"
#include "bindings.hpp"

namespace py = pybind11;

namespace zring::python {
namespace {

// The C++ object and a lock: it is not thread-safe, and every call that
// does real work runs with the GIL released, so two Python threads could
// otherwise enter it at once. close() drops it (and, connected, the
// daemon's hold on this rank) before garbage collection would.
class AllReduceHandle {
 public:
  explicit AllReduceHandle(CompressedAllReduce ar) : ar_(std::move(ar)) {}

  // Runs f(ar) with the GIL released and the lock held.
  template <typename F>
  auto run(F&& f) {
    py::gil_scoped_release no_gil;
    std::lock_guard lock(mutex_);
    return f(checked());
  }

  // Observers: cheap, under the lock but with the GIL (they never wait).
  template <typename F>
  auto observe(F&& f) {
    std::lock_guard lock(mutex_);
    return f(checked());
  }

  void close() {
    py::gil_scoped_release no_gil;
    std::lock_guard lock(mutex_);
    ar_.reset();
  }
  bool closed() {
    std::lock_guard lock(mutex_);
    return !ar_;
  }

 private:
  CompressedAllReduce& checked() {
    if (!ar_)
      throw Error(ErrorCode::invalid_argument,
                  "CompressedAllReduce: this object was closed; make a new one (or connect again)");
    return *ar_;
  }

  std::mutex mutex_;
  std::optional<CompressedAllReduce> ar_;
};

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

py::dict all_reduce(AllReduceHandle& self, const py::dict& gradients) {
  const InputDict in = InputDict::from_dict(gradients, "all_reduce");
  TensorMap result = self.run([&](CompressedAllReduce& ar) { return ar.all_reduce(in.to_tensors()); });
  return in.to_dict(std::move(result), "all_reduce");
}

py::dict all_reduce_with_peers(AllReduceHandle& self, const py::dict& gradients, const py::list& peers) {
  const InputDict in = InputDict::from_dict(gradients, "all_reduce_with_peers");
  const std::vector<CompressedMap> maps = peer_maps(peers);
  TensorMap result = self.run(
      [&](CompressedAllReduce& ar) { return ar.all_reduce_with_peers(in.to_tensors(), maps); });
  return in.to_dict(std::move(result), "all_reduce_with_peers");
}

py::dict compress_for_transmission(AllReduceHandle& self, const py::dict& gradients) {
  const InputDict in = InputDict::from_dict(gradients, "compress_for_transmission");
  CompressedMap result =
      self.run([&](CompressedAllReduce& ar) { return ar.compress_for_transmission(in.to_tensors()); });
  py::dict out;
  for (auto& [name, gradient] : result) out[py::str(name)] = py::cast(std::move(gradient));
  return out;
}

std::string describe(AllReduceHandle& self) {
  if (self.closed()) return "<zring.CompressedAllReduce (closed)>";
  return self.observe([](CompressedAllReduce& ar) {
    return std::string("<zring.CompressedAllReduce ") + (ar.connected() ? "connected" : "standalone") +
           ", rank " + std::to_string(ar.rank()) + " of " + std::to_string(ar.world_size()) +
           ", method '" + ar.method().to_string() + "'>";
  });
}

const char* kClassDoc = R"doc(
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
        return "Traffic(wire_bytes=" + std::to_string(t.wire_bytes) + ", dense_bytes=" +
               std::to_string(t.dense_bytes) + ", ops=" + std::to_string(t.ops) + ")";
      });

  py::class_<AllReduceHandle>(m, "CompressedAllReduce", kClassDoc)
      .def(py::init([](CompressionMethod method, std::size_t world_size) {
             return std::make_unique<AllReduceHandle>(CompressedAllReduce(std::move(method), world_size));
           }),
           py::arg("method"), py::arg("world_size"),
           "A standalone object (no daemon). method: a CompressionMethod or its text.")
      .def_static(
          "connect",
          [](const std::string& endpoint, CompressionMethod method, std::size_t local_rank,
             std::int64_t timeout_ms) {
            if (timeout_ms <= 0)
              throw Error(ErrorCode::invalid_argument,
                          "connect: timeout_ms must be positive, not " + std::to_string(timeout_ms));
            ConnectOptions options;
            options.local_rank = local_rank;
            options.timeout = std::chrono::milliseconds(timeout_ms);
            py::gil_scoped_release no_gil;
            return std::make_unique<AllReduceHandle>(
                CompressedAllReduce::connect(endpoint, std::move(method), options));
          },
          py::arg("endpoint"), py::arg("method"), py::kw_only(), py::arg("local_rank") = 0,
          py::arg("timeout_ms") = 30000, R"doc(
Joins the zringd listening on endpoint (e.g. "ipc:///run/zring/zringd.sock")
and learns the world size and this rank (node-major). local_rank: which of the
daemon's local_ranks this process is. timeout_ms: the longest silence from
the daemon any call waits for. Raises zring.Error (kind 'connection_failed'
or 'timeout') when the daemon does not answer.
)doc")
      .def("all_reduce", &all_reduce, py::arg("gradients"),
           "Compresses, aggregates and averages gradients (dict[str, array]) across the group; "
           "returns a dict of the same names, kinds and shapes.")
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
          "method", [](AllReduceHandle& h) { return h.observe([](auto& ar) { return ar.method(); }); })
      .def_property_readonly(
          "connected",
          [](AllReduceHandle& h) { return h.observe([](auto& ar) { return ar.connected(); }); })
      .def_property_readonly(
          "traffic", [](AllReduceHandle& h) { return h.observe([](auto& ar) { return ar.traffic(); }); },
          "A Traffic: wire and dense bytes of the all_reduce calls so far, and their count.")
      .def_property_readonly("closed", &AllReduceHandle::closed)
      .def("close", &AllReduceHandle::close,
           "Releases the object (and its connection to zringd); later calls raise zring.Error.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](AllReduceHandle& h, const py::args&) { h.close(); })
      .def("__repr__", &describe);
}

}  // namespace zring::python
