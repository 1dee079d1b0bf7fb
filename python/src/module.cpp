// zring._zring - the compiled part of the Python package zring.
#include <pybind11/pybind11.h>

#include <chrono>
#include <string>
#include <zring/error.hpp>
#include <zring/version.hpp>

#include "bindings.hpp"
#include "client/status.hpp"
#include "client/status_json.hpp"

namespace py = pybind11;

namespace zring::python {

// zring::Error becomes zring.Error (defined in zring/_errors.py, a
// RuntimeError) with .kind (the code's name), .code (a zring.ErrorCode) and
// the C++ message as its text.
void bind_errors(py::module_& m) {
  py::enum_<ErrorCode> codes(m, "ErrorCode", "The kinds of zring.Error (see docs/errors.md).");
  for (const ErrorCode code : kErrorCodes) codes.value(to_string(code), code);
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const Error& e) {
      py::object error_class;
      try {
        error_class = py::module_::import("zring._errors").attr("Error");
      } catch (py::error_already_set&) {
        PyErr_SetString(PyExc_RuntimeError,
                        (std::string(to_string(e.code())) + ": " + e.what()).c_str());
        return;
      }
      const py::object error = error_class(to_string(e.code()), e.what());
      PyErr_SetObject(error_class.ptr(), error.ptr());
    }
  });
}

}  // namespace zring::python

PYBIND11_MODULE(_zring, m) {
  m.doc() = "The compiled part of zring: see help(zring).";
  zring::python::bind_errors(m);
  zring::python::bind_method(m);
  zring::python::bind_shared_tensors(m);
  zring::python::bind_all_reduce(m);
  m.def("version", &zring::version, "The version of libzring this module runs with.");
  m.def(
      "_status_json",
      [](const std::string& endpoint, std::int64_t timeout_ms) {
        py::gil_scoped_release no_gil;
        return zring::client::status_json(
            zring::client::query_status(endpoint, std::chrono::milliseconds(timeout_ms)));
      },
      py::arg("endpoint"), py::arg("timeout_ms"),
      "The daemon's status report (JSON text); see zring.daemon_status.");
}
