// optimize_for_inference: freeze → fold batch norm → lower to oneDNN →
// clean up → warm up (see the header).
#include <fx/optimize/optimize_for_inference.h>

#include <fx/compiler/fuse_kernels.h>
#include <fx/graph.h>
#include <fx/module_attributes.h>
#include <fx/onednn.h>
#include <fx/optimize/fold_batch_norm.h>
#include <fx/optimize/fold_conv_add_mul.h>
#include <fx/optimize/freeze.h>
#include <fx/optimize/lower_to_onednn.h>
#include <fx/optimize/reinplace.h>

#include "optimize/block_activations.h"
#include <fx/passes/remove_dropout.h>
#include <fx/passes/shape_prop.h>

#include "passes/graph_copy.h"

#include <fx/control_flow.h>

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

/// Nodes of `gm`'s graph and of every graph below it.
size_t total_nodes(GraphModule& gm) {
  size_t n = 0;
  for_each_graph_module(gm, [&](GraphModule& m) { n += m.graph().nodes().size(); });
  return n;
}

/// The pipeline on one graph (the root, a branch or a loop body) of the
/// module being optimised; adds to `r`. Shapes from `example_inputs` when
/// given (the root only).
void optimize_graph(GraphModule& m, const OptimizeOptions& options, const std::vector<c10::IValue>& example_inputs,
                    OptimizeReport& r) {
  auto out = std::dynamic_pointer_cast<GraphModule>(m.shared_from_this());
  Graph& g = out->graph();
  const size_t modules = count(g, Opcode::CallModule);
  for (const Node* n : g.nodes()) {
    if (n->op() != Opcode::CallModule) continue;
    auto a = module_attributes(*out->get_submodule(n->target()));
    r.removed_noops += a && (a->type == "Identity" || a->type.find("Dropout") != std::string::npos);
  }
  freeze_modules(out);
  r.frozen_modules += modules - count(g, Opcode::CallModule);
  // Functional dropouts (freeze_modules removed the modules); remove_dropout
  // also reaches the graphs below, which are optimised after this one.
  const size_t nodes = total_nodes(*out);
  remove_dropout(out);
  r.removed_noops += nodes - total_nodes(*out);
  if (!example_inputs.empty()) {
    // Shapes on meta tensors; a graph whose control flow depends on the data
    // (detection: how many boxes nms keeps) gets them from one real run; and
    // without them the passes below only do what needs no shapes.
    try {
      ShapeProp(out).propagate_meta(example_inputs);
    } catch (const std::exception&) {
      try {
        ShapeProp(out).propagate(example_inputs);
      } catch (const std::exception&) {
      }
    }
  }
  if (options.fold_batch_norm) {
    const size_t norms = count(g, Opcode::CallFunction, "aten::batch_norm");
    fold_batch_norm(out);
    r.folded_batch_norms += norms - count(g, Opcode::CallFunction, "aten::batch_norm");
    size_t folded = 0;
    fold_conv_add_mul(out, &folded);
    r.folded_add_mul += folded;
  }
  if (options.use_onednn) {
    OneDnnLowering lowered;
    lower_to_onednn(out, options.dtype, &lowered, options.winograd, options.linear_kernel);
    r.onednn_convs += lowered.convs;
    r.onednn_linears += lowered.linears;
    r.onednn_matmuls += lowered.matmuls;
    r.aten_linears += lowered.aten_linears;
    r.linear_choices.insert(r.linear_choices.end(), lowered.linear_choices.begin(), lowered.linear_choices.end());
    if (!lowered.linear_note.empty()) r.linear_note = lowered.linear_note;
    r.fused_post_ops += lowered.fused_post_ops;
    r.dtype = lowered.dtype;
    if (options.blocked_activations && lowered.dtype == c10::ScalarType::Float &&
        !onednn::has_avx512_core()) {
      r.blocked_convs += passes_detail::block_activations(g);
      g.lint();
    }
  }
  if (options.fuse_kernels && options.dtype == c10::ScalarType::Float) {
    compiler::FuseReport fused;
    compiler::fuse_kernels(*out, {}, &fused);
    r.fused_groups += fused.groups;
    r.fused_nodes += fused.fused_nodes;
    r.fused_kernels += fused.kernels;
    r.kernels_compiled += fused.compiled;
    r.kernel_compile_ms += fused.compile_ms;
    r.warnings.insert(r.warnings.end(), fused.warnings.begin(), fused.warnings.end());
  }
  if (options.reinplace) {
    size_t reinplaced = 0;
    reinplace(out, &reinplaced);
    r.reinplaced += reinplaced;
  }
  g.eliminate_dead_code();
  g.lint();
  out->delete_all_unused_submodules();  // with it the folded weights the kernels packed (_folded.*)
  out->recompile();
}

}  // namespace

std::shared_ptr<GraphModule> optimize_for_inference(const std::shared_ptr<GraphModule>& gm,
                                                    const OptimizeOptions& options, OptimizeReport* report) {
  const auto start = std::chrono::steady_clock::now();
  if (!gm) throw Error("optimize_for_inference: no module given");
  if (options.dtype != c10::ScalarType::Float && options.dtype != c10::ScalarType::BFloat16)
    throw Error(std::string("optimize_for_inference: dtype must be torch.float32 or torch.bfloat16, not ") +
                c10::toString(options.dtype));
  for_each_graph_module(*gm, [](GraphModule& m) { m.graph().lint(); });
  at::NoGradGuard no_grad;
  OptimizeReport r;
  r.nodes_before = total_nodes(*gm);
  r.dtype = options.dtype;
  r.cpu = onednn::cpu_summary();
  if (options.dtype == c10::ScalarType::BFloat16 && options.use_onednn && !onednn::has_bf16_kernels())
    r.warnings.push_back("bf16: oneDNN has no bfloat16 kernels on this CPU (ISA " + onednn::cpu_isa() +
                         "; bf16 needs AVX-512): float32 kernels");

  auto out = std::make_shared<GraphModule>(gm, passes_detail::copy_graph(gm->graph()), gm->class_name());
  passes_detail::copy_control_flow(*out);  // branches and bodies are rewritten too, on copies
  // The root first: its shape propagation then reaches the branches before they change.
  optimize_graph(*out, options, options.example_inputs, r);
  for_each_subgraph(*out, [&](const std::string&, GraphModule& sub) { optimize_graph(sub, options, {}, r); });
  if (options.keep_freed_memory) keep_freed_memory();
  out->set_memory_planning(options.plan_memory);  // the first forward of each shape records its plan
  // The first forward makes the kernels and packs the weights (warm_up: unless the caller does it).
  if (options.warm_up && !options.example_inputs.empty()) out->forward(options.example_inputs);
  r.nodes_after = total_nodes(*out);
  r.optimize_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (report) *report = r;
  return out;
}

}  // namespace fx
