// fx::Error -> fxcpp.FxError, a RuntimeError subclass defined in Python
// (python/fxcpp/__init__.py.in) that takes the message and finds the node's
// name in it. Other C++ exceptions keep pybind11's translation (RuntimeError).
#include "python/bindings.h"

#include <fx/error.h>

namespace fx::python {

namespace {

/// The Python class fx::Error becomes; never destroyed (it may outlive the interpreter's teardown).
py::object& error_class() {
  static auto* cls = new py::object();
  return *cls;
}

}  // namespace

void bind_errors(py::module_& m) {
  m.def("_set_error_class", [](py::object cls) { error_class() = std::move(cls); },
        "Sets the Python class fx::Error is raised as (fxcpp.FxError).");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      if (!error_class()) {
        PyErr_SetString(PyExc_RuntimeError, e.what());
        return;
      }
      py::object exc = error_class()(e.what());
      PyErr_SetObject(error_class().ptr(), exc.ptr());
    }
  });
}

}  // namespace fx::python
