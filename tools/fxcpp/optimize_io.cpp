// fx::optimize_for_inference for the command line (see optimize_io.h).
#include "optimize_io.h"

#include <fx/onednn.h>

#include <chrono>
#include <cstdio>

namespace fx::cli {

std::shared_ptr<GraphModule> optimize_model(std::shared_ptr<GraphModule> gm, const std::vector<c10::IValue>& inputs,
                                            bool bf16, OptimizeReport* report, bool plan_memory, bool winograd,
                                            LinearKernel linear, bool blocked, bool fuse) {
  OptimizeOptions options;
  options.fuse_kernels = fuse;
  options.linear_kernel = linear;
  options.blocked_activations = blocked;
  options.plan_memory = plan_memory;
  options.winograd = winograd;
  options.example_inputs = inputs;
  if (bf16) options.dtype = at::kBFloat16;
  // The first forward (kernels made, weights packed) runs here, after `gm`
  // is released: when the caller gave up its module, the original
  // parameters (which the result does not hold) are freed before the packed
  // copies are made, instead of all three (original, folded, packed) living
  // at once.
  options.warm_up = false;
  std::shared_ptr<GraphModule> out = optimize_for_inference(gm, options, report);
  gm.reset();
  const auto start = std::chrono::steady_clock::now();
  if (!inputs.empty()) out->forward(inputs);
  if (report)
    report->optimize_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return out;
}

std::string report_line(const OptimizeReport& r) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "optimised in %.1f ms: %zu -> %zu nodes; %zu modules frozen, %zu batch norms folded, %zu no-ops "
                "removed; oneDNN: %zu convs, %zu linears, %zu matmuls, %zu fused post-ops, %s kernels (%s)",
                r.optimize_ms, r.nodes_before, r.nodes_after, r.frozen_modules, r.folded_batch_norms, r.removed_noops,
                r.onednn_convs, r.onednn_linears, r.onednn_matmuls, r.fused_post_ops,
                r.dtype == at::kBFloat16 ? "bfloat16" : "float32", onednn::cpu_isa().c_str());
  std::string line = buf;
  if (!r.linear_choices.empty()) {
    std::snprintf(buf, sizeof buf, "; %zu linears timed, %zu on ATen (BLAS)", r.linear_choices.size(), r.aten_linears);
    line += buf;
  } else if (r.aten_linears) {
    std::snprintf(buf, sizeof buf, "; %zu linears on ATen (BLAS)", r.aten_linears);
    line += buf;
  }
  if (!r.linear_note.empty() && r.onednn_linears) line += "; " + r.linear_note;
  if (r.fused_groups) {
    std::snprintf(buf, sizeof buf, "; fused: %zu kernels for %zu nodes (%zu distinct, %zu compiled in %.0f ms)",
                  r.fused_groups, r.fused_nodes, r.fused_kernels, r.kernels_compiled, r.kernel_compile_ms);
    line += buf;
  }
  return line;
}

std::vector<std::string> linear_choice_lines(const OptimizeReport& r) {
  std::vector<std::string> lines;
  std::vector<size_t> layers;  // per line: how many layers share its shape and measurement
  std::vector<const LinearChoice*> first;
  for (const LinearChoice& c : r.linear_choices) {
    size_t i = 0;
    while (i < first.size() && !(first[i]->input_sizes == c.input_sizes && first[i]->out_features == c.out_features &&
                                 first[i]->timing.onednn_ms == c.timing.onednn_ms &&
                                 first[i]->timing.aten_ms == c.timing.aten_ms))
      ++i;
    if (i == first.size()) {
      first.push_back(&c);
      layers.push_back(0);
    }
    ++layers[i];
  }
  for (size_t i = 0; i < first.size(); ++i) {
    const LinearChoice& c = *first[i];
    std::string sizes;
    for (int64_t s : c.input_sizes) sizes += (sizes.empty() ? "" : ", ") + std::to_string(s);
    char buf[256];
    std::snprintf(buf, sizeof buf, "linear [%s] -> %lld (%zu layer%s): oneDNN %.3f ms, ATen %.3f ms: %s", sizes.c_str(),
                  static_cast<long long>(c.out_features), layers[i], layers[i] == 1 ? "" : "s", c.timing.onednn_ms,
                  c.timing.aten_ms, c.aten ? "ATen (BLAS)" : "oneDNN");
    lines.push_back(buf);
  }
  return lines;
}

LinearKernel linear_kernel_option(const std::string& value) {
  try {
    return linear_kernel_from_name(value);
  } catch (const Error&) {
    throw Error("--linear-kernel " + value + ": expected auto, onednn or aten");
  }
}

void print_warnings(const char* command, const OptimizeReport& r) {
  for (const std::string& w : r.warnings) std::fprintf(stderr, "fxcpp %s: warning: %s\n", command, w.c_str());
}

}  // namespace fx::cli
