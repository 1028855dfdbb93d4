// spectrasift._core: the nanobind extension under the Python package spectrasift (python/spectrasift). The
// package's __init__.py checks and converts the arguments, this module calls the library with the GIL released.
// Library errors become Python exceptions here (translate_error), with the library's message.
#include <Python.h>
#include <nanobind/nanobind.h>

#include "common.hpp"
#include "spectrasift/error.hpp"

namespace spectrasift::python {

namespace {

PyObject* no_model_error = nullptr;

/// ErrorCode -> a Python exception: ValueError for bad arguments, OSError for files, MemoryError for a job
/// over its budget, NoModelError (a RuntimeError) for no model, RuntimeError for device and other errors.
/// The exception carries `code` (the CLI's JSON code name, e.g. "invalid_argument") and `backend`.
PyObject* exception_type(const Error& e) {
  switch (e.code()) {
    case ErrorCode::kInvalidArgument:
      return PyExc_ValueError;
    case ErrorCode::kIo:
    case ErrorCode::kBadFormat:
      return PyExc_OSError;
    case ErrorCode::kUnsupported:
      return e.backend().empty() ? PyExc_OSError : PyExc_RuntimeError;
    case ErrorCode::kOutOfMemory:
      return PyExc_MemoryError;
    case ErrorCode::kNoModel:
      return no_model_error;
    default:
      return PyExc_RuntimeError;
  }
}

const char* code_name(ErrorCode c) {
  switch (c) {
    case ErrorCode::kInvalidArgument:
      return "invalid_argument";
    case ErrorCode::kIo:
      return "io";
    case ErrorCode::kBadFormat:
      return "bad_format";
    case ErrorCode::kUnsupported:
      return "unsupported";
    case ErrorCode::kBackendUnavailable:
      return "backend_unavailable";
    case ErrorCode::kBackend:
      return "backend";
    case ErrorCode::kOutOfMemory:
      return "out_of_memory";
    case ErrorCode::kNoModel:
      return "no_model";
    case ErrorCode::kInternal:
      return "internal";
  }
  return "internal";
}

void translate_error(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const Error& e) {
    PyObject* type = exception_type(e);
    PyObject* exc = PyObject_CallFunction(type, "s", e.what());
    if (!exc) return;  // the call set its own error
    PyObject* code = PyUnicode_FromString(code_name(e.code()));
    PyObject* backend = PyUnicode_FromString(e.backend().c_str());
    if (code) PyObject_SetAttrString(exc, "code", code);
    if (backend) PyObject_SetAttrString(exc, "backend", backend);
    Py_XDECREF(code);
    Py_XDECREF(backend);
    PyErr_SetObject(type, exc);
    Py_DECREF(exc);
  }
}

}  // namespace

}  // namespace spectrasift::python

NB_MODULE(_core, m) {
  using namespace spectrasift::python;
  m.doc() = "spectrasift's C++ library (the package spectrasift wraps it; use that)";
  no_model_error = PyErr_NewExceptionWithDoc(
      "spectrasift.NoModelError",
      "register() found no model, or a model that is not reliable (accept_weak=False); .result holds what was found",
      PyExc_RuntimeError, nullptr);
  m.attr("NoModelError") = nb::handle(no_model_error);
  nb::register_exception_translator(translate_error);
  m.attr("__version__") = spectrasift::version();
  m.def("_last_input_address", &last_input,
        "address of the last input buffer given to the library by sift() or spectral() (for the no-copy test)");
  m.def("_last_call_ms", &last_call_ms,
        "wall time of the last library call made by sift() or spectral(), in ms (for the overhead figure)");
  bind_context(m);
  bind_features(m);
  bind_geometry(m);
  bind_spectral(m);
}
