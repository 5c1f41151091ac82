// optimize_for_inference on torchvision models exported by Python
// (tests/passes/optimize.cmake: random seeded weights, small inputs):
// every optimised model equals eager PyTorch's output, also at a batch size
// other than the one it was optimised for, in fp32 and (looser) bf16.
#include "fx_paths.h"

#include <fx/import.h>
#include <fx/passes/optimize_for_inference.h>
#include <fx/tensor_file.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <fstream>

namespace {

double relative_error(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>() / b.abs().max().item<double>();
}

/// Checks `name`; fills the fp32 report.
void check_model(const std::string& name, fx::OptimizeReport* out = nullptr) {
  const std::string base = std::string(FX_BINARY_DIR) + "/models/" + name;
  if (!std::ifstream(base + ".pt")) {
    // The passes_optimize_* ctest entries export it first; the plain program skips.
    GTEST_SKIP() << base << ".pt is missing (python/export_models.py exports it)";
  }
  auto gm = fx::import_torchscript(base + ".pt");
  std::vector<c10::IValue> inputs = fx::load_inputs(base + ".input.pt");
  at::Tensor expected = fx::load_value(base + ".output.pt").toTensor();
  at::NoGradGuard no_grad;
  if (expected.abs().max().item<double>() == 0) {
    // torchvision zero-initializes some heads (ViT): then every output is 0
    // and compares nothing. Fill zero parameters and compare with the import.
    for (auto& p : gm->named_parameters(true))
      if (p.value().abs().max().item<double>() == 0) p.value().uniform_(-0.05, 0.05);
    expected = gm->forward(inputs).toTensor();
  }
  fx::OptimizeOptions options;
  options.example_inputs = inputs;
  fx::OptimizeReport report;
  auto opt = fx::optimize_for_inference(gm, options, &report);
  EXPECT_GT(report.onednn_convs + report.onednn_linears, 0u);
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

  fx::OptimizeOptions bf16 = options;
  bf16.dtype = at::kBFloat16;
  auto opt16 = fx::optimize_for_inference(gm, bf16);
  EXPECT_LE(relative_error(opt16->forward(inputs).toTensor(), expected), 0.1) << name << " (bf16)";
  if (out) *out = report;
}

TEST(OptimizeModels, resnet18) { check_model("resnet18"); }
TEST(OptimizeModels, resnet50) {
  fx::OptimizeReport r;
  check_model("resnet50", &r);
  if (IsSkipped()) return;
  EXPECT_EQ(r.onednn_convs, 53u);
  EXPECT_EQ(r.folded_batch_norms, 53u);
  // 16 residual sums and 49 ReLUs fused (every ReLU follows a conv or a sum).
  EXPECT_EQ(r.fused_post_ops, 16u + 49u);
}
TEST(OptimizeModels, mobilenet_v2) { check_model("mobilenet_v2"); }
TEST(OptimizeModels, mobilenet_v3_small) { check_model("mobilenet_v3_small"); }
TEST(OptimizeModels, efficientnet_b0) { check_model("efficientnet_b0"); }
TEST(OptimizeModels, vit_b_16) {
  fx::OptimizeReport r;
  check_model("vit_b_16", &r);
  if (IsSkipped()) return;
  // Each of the 12 self-attention blocks: in/out projections and two matmuls on oneDNN.
  EXPECT_EQ(r.onednn_linears, 12u * 4 + 1);
  EXPECT_EQ(r.onednn_matmuls, 12u * 2);
  EXPECT_EQ(r.onednn_convs, 1u);
}

}  // namespace
