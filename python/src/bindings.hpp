// bindings.hpp - the parts of the Python module zring._zring, one per concept.
#pragma once

#include <pybind11/pybind11.h>

namespace zring::python {

// zring.ErrorCode and the translation of zring::Error into zring.Error.
void bind_errors(pybind11::module_& m);
// zring.CompressionKind, zring.CompressionMethod, zring.CompressedGradient.
void bind_method(pybind11::module_& m);
// zring.CompressedAllReduce and zring.Traffic.
void bind_all_reduce(pybind11::module_& m);
// zring.SharedTensors (shared_tensors_handle.hpp).
void bind_shared_tensors(pybind11::module_& m);

}  // namespace zring::python
