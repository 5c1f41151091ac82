// fx::aot_module from Python (issue 37 on issue 34's training graphs): an
// fxcpp GraphModule compiled for training, its forward run with the GIL
// released; the result is differentiable through one autograd node of
// libtorch's own engine, so loss.backward() from Python runs fxcpp's
// backward graph and accumulates into the module's parameters (the tensors
// python/fxcpp/training.py's AotModule gives the optimizer).
#include "passes/graph_copy.h"
#include "python/bindings.h"

#include <fx/aot.h>
#include <fx/fused_sgd.h>
#include <fx/onednn.h>

#include <algorithm>

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
  py::class_<FusedSGD, std::shared_ptr<FusedSGD>>(
      m, "FusedSGD", "fx::FusedSGD: torch.optim.SGD's update in one pass per parameter (the optimizer of sgd_in_backward)")
      .def(py::init([](const std::vector<at::Tensor>& params, double lr, double momentum, double dampening,
                       double weight_decay, bool nesterov) {
             return std::make_shared<FusedSGD>(params, torch::optim::SGDOptions(lr)
                                                           .momentum(momentum)
                                                           .dampening(dampening)
                                                           .weight_decay(weight_decay)
                                                           .nesterov(nesterov));
           }),
           py::arg("params"), py::arg("lr"), py::arg("momentum") = 0.0, py::arg("dampening") = 0.0,
           py::arg("weight_decay") = 0.0, py::arg("nesterov") = false)
      .def(
          "momentum_buffer",
          [](const FusedSGD& opt, const at::Tensor& param) -> py::object {
            auto it = opt.state().find(c10::guts::to_string(param.unsafeGetTensorImpl()));
            if (it == opt.state().end()) return py::none();
            return py::cast(static_cast<const torch::optim::SGDParamState&>(*it->second).momentum_buffer());
          },
          "The momentum buffer of a parameter (None before its first update).");
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
      .def("joint_graph", &AotModule::joint_graph, "The joint GraphModule of the last traced signature.")
      .def("num_traces", &AotModule::num_traces, "How many input signatures were traced.")
      .def("num_accumulating_backwards", &AotModule::num_accumulating_backwards,
           "How many backward runs added each gradient into its .grad as the graph computed it.")
      .def(
          "set_optimizer_in_backward",
          [](AotModule& aot, std::shared_ptr<FusedSGD> opt) { aot.set_optimizer_in_backward(std::move(opt)); },
          py::arg("optimizer").none(true),
          "fx::AotModule::set_optimizer_in_backward: the optimizer steps inside every later backward (None removes it).")
      .def(
          "optimizer_in_backward_stats",
          [](const AotModule& aot) {
            const OptimizerInBackwardStats s = aot.optimizer_in_backward_stats();
            py::dict d;
            d["steps"] = s.steps;
            d["updates_at_gradient"] = s.updates_at_gradient;
            d["updates_after_reads"] = s.updates_after_reads;
            d["updates_at_end"] = s.updates_at_end;
            return d;
          },
          "What the optimizer in backward did: steps, updates_at_gradient, updates_after_reads, updates_at_end.");
  m.def(
      "_rewrite_for_training",
      [](const std::shared_ptr<GraphModule>& gm, bool conv_forward_rewrites, const std::vector<std::string>& only) {
        TrainingCompileOptions options;
        options.conv_forward_rewrites = conv_forward_rewrites;
        if (!only.empty()) {
          const std::vector<std::string> known = {"conv_as_winograd", "conv_weight_grad_as_matmul", "conv_as_matmul",
                                                  "bmm_as_onednn_matmul", "bernoulli_as_fxcpp",
                                                  "fuse_batch_norm_activation", "fuse_kernels",
                                                  "sink_recomputation"};
          for (const std::string& name : only)
            if (std::find(known.begin(), known.end(), name) == known.end())
              throw Error("_rewrite_for_training: no rewrite named '" + name + "'");
          auto on = [&](const char* name) { return std::find(only.begin(), only.end(), name) != only.end(); };
          if (!on("conv_as_winograd")) options.conv_winograd_min_positions = 0;
          if (!on("conv_weight_grad_as_matmul")) options.conv_weight_grad_matmul_max_positions = 0;
          if (!on("conv_as_matmul")) options.conv_matmul_max_positions = 0;
          options.bmm_as_onednn_matmul = on("bmm_as_onednn_matmul");
          options.bernoulli_as_fxcpp = on("bernoulli_as_fxcpp");
          options.fuse_batch_norm_activation = on("fuse_batch_norm_activation");
          options.fuse_kernels = on("fuse_kernels");
          options.sink_recomputation = on("sink_recomputation");
        }
        auto copy = std::make_shared<GraphModule>(gm, passes_detail::copy_graph(gm->graph()), gm->class_name());
        TrainingRewrites r;
        {
          py::gil_scoped_release release;
          r = rewrite_for_training(copy->graph(), options);
          copy->recompile();
        }
        py::dict counts;
        for (const auto& [name, n] : r.items()) counts[py::str(name)] = n;
        return py::make_tuple(copy, counts);
      },
      py::arg("gm"), py::arg("conv_forward_rewrites") = false, py::arg("only") = std::vector<std::string>{},
      "fx::rewrite_for_training on a copy of gm (a forward or backward graph of aot_module) with "
      "TrainingCompileOptions' defaults, or only the rewrites named in `only`: (the copy, how many nodes each "
      "rewrite replaced).");
  m.def("_has_winograd_kernels", &onednn::has_winograd_kernels,
        "Whether oneDNN has its Winograd convolutions on this CPU (conv_as_winograd can fire).");
  m.def(
      "_aot_module",
      [](const std::shared_ptr<GraphModule>& gm, const std::string& partition, bool conv_forward_rewrites,
         bool fuse_kernels) {
        AotOptions options;
        options.partition_fn = partition_named(partition);
        TrainingCompileOptions compile;
        compile.conv_forward_rewrites = conv_forward_rewrites;
        compile.fuse_kernels = fuse_kernels;
        options.fw_compiler = options.bw_compiler = training_compiler(compile);
        return aot_module(gm, options);
      },
      py::arg("gm"), py::arg("partition") = "default", py::arg("conv_forward_rewrites") = false,
      py::arg("fuse_kernels") = true,
      "fx::aot_module(gm): traced and compiled at the first forward (again for new shapes or train/eval).");
}

}  // namespace fx::python
