#pragma once
/// \file
/// optimize_for_inference: a GraphModule rewritten for fast CPU inference
/// (torch.fx `experimental/optimization.optimize_for_inference`, and what
/// `torch::jit::optimize_for_inference` does for TorchScript).
///
/// A pipeline of passes, each usable alone (fx/optimize.h):
///  1. freeze: call_module nodes of known torch::nn layers (C++ or imported
///     TorchScript leaves) become the ATen call_function they run, their
///     parameters get_attr constants; dropout (modules and functional) and
///     identity are removed;
///  2. fold_batch_norm, fold_conv_add_mul: eval batch norm, and add / sub /
///     mul / div by a per-channel constant, after a conv/linear are folded
///     into its weight and bias (new attributes; the module is untouched);
///  3. lower_to_onednn: conv2d / linear / bmm / matmul become fxcpp::onednn_*
///     call_function targets (registered dispatcher operators with schemas)
///     whose packed weights are reordered once, with bias, activations
///     (relu, relu6, silu, sigmoid, hardswish, gelu) and the residual sum
///     fused as oneDNN post-ops, 3×3 convolutions by Winograd where it is
///     faster (OptimizeOptions::winograd); max / adaptive average pooling,
///     softmax and layer norm become oneDNN's where it applies
///     (fxcpp::max_pool2d, adaptive_avg_pool2d, softmax, layer_norm);
///     activations stay channels_last between convolutions, so ATen ops in
///     between (squeeze-excitation) run on the same layout and no
///     conversion pairs appear;
///  4. reinplace: element-wise ops on dead fresh values run in place;
///  5. dead code elimination and lint;
///  6. a static memory plan for forward() (OptimizeOptions::plan_memory).
/// Control flow (fx/control_flow.h): the result has its own copies of the
/// cond / loop modules, and the pipeline runs on every branch and loop body
/// too (their leaves frozen and lowered in place of the originals'; the
/// input module's branches are not changed). Shapes from example_inputs
/// reach the branches through ShapeProp before they are rewritten. The
/// report's node counts cover every graph.
///
/// The result prints, runs under the Interpreter and GraphModule::forward,
/// and can be profiled like any graph; fx::save stores its packed operators
/// as what they are made of (docs/file_format.md), and fx::to_torchscript
/// exports it.
///
/// Differences from torch.fx: torch.fx's version (Python) only fuses
/// conv+bn, removes dropout and moves convolutions to MKL-DNN; fxcpp's also
/// fuses activations and residual adds, lowers linear and matmul, and offers
/// bf16.

#include <fx/graph_module.h>
#include <fx/optimize/lower_to_onednn.h>

#include <c10/core/ScalarType.h>

#include <memory>
#include <string>
#include <vector>

