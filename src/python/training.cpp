// fx::aot_module from Python (issue 37 on issue 34's training graphs): an
// fxcpp GraphModule compiled for training, its forward run with the GIL
// released; the result is differentiable through one autograd node of
// libtorch's own engine, so loss.backward() from Python runs fxcpp's
// backward graph and accumulates into the module's parameters (the tensors
// python/fxcpp/training.py's AotModule gives the optimizer).
#include "python/bindings.h"

#include <fx/aot.h>

namespace fx::python {

namespace {

PartitionFn partition_named(const std::string& name) {
  if (name == "default") return default_partition;
  if (name == "functorch-min-cut") return min_cut_rematerialization_partition;
  if (name == "min-cut") return min_cut_partition();
  throw Error("aot_module: partition must be 'default', 'min-cut' or 'functorch-min-cut', not '" + name + "'");
}

}  // namespace

void bind_training(py::module_& m) {
  py::class_<AotModule, std::shared_ptr<AotModule>>(
      m, "AotModule", "fx::aot_module of an fxcpp GraphModule: forward and backward graphs compiled for training")
      .def("forward",
           [](AotModule& aot, const py::args& args) {
             std::vector<c10::IValue> inputs = to_ivalues(args);
             c10::IValue out;
             {
               py::gil_scoped_release release;
               out = aot.forward(std::move(inputs));
             }
             return to_python(out);
           })
      .def("train", [](AotModule& aot, bool mode) { aot.train(mode); }, py::arg("mode") = true)
      .def("forward_graph", &AotModule::forward_graph, "The forward GraphModule of the last traced signature.")
      .def("backward_graph", &AotModule::backward_graph, "The backward GraphModule of the last traced signature.")
      .def("joint_graph", &AotModule::joint_graph, "The joint GraphModule of the last traced signature.");
  m.def(
      "_aot_module",
      [](const std::shared_ptr<GraphModule>& gm, const std::string& partition) {
        AotOptions options;
        options.partition_fn = partition_named(partition);
        return aot_module(gm, options);
      },
      py::arg("gm"), py::arg("partition") = "default",
      "fx::aot_module(gm): traced and compiled at the first forward (again for new shapes or train/eval).");
}

}  // namespace fx::python
