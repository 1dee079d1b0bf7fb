// zring.CompressionKind, zring.CompressionMethod and zring.CompressedGradient.
#include <pybind11/numpy.h>
#include <pybind11/operators.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <zring/compression.hpp>
#include <zring/error.hpp>

#include "arrays.hpp"
#include "bindings.hpp"

namespace py = pybind11;

namespace zring::python {
namespace {

void bind_kind(py::module_& m) {
  py::enum_<CompressionKind>(m, "CompressionKind",
                             "The codec families; error feedback is not a kind but wraps any.")
      .value("none", CompressionKind::none, "float32 values")
      .value("fp16", CompressionKind::fp16, "IEEE half, round to nearest even")
      .value("bf16", CompressionKind::bf16, "bfloat16, round to nearest even")
      .value("topk", CompressionKind::topk, "the k largest magnitudes as (index, value) pairs")
      .value("randomk", CompressionKind::randomk, "k values at indices from a shared seed")
      .value("threshold", CompressionKind::threshold, "(index, value) pairs with |value| > t")
      .value("quantization", CompressionKind::quantization, "b-bit codes on a grid per block")
      .value("signsgd", CompressionKind::signsgd, "1 bit per value and one scale per block");
}

void bind_compression_method(py::module_& m) {
  py::class_<CompressionMethod>(m, "CompressionMethod", R"doc(
A compression method: a codec kind, its parameter, and optionally error feedback.

Text form (parse() and str() round-trip):
  none | fp16 | bf16 | topk:K | topk:R% | randomk:K | randomk:R% |
  threshold:T | quant:B | sign | ef:<any of these>

Wherever zring expects a CompressionMethod, the text form is accepted too:
  zring.CompressedAllReduce("ef:topk:1%", 1)
)doc")
      .def(py::init<>(), "The method 'none'.")
      .def(py::init([](std::string_view text) { return CompressionMethod::parse(text); }),
           py::arg("text"), "Same as CompressionMethod.parse(text).")
      .def_static("parse", &CompressionMethod::parse, py::arg("text"),
                  "Parses the text form; raises zring.Error(kind 'invalid_argument') naming the "
                  "offending text and the accepted forms.")
      .def_static("none", &CompressionMethod::none)
      .def_static("fp16", &CompressionMethod::fp16)
      .def_static("bf16", &CompressionMethod::bf16)
      .def_static("topk", &CompressionMethod::topk, py::arg("k"),
                  "The k largest magnitudes (k >= 1).")
      .def_static("topk_ratio", &CompressionMethod::topk_ratio, py::arg("ratio"),
                  "The largest ratio of the values (0 < ratio <= 1).")
      .def_static("randomk", &CompressionMethod::randomk, py::arg("k"))
      .def_static("randomk_ratio", &CompressionMethod::randomk_ratio, py::arg("ratio"))
      .def_static("threshold", &CompressionMethod::threshold, py::arg("t"))
      .def_static("quantization", &CompressionMethod::quantization, py::arg("bits"),
                  "bits-bit codes (1..16) on an affine grid per block of values.")
      .def_static("signsgd", &CompressionMethod::signsgd)
      .def_static("error_feedback", &CompressionMethod::error_feedback, py::arg("base"),
                  "base with error feedback (base must not have it already).")
      .def("to_string", &CompressionMethod::to_string, "The text form, e.g. 'ef:topk:1%'.")
      .def("__str__", &CompressionMethod::to_string)
      .def("__repr__",
           [](const CompressionMethod& method) {
             return "CompressionMethod('" + method.to_string() + "')";
           })
      .def(py::self == py::self)
      .def(py::self != py::self)
      .def("__hash__",
           [](const CompressionMethod& method) { return py::hash(py::str(method.to_string())); })
      .def_property_readonly("kind", &CompressionMethod::kind)
      .def_property_readonly("has_error_feedback", &CompressionMethod::has_error_feedback)
      .def_property_readonly("base", &CompressionMethod::base, "The method without error feedback.")
      .def_property_readonly("is_ratio", &CompressionMethod::is_ratio)
      .def_property_readonly("count", &CompressionMethod::count)
      .def_property_readonly("ratio", &CompressionMethod::ratio)
      .def_property_readonly("threshold_value", &CompressionMethod::threshold_value)
      .def_property_readonly("bits", &CompressionMethod::bits)
      .def("kept_for", &CompressionMethod::kept_for, py::arg("n"),
           "topk / randomk: how many of n values are kept; n for the other kinds.")
      .def(py::pickle([](const CompressionMethod& method) { return method.to_string(); },
                      [](const std::string& text) { return CompressionMethod::parse(text); }));
  py::implicitly_convertible<py::str, CompressionMethod>();
}

// What pickling a CompressedGradient keeps: every field.
py::tuple gradient_state(const CompressedGradient& g) {
  return py::make_tuple(
      g.method.to_string(), g.indices, g.values, g.original_size, g.shape, g.compression_ratio,
      g.value_bits, g.seed,
      py::bytes(reinterpret_cast<const char*>(g.payload.data()), g.payload.size()));
}

CompressedGradient gradient_from_state(const py::tuple& t) {
  if (t.size() != 9)
    throw Error(ErrorCode::malformed_message, "CompressedGradient: pickled state of " +
                                                  std::to_string(t.size()) + " fields, expected 9");
  CompressedGradient g;
  g.method = CompressionMethod::parse(t[0].cast<std::string>());
  g.indices = t[1].cast<std::vector<std::uint32_t>>();
  g.values = t[2].cast<std::vector<float>>();
  g.original_size = t[3].cast<std::size_t>();
  g.shape = t[4].cast<std::vector<std::size_t>>();
  g.compression_ratio = t[5].cast<double>();
  g.value_bits = t[6].cast<unsigned>();
  g.seed = t[7].cast<std::uint64_t>();
  const std::string payload = t[8].cast<std::string>();
  g.payload.assign(payload.begin(), payload.end());
  return g;
}

void bind_compressed_gradient(py::module_& m) {
  py::class_<CompressedGradient>(m, "CompressedGradient", R"doc(
One tensor as it travels: the real encoded bytes (payload) and the decoded view.

indices empty means dense (values has original_size entries); otherwise
values[j] belongs at indices[j] and every other element is zero. values are
the dequantized float32 numbers, D(C(g)). indices and values are read-only
numpy views. Picklable, so ranks can exchange them for
CompressedAllReduce.all_reduce_with_peers.
)doc")
      .def_property_readonly("method", [](const CompressedGradient& g) { return g.method; })
      .def_property_readonly("indices",
                             [](py::object self) {
                               return readonly_view(self.cast<const CompressedGradient&>().indices,
                                                    self);
                             })
      .def_property_readonly("values",
                             [](py::object self) {
                               return readonly_view(self.cast<const CompressedGradient&>().values,
                                                    self);
                             })
      .def_property_readonly("original_size",
                             [](const CompressedGradient& g) { return g.original_size; })
      .def_property_readonly("shape",
                             [](const CompressedGradient& g) {
                               py::tuple shape(g.shape.size());
                               for (std::size_t d = 0; d < g.shape.size(); ++d)
                                 shape[d] = g.shape[d];
                               return shape;
                             })
      .def_property_readonly(
          "compression_ratio", [](const CompressedGradient& g) { return g.compression_ratio; },
          "payload_bytes() / dense_bytes()")
      .def_property_readonly("value_bits", [](const CompressedGradient& g) { return g.value_bits; })
      .def_property_readonly(
          "seed", [](const CompressedGradient& g) { return g.seed; },
          "randomk: the seed that picked the indices")
      .def_property_readonly(
          "payload",
          [](const CompressedGradient& g) {
            return py::bytes(reinterpret_cast<const char*>(g.payload.data()), g.payload.size());
          },
          "The encoded bytes that travel.")
      .def("payload_bytes", &CompressedGradient::payload_bytes,
           "Size of the encoding that travels.")
      .def("dense_bytes", &CompressedGradient::dense_bytes,
           "What the tensor costs as dense float32.")
      .def(
          "to_dense",
          [](const CompressedGradient& g) { return owning_array(g.to_dense(), g.shape); },
          "The view scattered into a dense float32 numpy array of the tensor's shape.")
      .def("__repr__",
           [](const CompressedGradient& g) {
             return "CompressedGradient(method='" + g.method.to_string() +
                    "', original_size=" + std::to_string(g.original_size) +
                    ", kept=" + std::to_string(g.values.size()) +
                    ", payload_bytes=" + std::to_string(g.payload_bytes()) + ")";
           })
      .def(py::pickle(&gradient_state, &gradient_from_state));
}

}  // namespace

void bind_method(py::module_& m) {
  bind_kind(m);
  bind_compression_method(m);
  bind_compressed_gradient(m);
}

}  // namespace zring::python
