#pragma once
// Internal: what the files of the Python extension fxcpp._C (issue 37)
// share — one bind_* function per concept, called by module.cpp, and the
// conversions between Python values and fxcpp's (c10::IValue, fx::Argument).
// Tensors cross with torch's own casters (libtorch_python): the same
// at::Tensor on both sides, never a copy.
#include <fx/argument.h>
#include <fx/graph_module.h>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <vector>

namespace fx::python {

namespace py = pybind11;

/// fx::Error -> fxcpp.FxError (set by fxcpp/__init__.py through _set_error_class).
void bind_errors(py::module_& m);
/// fx::Node, fx::Graph, fx::GraphModule (callable) as read-only Python views.
void bind_graph(py::module_& m);
/// Documents in memory: torch.fx GraphModule <-> fx::GraphModule (python/fxcpp/convert.py drives them);
/// a TorchScript module through the importer.
void bind_convert(py::module_& m);
/// The passes toolkit (ShapeProp, CSE, constant folding, split_module, the rewriter, PassManager).
void bind_passes(py::module_& m);
/// optimize_for_inference, quantize, fx::load / fx::save.
void bind_optimize(py::module_& m);
/// fx::aot_module: training graphs (python/fxcpp/training.py wraps it as a torch.nn.Module).
void bind_training(py::module_& m);
/// fx::decoders: check_decoder, optimize_decoder, generate on a decoder graph (python/fxcpp/decoders.py).
void bind_decoders(py::module_& m);

/// A Python value (tensor, number, bool, None, tuple / list of these) as an IValue.
c10::IValue to_ivalue(py::handle value);
/// Every positional argument as an IValue.
std::vector<c10::IValue> to_ivalues(const py::args& args);
/// The items of a Python sequence as IValues.
std::vector<c10::IValue> to_ivalues(const py::sequence& values);
/// An IValue as a Python value (tensors shared, tuples as tuples).
py::object to_python(const c10::IValue& value);
/// gm.forward(inputs), the GIL released while fxcpp runs.
py::object call(GraphModule& gm, std::vector<c10::IValue> inputs);

}  // namespace fx::python