namespace fx {

/// What optimize_for_inference does.
struct OptimizeOptions {
  /// at::kFloat (default), or at::kBFloat16 (opt-in): oneDNN bf16 kernels
  /// with fp32 accumulation and bias; values pass between oneDNN kernels in
  /// bf16 and are float32 everywhere else (ATen ops, inputs, outputs).
  /// Where oneDNN has no bf16 kernels (onednn::has_bf16_kernels: CPUs
  /// without AVX-512, such as AMD EPYC Zen 3), bf16 is a wish, not an
  /// error: the kernels are float32, OptimizeReport::dtype says so and
  /// OptimizeReport::warnings names the CPU's ISA.
  c10::ScalarType dtype = c10::ScalarType::Float;
  /// Inputs whose shapes the kernels are prepared for (weights packed at
  /// optimise time). Empty: packed at the first forward of each shape.
  std::vector<c10::IValue> example_inputs;
  /// Fold batch norm, and add/sub/mul/div by constants, into the preceding conv/linear.
  bool fold_batch_norm = true;
  /// Lower conv/linear/matmul to oneDNN (false: freeze and fold only).
  bool use_onednn = true;
  /// float32 3×3 convolutions (stride 1) use Winograd's algorithm: on
  /// AVX-512 oneDNN's (channels multiples of 16, outputs of at least
  /// 14×14): resnet18 9% faster at batch 1, 15% at batch 8; below AVX-512
  /// fxcpp's F(2×2, 3×3) on the packed GEMM (onednn::has_gemm_winograd:
  /// 16+ channels in multiples of 8, outputs larger than 8×8): resnet18 held
  /// at AVX2 ~20% faster. Results within ~3e-6 of the direct algorithm
  /// relative to the output's scale (lower_to_onednn,
  /// onednn::ConvParams::winograd). Off: every convolution is direct.
  bool winograd = true;
  /// Which kernel runs float32 linear layers (fx::LinearKernel): by
  /// default oneDNN's on AVX-512, and on older CPUs (AVX2) the faster of
  /// oneDNN's and ATen's (BLAS) for each layer's shape, timed here once
  /// (OptimizeReport::linear_choices says what was measured). OneDnn / Aten
  /// fix the choice, as for a reproducible graph.
  LinearKernel linear_kernel = LinearKernel::Auto;
  /// Below AVX-512 (float32), runs of convolutions hand each other their
  /// activations in oneDNN's nChw8c layout, the one its AVX2 kernels read
  /// best, where a convolution of the run writes at least 28x28 pixels and
  /// more values cross blocked than leave the run (each exit a reorder);
  /// whatever else reads such a value gets it channels_last as before
  /// (fxcpp::from_blocked). AMD EPYC Zen 3, 1 thread: resnet18's first
  /// stages' convolutions 1.4-1.7x faster with another model's data in the
  /// caches. Off: every activation channels_last. On AVX-512 nothing changes.
  bool blocked_activations = true;
  /// Run element-wise ops in place where their input is dead (fx::reinplace).
  bool reinplace = true;
  /// fx::compiler::fuse_kernels after lowering: the pointwise and
  /// last-dimension reduction chains oneDNN leaves (residual adds, GELU,
  /// softmax, layer norm's arithmetic) become generated C++ kernels, compiled
  /// while optimising (cached on disk). Without a C++ compiler nothing is
  /// fused and a warning says so. Float32 graphs only.
  bool fuse_kernels = true;
  /// Keep freed memory in the process (glibc mallopt: no trimming, no mmap
  /// for large blocks) so a steady-state forward does not page-fault its
  /// buffers back in every call. Process-wide; off leaves malloc as it is.
  bool keep_freed_memory = true;
  /// Plan the forward's memory (GraphModule::set_memory_planning, fx/memory_plan.h):
  /// buffers reused from an arena at planned offsets, so a steady-state forward
  /// asks the system allocator only for its outputs. The first forward of
  /// each input shape (the warm-up one for example_inputs) records the plan.
  bool plan_memory = true;
  /// Run one forward on example_inputs before returning, which makes the
  /// kernels and packs the weights. Off: the caller runs that first forward
  /// itself; one that drops the input module in between frees its original
  /// parameters before the packed copies are made (the result does not hold
  /// them), a lower peak of resident memory (`fxcpp run --optimize`).
  bool warm_up = true;
};

/// What optimize_for_inference did.
struct OptimizeReport {
  /// Wall time of optimize_for_inference, milliseconds.
  double optimize_ms = 0;
  /// Nodes before and after, every graph (branches, loop bodies) counted.
  size_t nodes_before = 0, nodes_after = 0;
  /// Leaf module calls replaced by ATen calls (or removed: dropout, identity).
  size_t frozen_modules = 0;
  /// Batch norms folded into a conv or linear.
  size_t folded_batch_norms = 0;
  /// Constant add/sub/mul/div folded into a conv or linear.
  size_t folded_add_mul = 0;
  /// Dropout and identity calls removed (modules and functional).
  size_t removed_noops = 0;
  /// Nodes lowered to oneDNN, by kind.
  size_t onednn_convs = 0, onednn_linears = 0, onednn_matmuls = 0;
  /// Linear layers left to ATen's kernel (BLAS): OptimizeOptions::linear_kernel.
  size_t aten_linears = 0;
  /// Convolutions writing their activations in nChw8c (OptimizeOptions::blocked_activations).
  size_t blocked_convs = 0;
  /// The linear layers whose kernel was chosen by timing (LinearKernel::Auto
  /// below AVX-512), in graph order, each with both times.
  std::vector<LinearChoice> linear_choices;
  /// Why LinearKernel::Auto timed none where it would have (OneDnnLowering::linear_note).
  std::string linear_note;
  /// Activations and residual adds fused into a oneDNN node.
  size_t fused_post_ops = 0;
  /// Ops turned into their in-place form (fx::reinplace).
  size_t reinplaced = 0;
  /// fuse_kernels: groups made (fxcpp::fused_kernel nodes), the nodes they
  /// replaced, distinct kernels, kernels compiled now (the others were
  /// cached) and the compile's wall time.
  size_t fused_groups = 0, fused_nodes = 0, fused_kernels = 0, kernels_compiled = 0;
  double kernel_compile_ms = 0;
  /// The dtype of the oneDNN kernels: OptimizeOptions::dtype, or float32
  /// where bf16 was asked for and this CPU has no bf16 kernels.
  c10::ScalarType dtype = c10::ScalarType::Float;
  /// What oneDNN can run here (onednn::cpu_summary()): the ISA, bf16, Winograd, VNNI.
  std::string cpu;
  /// What was asked for and could not be done on this CPU, one line each
  /// ("bf16: oneDNN has no bfloat16 kernels on this CPU (ISA avx2): float32 kernels").
  std::vector<std::string> warnings;
};

/// Returns a new GraphModule computing the same function as `gm` (fp32:
/// max abs difference within 1e-4 x max |output|), optimised for inference
/// on CPU; `gm` is not changed (the result shares its parameters; folded
/// and packed weights are new). With example_inputs the graph's shapes are
/// propagated (on meta tensors) to fuse residual sums, and one forward runs
/// at the end so the kernels exist and weights are packed before the first
/// real call. Fills `report` when given. Throws fx::Error for a dtype other
/// than float32/bfloat16, a BatchNorm or
/// Dropout in training mode, or a graph that does not lint.
std::shared_ptr<GraphModule> optimize_for_inference(const std::shared_ptr<GraphModule>& gm,
                                                    const OptimizeOptions& options = {},
                                                    OptimizeReport* report = nullptr);

}  // namespace fx
