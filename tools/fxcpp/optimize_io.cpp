// fx::optimize_for_inference for the command line (see optimize_io.h).
#include "optimize_io.h"

#include <fx/onednn.h>

#include <chrono>
#include <cstdio>

namespace fx::cli {

std::shared_ptr<GraphModule> optimize_model(std::shared_ptr<GraphModule> gm, const std::vector<c10::IValue>& inputs,
                                            bool bf16, OptimizeReport* report, bool plan_memory, bool winograd) {
  OptimizeOptions options;
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
  return buf;
}

void print_warnings(const char* command, const OptimizeReport& r) {
  for (const std::string& w : r.warnings) std::fprintf(stderr, "fxcpp %s: warning: %s\n", command, w.c_str());
}

}  // namespace fx::cli
