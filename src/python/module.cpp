// The extension module fxcpp._C: `import fxcpp` loads it (python/fxcpp/__init__.py).
#include "python/bindings.h"

#include <torch/version.h>

PYBIND11_MODULE(_C, m) {
  m.doc() = "fxcpp's C++ API for Python: the extension behind `import fxcpp`";
  m.attr("__version__") = FXCPP_VERSION;
  m.attr("torch_version") = TORCH_VERSION;
  fx::python::bind_errors(m);
  fx::python::bind_graph(m);
  fx::python::bind_convert(m);
  fx::python::bind_passes(m);
  fx::python::bind_optimize(m);
  fx::python::bind_training(m);
  fx::python::bind_decoders(m);
}
