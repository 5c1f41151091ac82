// optimize_for_inference on torchvision models exported by Python
// (tests/optimize/optimize.cmake: random seeded weights with batch-norm
// statistics from random images, so outputs are of order 1; small inputs):
// every optimised model equals eager PyTorch's output, also at a batch size
// other than the one it was optimised for, in fp32 and (looser) bf16. The
// models exported with torch.jit.trace too (python/export_models.py's
// TRACED: resnet18, mobilenet_v2 / v3_small, efficientnet_b0, vit_b_16) are checked on both exports: traced leaves keep no configuration,
// and must freeze and lower all the same.
#include "fx_paths.h"

#include <fx/graph.h>
#include <fx/import.h>
#include <fx/onednn.h>
#include <fx/optimize/optimize_for_inference.h>
#include <fx/tensor_file.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

namespace {

double relative_error(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>() / b.abs().max().item<double>();
}

size_t count_modules(const fx::Graph& g) {
  size_t n = 0;
  for (const fx::Node* node : g.nodes()) n += node->op() == fx::Opcode::CallModule;
  return n;
}

/// Checks `name` (its torch.jit.trace export NAME.trace.pt with `traced`);
/// fills the fp32 report.
void check_model(const std::string& name, fx::OptimizeReport* out = nullptr, bool traced = false,
                 size_t call_modules = 0) {
  const std::string base = std::string(FX_BINARY_DIR) + "/models/" + name;
  const std::string file = base + (traced ? ".trace.pt" : ".pt");
  if (!std::ifstream(file)) {
    // The optimize_models_* ctest entries export it first; the plain program skips.
    GTEST_SKIP() << file << " is missing (python/export_models.py exports it)";
  }
  auto gm = fx::import_torchscript(file);
  std::vector<c10::IValue> inputs = fx::load_inputs(base + ".input.pt");
  at::Tensor expected = fx::load_value(base + ".output.pt").toTensor();
  at::NoGradGuard no_grad;
  // Order 1 (the export checks it too): a degenerate output would compare nothing.
  EXPECT_GE(expected.abs().max().item<double>(), 1e-2) << name;
  fx::OptimizeOptions options;
  options.example_inputs = inputs;
  fx::OptimizeReport report;
  auto opt = fx::optimize_for_inference(gm, options, &report);
  EXPECT_GT(report.onednn_convs + report.onednn_linears, 0u);
  // channels_last from the first convolution to the classifier: one copy
  // back to NCHW, where flatten / reshape reads the features (issue 24).
  size_t restores = 0;
  for (const fx::Node* n : opt->graph().nodes()) restores += n->target() == "fxcpp::restore_layout";
  EXPECT_EQ(restores, 1u) << name;
  // Every torch.nn leaf frozen (traced ones from their forward graphs).
  EXPECT_EQ(count_modules(opt->graph()), call_modules) << name << (traced ? " (traced)" : "") << "\n" << opt->graph().str();
  EXPECT_LE(relative_error(opt->forward(inputs).toTensor(), expected), 1e-4) << name;
  // Another batch size than the one optimised for: compare with the imported module.
  at::Tensor x = inputs[0].toTensor();
  at::Tensor batch3 = at::cat({x, x.flip(0) * 0.5, x * -1.0});
  EXPECT_LE(relative_error(opt->forward({batch3}).toTensor(), gm->forward({batch3}).toTensor()), 1e-4) << name;
  // The memory plan: both shapes replayed from their arenas (batch 3 once
  // more, now planned), only the output from the system allocator.
  EXPECT_LE(relative_error(opt->forward({batch3}).toTensor(), gm->forward({batch3}).toTensor()), 1e-4) << name;
  const fx::MemoryPlanStats mem = opt->memory_plan_stats();
  EXPECT_EQ(mem.plans, 2u) << name;
  EXPECT_EQ(mem.replayed_forwards, 2u) << name;
  EXPECT_EQ(mem.fallbacks, 0u) << name;
  EXPECT_EQ(mem.escaping_buffers, 1u) << name;
  EXPECT_EQ(mem.last_system_allocations, 1u) << name;
  EXPECT_EQ(mem.last_arena_allocations, mem.planned_buffers) << name;

  // bf16 is held to PyTorch's own bf16 (CPU autocast) on the same model and
  // input, recorded by the export: with weights that give order-1
  // activations it loses up to 0.22 of max |output| (mobilenet_v2's depthwise
  // stack), resnet18 0.03. Where oneDNN has no bf16 kernels (AVX2) the
  // kernels are float32 and held to float32's 1e-4.
  double torch_bf16 = 0.05;
  if (std::ifstream f{base + ".bf16.txt"}) f >> torch_bf16;
  fx::OptimizeOptions bf16 = options;
  bf16.dtype = at::kBFloat16;
  fx::OptimizeReport report16;
  auto opt16 = fx::optimize_for_inference(gm, bf16, &report16);
  const bool here = fx::onednn::has_bf16_kernels();
  EXPECT_EQ(report16.dtype, here ? at::kBFloat16 : at::kFloat) << name << ": " << report16.cpu;
  EXPECT_EQ(report16.warnings.size(), here ? 0u : 1u) << name;
  EXPECT_LE(relative_error(opt16->forward(inputs).toTensor(), expected), here ? std::max(0.05, 1.5 * torch_bf16) : 1e-4)
      << name << " (bf16; PyTorch's bf16: " << torch_bf16 << "; " << report16.cpu << ")";
  if (out) *out = report;
}

/// `name`'s torch.jit.trace export: the same kernels as the scripted one.
void check_traced(const std::string& name) {
  fx::OptimizeReport scripted, traced;
  check_model(name, &scripted);
  if (testing::Test::IsSkipped()) return;
  check_model(name, &traced, /*traced=*/true);
  if (testing::Test::IsSkipped()) return;
  EXPECT_EQ(traced.onednn_convs, scripted.onednn_convs) << name;
  // Linear layers: oneDNN's, or below AVX-512 ATen's where timing chose it.
  EXPECT_EQ(traced.onednn_linears + traced.aten_linears, scripted.onednn_linears + scripted.aten_linears) << name;
  EXPECT_EQ(traced.folded_batch_norms, scripted.folded_batch_norms) << name;
  EXPECT_EQ(traced.fused_post_ops, scripted.fused_post_ops) << name;
}

TEST(OptimizeModels, resnet18) { check_traced("resnet18"); }
TEST(OptimizeModels, resnet50) {
  fx::OptimizeReport r;
  check_model("resnet50", &r);
  if (IsSkipped()) return;
  EXPECT_EQ(r.onednn_convs, 53u);
  EXPECT_EQ(r.folded_batch_norms, 53u);
  // 16 residual sums and 49 ReLUs fused (every ReLU follows a conv or a sum).
  EXPECT_EQ(r.fused_post_ops, 16u + 49u);
}
TEST(OptimizeModels, mobilenet_v2) { check_traced("mobilenet_v2"); }
TEST(OptimizeModels, mobilenet_v3_small) { check_traced("mobilenet_v3_small"); }
TEST(OptimizeModels, efficientnet_b0) { check_traced("efficientnet_b0"); }
TEST(OptimizeModels, vit_b_16) {
  fx::OptimizeReport r;
  check_model("vit_b_16", &r);
  if (IsSkipped()) return;
  // Each of the 12 blocks: the attention's in/out projections, the MLP's two linear layers and
  // two matmuls on oneDNN. Below AVX-512 the optimiser times oneDNN's matmul against ATen's
  // linear per shape and keeps the faster (LinearKernel::Auto): the sum is what is fixed there.
  const bool avx512 = fx::onednn::has_avx512_core();
  EXPECT_EQ(r.onednn_linears + r.aten_linears, 12u * 4 + 1);
  if (avx512) {
    EXPECT_EQ(r.aten_linears, 0u);
  }
  EXPECT_EQ(r.onednn_matmuls, 12u * 2);
  EXPECT_EQ(r.onednn_convs, 1u);
  // Traced, each MultiheadAttention is one aten::_native_multi_head_attention
  // call whose configuration the leaf does not keep: it stays a call_module
  // (run by TorchScript); the MLPs and the head are lowered all the same.
  fx::OptimizeReport t;
  check_model("vit_b_16", &t, /*traced=*/true, /*call_modules=*/12);
  if (IsSkipped()) return;
  EXPECT_EQ(t.onednn_linears + t.aten_linears, 12u * 2 + 1);
  if (avx512) {
    EXPECT_EQ(t.aten_linears, 0u);
  }
  EXPECT_EQ(t.onednn_matmuls, 0u);
  EXPECT_EQ(t.onednn_convs, 1u);
}

}  // namespace
