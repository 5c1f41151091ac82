// The optimiser, int8 quantization and fxcpp files from Python: each a
// new fx::GraphModule (python/fxcpp/api.py wraps it as a torch.nn.Module),
// computed with the GIL released.
#include "python/bindings.h"

#include <fx/onednn.h>
#include <fx/optimize.h>
#include <fx/quantization.h>
#include <fx/serialize.h>

#include <ATen/Parallel.h>

namespace fx::python {

namespace {

py::dict report_dict(const OptimizeReport& r) {
  py::dict d;
  d["optimize_ms"] = r.optimize_ms;
  d["nodes_before"] = r.nodes_before;
  d["nodes_after"] = r.nodes_after;
  d["frozen_modules"] = r.frozen_modules;
  d["folded_batch_norms"] = r.folded_batch_norms;
  d["onednn_convs"] = r.onednn_convs;
  d["onednn_linears"] = r.onednn_linears;
  d["onednn_matmuls"] = r.onednn_matmuls;
  d["fused_post_ops"] = r.fused_post_ops;
  d["reinplaced"] = r.reinplaced;
  d["fused_kernels"] = r.fused_groups;
  d["fused_nodes"] = r.fused_nodes;
  d["dtype"] = std::string(c10::toString(r.dtype));
  d["cpu"] = r.cpu;
  d["aten_linears"] = r.aten_linears;
  py::list choices;
  for (const LinearChoice& c : r.linear_choices) {
    py::dict e;
    e["node"] = c.node;
    e["input_sizes"] = c.input_sizes;
    e["out_features"] = c.out_features;
    e["onednn_ms"] = c.timing.onednn_ms;
    e["aten_ms"] = c.timing.aten_ms;
    e["kernel"] = c.aten ? "aten" : "onednn";
    choices.append(e);
  }
  d["linear_choices"] = choices;
  d["linear_note"] = r.linear_note;
  d["warnings"] = r.warnings;
  return d;
}

std::pair<std::shared_ptr<GraphModule>, py::dict> optimize(const std::shared_ptr<GraphModule>& gm,
                                                             const py::sequence& example_inputs,
                                                             const std::string& dtype, int threads,
                                                             const std::string& linear_kernel) {
  OptimizeOptions options;
  options.linear_kernel = linear_kernel_from_name(linear_kernel);
  options.example_inputs = to_ivalues(example_inputs);
  if (dtype == "bfloat16") options.dtype = c10::ScalarType::BFloat16;
  else if (dtype != "float32") throw Error("optimize: dtype must be torch.float32 or torch.bfloat16, not " + dtype);
  OptimizeReport report;
  std::shared_ptr<GraphModule> out;
  {
    py::gil_scoped_release release;
    if (threads > 0) at::set_num_threads(threads);
    out = optimize_for_inference(gm, options, &report);
  }
  return {out, report_dict(report)};
}

std::pair<std::shared_ptr<GraphModule>, std::string> quantize(const std::shared_ptr<GraphModule>& gm,
                                                              const py::sequence& example_inputs,
                                                              const py::sequence& calibration, int weight_bits) {
  if (weight_bits != 7 && weight_bits != 8)
    throw Error("fxcpp.quantize: weight_bits must be 7 or 8, got " + std::to_string(weight_bits));
  std::vector<c10::IValue> inputs = to_ivalues(example_inputs);
  std::vector<quantization::CalibrationBatch> batches;
  for (py::handle batch : calibration) {
    if (py::isinstance<py::tuple>(batch) || py::isinstance<py::list>(batch))
      batches.push_back(to_ivalues(py::reinterpret_borrow<py::sequence>(batch)));
    else
      batches.push_back({to_ivalue(batch)});
  }
  quantization::QuantizeOptions options;
  options.mapping = options.mapping.with_weight_bits(weight_bits);
  quantization::QuantizeReport report;
  py::gil_scoped_release release;
  auto out = quantization::quantize(gm, inputs, batches, options, &report);
  return {out, report.str()};
}

}  // namespace

void bind_optimize(py::module_& m) {
  m.def("_optimize", &optimize, py::arg("gm"), py::arg("example_inputs"), py::arg("dtype") = "float32",
        py::arg("threads") = 0, py::arg("linear_kernel") = "auto",
        "fx::optimize_for_inference: (optimised module, report dict); threads > 0 sets libtorch's (process-wide) "
        "intra-op threads first; linear_kernel: auto, onednn or aten (fx::LinearKernel).");
  m.def("_quantize", &quantize, py::arg("gm"), py::arg("example_inputs"), py::arg("calibration"),
        py::arg("weight_bits") = 8,
        "fx::quantization::quantize (int8, oneDNN): (module, report text). calibration: batches, each a tensor or a "
        "tuple of forward arguments; weight_bits 7: weights in [-64, 63] (QConfigMapping::with_weight_range).");
  m.def("_load",
        [](const std::string& path) {
          py::gil_scoped_release release;
          return fx::load(path);
        },
        "fx::load: the fx::GraphModule of an fxcpp file.");
  m.def("_save",
        [](const GraphModule& gm, const std::string& path, bool kernel_objects) {
          py::gil_scoped_release release;
          fx::SaveOptions options;
          options.kernel_objects = kernel_objects;
          return fx::save(gm, path, options).kernel_objects;
        },
        py::arg("gm"), py::arg("path"), py::arg("kernel_objects") = false,
        "fx::save: writes gm to path; the kernel objects stored (SaveOptions::kernel_objects).");
  m.def("_cpu_summary", [] { return onednn::cpu_summary(); }, "What oneDNN can run on this CPU.");
}

}  // namespace fx::python
