// optimize_for_inference: freeze → fold batch norm → lower to oneDNN →
// clean up → warm up (see the header).
#include <fx/passes/optimize_for_inference.h>

#include <fx/graph.h>
#include <fx/module_attributes.h>
#include <fx/passes/fold_batch_norm.h>
#include <fx/passes/fold_conv_add_mul.h>
#include <fx/passes/freeze.h>
#include <fx/passes/lower_to_onednn.h>
#include <fx/passes/reinplace.h>
#include <fx/passes/remove_dropout.h>
#include <fx/passes/shape_prop.h>

#include "passes/graph_copy.h"

#include <ATen/core/grad_mode.h>
#include <malloc.h>

#include <chrono>

namespace fx {
namespace {

size_t count(const Graph& g, Opcode op, const char* target = nullptr) {
  size_t n = 0;
  for (const Node* node : g.nodes()) n += node->op() == op && (!target || node->target() == target);
  return n;
}

/// glibc returns large freed blocks to the OS and page-faults them back on
/// the next forward; keep them (mmap threshold at its maximum, no trimming).
void keep_freed_memory() {
  mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
  mallopt(M_TRIM_THRESHOLD, 1024 * 1024 * 1024);
}

}  // namespace

std::shared_ptr<GraphModule> optimize_for_inference(const std::shared_ptr<GraphModule>& gm,
                                                    const OptimizeOptions& options, OptimizeReport* report) {
  const auto start = std::chrono::steady_clock::now();
  if (!gm) throw Error("optimize_for_inference: no module given");
  if (options.dtype != c10::ScalarType::Float && options.dtype != c10::ScalarType::BFloat16)
    throw Error(std::string("optimize_for_inference: dtype must be torch.float32 or torch.bfloat16, not ") +
                c10::toString(options.dtype));
  gm->graph().lint();
  at::NoGradGuard no_grad;
  OptimizeReport r;
  r.nodes_before = gm->graph().nodes().size();

  auto out = std::make_shared<GraphModule>(gm, passes_detail::copy_graph(gm->graph()), gm->class_name());
  Graph& g = out->graph();
  const size_t modules = count(g, Opcode::CallModule);
  for (const Node* n : g.nodes()) {
    if (n->op() != Opcode::CallModule) continue;
    auto a = module_attributes(*out->get_submodule(n->target()));
    r.removed_noops += a && (a->type == "Identity" || a->type.find("Dropout") != std::string::npos);
  }
  freeze_modules(out);
  r.frozen_modules = modules - count(g, Opcode::CallModule);
  const size_t nodes = g.nodes().size();
  remove_dropout(out);  // functional dropouts (freeze_modules removed the modules)
  r.removed_noops += nodes - g.nodes().size();
  if (!options.example_inputs.empty()) ShapeProp(out).propagate_meta(options.example_inputs);
  if (options.fold_batch_norm) {
    const size_t norms = count(g, Opcode::CallFunction, "aten::batch_norm");
    fold_batch_norm(out);
    r.folded_batch_norms = norms - count(g, Opcode::CallFunction, "aten::batch_norm");
    fold_conv_add_mul(out, &r.folded_add_mul);
  }
  if (options.use_onednn) {
    OneDnnLowering lowered;
    lower_to_onednn(out, options.dtype, &lowered);
    r.onednn_convs = lowered.convs;
    r.onednn_linears = lowered.linears;
    r.onednn_matmuls = lowered.matmuls;
    r.fused_post_ops = lowered.fused_post_ops;
  }
  if (options.reinplace) reinplace(out, &r.reinplaced);
  g.eliminate_dead_code();
  g.lint();
  out->delete_all_unused_submodules();  // with it the folded weights the kernels packed (_folded.*)
  out->recompile();
  if (options.keep_freed_memory) keep_freed_memory();
  if (!options.example_inputs.empty()) out->forward(options.example_inputs);  // makes the kernels, packs weights
  r.nodes_after = g.nodes().size();
  r.optimize_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (report) *report = r;
  return out;
}

}  // namespace fx
