// optimize_for_inference and its passes (freeze_modules, fold_batch_norm,
// lower_to_onednn) on a small C++ network with every pattern the real
// models have: conv-bn-relu, a residual block, a depthwise conv with ReLU6,
// squeeze-excitation (SiLU, sigmoid, multiply), a Linear-GELU head.
#include "../passes/passes_test_util.h"
#include "optimize_test_util.h"

#include <fx/export.h>
#include <fx/graph.h>
#include <fx/interpreter.h>
#include <fx/onednn.h>
#include <fx/optimize/fold_batch_norm.h>
#include <fx/optimize/fold_conv_add_mul.h>
#include <fx/optimize/freeze.h>
#include <fx/optimize/lower_to_onednn.h>
#include <fx/optimize/optimize_for_inference.h>
#include <fx/optimize/reinplace.h>
#include <fx/passes/shape_prop.h>
#include <fx/serialize.h>
#include <fx/tensor_meta.h>
#include <fx/trace.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>
#include <algorithm>
#include <sstream>
#include <thread>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/nn.h>

namespace {

using fx_test::error_of;
using namespace optimize_test;
namespace nn = torch::nn;

using fx_test::random_batch_norm;

struct TinyNetImpl : nn::Module {
  TinyNetImpl() {
    stem = register_module("stem", nn::Conv2d(nn::Conv2dOptions(3, 16, 3).stride(2).padding(1).bias(false)));
    stem_bn = register_module("stem_bn", random_batch_norm(16));
    relu = register_module("relu", nn::ReLU());
    pool = register_module("pool", nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1)));
    conv1 = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(16, 16, 3).padding(1).bias(false)));
    bn1 = register_module("bn1", random_batch_norm(16));
    conv2 = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(16, 16, 3).padding(1).bias(false)));
    bn2 = register_module("bn2", random_batch_norm(16));
    dw = register_module("dw", nn::Conv2d(nn::Conv2dOptions(16, 16, 3).padding(1).groups(16).bias(false)));
    dw_bn = register_module("dw_bn", random_batch_norm(16));
    relu6 = register_module("relu6", nn::ReLU6());
    se_pool = register_module("se_pool", nn::AdaptiveAvgPool2d(1));
    se_reduce = register_module("se_reduce", nn::Conv2d(nn::Conv2dOptions(16, 4, 1)));
    se_act = register_module("se_act", nn::SiLU());
    se_expand = register_module("se_expand", nn::Conv2d(nn::Conv2dOptions(4, 16, 1)));
    se_gate = register_module("se_gate", nn::Sigmoid());
    project = register_module("project", nn::Conv2d(nn::Conv2dOptions(16, 32, 1)));
    head_pool = register_module("head_pool", nn::AdaptiveAvgPool2d(1));
    flatten = register_module("flatten", nn::Flatten());
    fc1 = register_module("fc1", nn::Linear(32, 64));
    gelu = register_module("gelu", nn::GELU());
    drop = register_module("drop", nn::Dropout(0.2));
    fc2 = register_module("fc2", nn::Linear(64, 10));
  }
  at::Tensor forward(at::Tensor x) {
    x = pool(relu(stem_bn(stem(x))));
    at::Tensor out = bn2(conv2(relu(bn1(conv1(x)))));
    out += x;
    x = relu(out);
    x = relu6(dw_bn(dw(x)));
    x = x * se_gate(se_expand(se_act(se_reduce(se_pool(x)))));
    x = project(x);
    x = flatten(head_pool(x));
    return fc2(drop(gelu(fc1(x))));
  }
  nn::Conv2d stem{nullptr}, conv1{nullptr}, conv2{nullptr}, dw{nullptr}, se_reduce{nullptr}, se_expand{nullptr},
      project{nullptr};
  nn::BatchNorm2d stem_bn{nullptr}, bn1{nullptr}, bn2{nullptr}, dw_bn{nullptr};
  nn::ReLU relu{nullptr};
  nn::ReLU6 relu6{nullptr};
  nn::MaxPool2d pool{nullptr};
  nn::AdaptiveAvgPool2d se_pool{nullptr}, head_pool{nullptr};
  nn::SiLU se_act{nullptr};
  nn::Sigmoid se_gate{nullptr};
  nn::Flatten flatten{nullptr};
  nn::Linear fc1{nullptr}, fc2{nullptr};
  nn::GELU gelu{nullptr};
  nn::Dropout drop{nullptr};
};
TORCH_MODULE(TinyNet);

struct Traced {
  TinyNet net;
  std::shared_ptr<fx::GraphModule> gm;
};

Traced traced_tiny_net() {
  torch::manual_seed(0);
  TinyNet net;
  net->eval();
  fx::TraceOptions options;
  options.dynamic_dims = {{0, 0}};  // the tests run it at several batch sizes
  auto gm = fx::symbolic_trace(net.ptr(), {at::randn({2, 3, 32, 32})}, {}, options);
  return {net, gm};
}


TEST(OptimizeForInference, TinyNetEqualsEagerAtEveryBatchSize) {
  Traced t = traced_tiny_net();
  const std::string code_before = t.gm->code();
  fx::OptimizeOptions options;
  options.linear_kernel = fx::LinearKernel::OneDnn;  // the lowering itself, not a timed choice
  options.example_inputs = {at::randn({2, 3, 32, 32})};
  fx::OptimizeReport report;
  auto opt = fx::optimize_for_inference(t.gm, options, &report);
  at::NoGradGuard no_grad;
  for (int64_t batch : {1, 2, 5}) {
    at::Tensor x = at::randn({batch, 3, 32, 32});
    at::Tensor expected = t.net->forward(x);
    at::Tensor got = opt->forward(x);
    EXPECT_EQ(got.sizes(), expected.sizes());
    EXPECT_LE(relative_error(got, expected), 1e-4) << "batch " << batch;
    // The Interpreter runs the same graph to the same numbers.
    at::Tensor interpreted = fx::Interpreter(opt).run({x}).toTensor();
    EXPECT_TRUE(at::equal(interpreted, got));
  }
  // The original module is untouched.
  EXPECT_EQ(t.gm->code(), code_before);
  // The folded weights, packed into the kernels, are not kept as attributes too.
  for (const auto& b : opt->named_buffers()) EXPECT_NE(b.key().rfind("_folded.", 0), 0u) << b.key();

  // The C++ trace records torch::nn layers by the ATen ops they run, except
  // the leaves it keeps (activations, pooling, flatten, dropout).
  EXPECT_EQ(report.frozen_modules, 13u);
  EXPECT_EQ(report.folded_batch_norms, 4u);
  EXPECT_EQ(report.onednn_convs, 7u);
  EXPECT_EQ(report.onednn_linears, 2u);
  // stem relu, conv1 relu, conv2 +x and relu, dw relu6, se silu, se sigmoid, fc1 gelu.
  EXPECT_EQ(report.fused_post_ops, 8u);
  EXPECT_EQ(count_calls(opt->graph(), "aten::dropout"), 0u);
  // The channels_last region ends where flatten reads it: one copy back
  // to the input's format (fxcpp::restore_layout), of [N, 32, 1, 1].
  EXPECT_EQ(call_targets(opt->graph()),
            (std::vector<std::string>{"fxcpp::suggest_memory_format", "fxcpp::onednn_conv2d", "fxcpp::max_pool2d",
                                      "fxcpp::onednn_conv2d", "fxcpp::onednn_conv2d", "fxcpp::onednn_conv2d",
                                      "fxcpp::adaptive_avg_pool2d", "fxcpp::onednn_conv2d", "fxcpp::onednn_conv2d",
                                      "aten::mul_", "fxcpp::onednn_conv2d", "fxcpp::adaptive_avg_pool2d",
                                      "fxcpp::restore_layout", "aten::flatten", "fxcpp::onednn_linear",
                                      "fxcpp::onednn_linear"}));
  EXPECT_EQ(report.reinplaced, 1u);  // the squeeze-excitation multiply writes into the conv's output
  EXPECT_LT(report.nodes_after, report.nodes_before);
  EXPECT_GT(report.optimize_ms, 0);
}

TEST(OptimizeForInference, SteadyStateForwardTakesOnlyItsOutputFromTheSystem) {
  Traced t = traced_tiny_net();
  fx::OptimizeOptions options;
  options.example_inputs = {at::randn({2, 3, 32, 32})};
  auto opt = fx::optimize_for_inference(t.gm, options);
  ASSERT_TRUE(opt->memory_planning());
  at::NoGradGuard no_grad;
  for (int i = 0; i < 3; ++i) {
    at::Tensor x = at::randn({2, 3, 32, 32});
    EXPECT_LE(relative_error(opt->forward(x), t.net->forward(x)), 1e-4) << i;
  }
  const fx::MemoryPlanStats st = opt->memory_plan_stats();
  EXPECT_TRUE(st.active);
  EXPECT_EQ(st.plans, 1u);  // recorded by optimize_for_inference's warm-up forward
  EXPECT_EQ(st.replayed_forwards, 3u);
  EXPECT_EQ(st.fallbacks, 0u);
  EXPECT_EQ(st.escaping_buffers, 1u);  // the logits
  EXPECT_EQ(st.last_system_allocations, 1u);
  EXPECT_EQ(st.last_arena_allocations, st.planned_buffers);
  EXPECT_GE(st.planned_buffers, 12u);  // at least one per node that allocates (but the logits)
  EXPECT_GE(st.arena_bytes, st.peak_live_bytes);
  // Another batch size gets its own plan; without plan_memory there is none.
  at::Tensor x5 = at::randn({5, 3, 32, 32});
  EXPECT_LE(relative_error(opt->forward(x5), t.net->forward(x5)), 1e-4);
  EXPECT_LE(relative_error(opt->forward(x5), t.net->forward(x5)), 1e-4);
  EXPECT_EQ(opt->memory_plan_stats().plans, 2u);
  EXPECT_EQ(opt->memory_plan_stats().fallbacks, 0u);
  options.plan_memory = false;
  EXPECT_FALSE(fx::optimize_for_inference(t.gm, options)->memory_planning());
}

TEST(OptimizeForInference, PackedArgumentsDescribeTheFusedKernel) {
  Traced t = traced_tiny_net();
  fx::OptimizeOptions options;
  options.linear_kernel = fx::LinearKernel::OneDnn;  // the lowering itself, not a timed choice
  options.example_inputs = {at::randn({1, 3, 32, 32})};
  auto opt = fx::optimize_for_inference(t.gm, options);
  std::vector<std::string> kernels;
  for (const fx::Node* n : opt->graph().nodes())
    if (n->target().rfind("fxcpp::onednn_", 0) == 0) kernels.push_back(fx::onednn::describe(n->args()[1].to_constant()));
  EXPECT_EQ(kernels, (std::vector<std::string>{
                         "Conv2d(3, 16, kernel=(3, 3), stride=[2, 2], padding=[1, 1], relu)",
                         "Conv2d(16, 16, kernel=(3, 3), padding=[1, 1], winograd, relu)",
                         "Conv2d(16, 16, kernel=(3, 3), padding=[1, 1], winograd, +=residual, relu)",
                         "Conv2d(16, 16, kernel=(3, 3), padding=[1, 1], groups=16, clip(0, 6))",
                         "Conv2d(16, 4, kernel=(1, 1), silu)",
                         "Conv2d(4, 16, kernel=(1, 1), sigmoid)",
                         "Conv2d(16, 32, kernel=(1, 1))",
                         "Linear(32, 64, gelu)",
                         "Linear(64, 10)",
                     }));
}

TEST(OptimizeForInference, WithoutShapesTheResidualSumStaysAnAdd) {
  Traced t = traced_tiny_net();
  for (fx::Node* n : t.gm->graph().nodes()) n->meta().erase("tensor_meta");  // no ShapeProp, no example inputs
  fx::OptimizeReport report;
  auto opt = fx::optimize_for_inference(t.gm, {}, &report);
  EXPECT_EQ(report.fused_post_ops, 6u);  // shapes unknown: neither the sum nor the relu after it
  EXPECT_EQ(count_calls(opt->graph(), "aten::add_"), 1u);
  at::NoGradGuard no_grad;
  at::Tensor x = at::randn({3, 3, 32, 32});
  EXPECT_LE(relative_error(opt->forward(x), t.net->forward(x)), 1e-4);
}

// bf16 where oneDNN has bf16 kernels (AVX-512); where it has none (AVX2,
// and the ctest runs held at AVX2), float32 kernels, said in the report.
TEST(OptimizeForInference, BFloat16IsCloseToFloat) {
  Traced t = traced_tiny_net();
  fx::OptimizeOptions options;
  options.linear_kernel = fx::LinearKernel::OneDnn;  // the lowering itself, not a timed choice
  options.dtype = at::kBFloat16;
  options.example_inputs = {at::randn({2, 3, 32, 32})};
  fx::OptimizeReport report;
  auto opt = fx::optimize_for_inference(t.gm, options, &report);
  size_t kernels = 0, bf16 = 0;
  for (const fx::Node* n : opt->graph().nodes()) {
    if (n->target() != "fxcpp::onednn_conv2d" && n->target() != "fxcpp::onednn_linear") continue;
    ++kernels;
    bf16 += fx::onednn::describe(n->args()[1].to_constant()).find(", bf16") != std::string::npos;
  }
  EXPECT_EQ(kernels, 9u);
  EXPECT_EQ(report.cpu, fx::onednn::cpu_summary());
  if (fx::onednn::has_bf16_kernels()) {
    EXPECT_EQ(report.dtype, at::kBFloat16);
    EXPECT_EQ(bf16, kernels);
    EXPECT_TRUE(report.warnings.empty());
  } else {
    EXPECT_EQ(report.dtype, at::kFloat);
    EXPECT_EQ(bf16, 0u);
    EXPECT_EQ(report.warnings, std::vector<std::string>{"bf16: oneDNN has no bfloat16 kernels on this CPU (ISA " +
                                                         fx::onednn::cpu_isa() +
                                                         "; bf16 needs AVX-512): float32 kernels"});
  }
  at::NoGradGuard no_grad;
  at::Tensor x = at::randn({2, 3, 32, 32});
  at::Tensor got = opt->forward(x);
  EXPECT_EQ(got.scalar_type(), at::kFloat);  // outputs converted back
  EXPECT_LE(relative_error(got, t.net->forward(x)), 5e-2);
  // bf16 flows only between oneDNN kernels: the SE multiply and the head read float32.
  EXPECT_EQ(count_calls(opt->graph(), "aten::to"), 0u);
}

TEST(OptimizeForInference, Errors) {
  Traced t = traced_tiny_net();
  fx::OptimizeOptions half;
  half.dtype = at::kHalf;
  EXPECT_EQ(error_of([&] { fx::optimize_for_inference(t.gm, half); }),
            "optimize_for_inference: dtype must be torch.float32 or torch.bfloat16, not Half");
  t.net->train();
  const std::string code = t.gm->code();
  EXPECT_EQ(error_of([&] { fx::optimize_for_inference(t.gm); }),
            "freeze_modules: %stem_bn : [#users=1] = call_module[target=stem_bn](args = (%stem,), kwargs = {}) "
            "calls a BatchNorm2d in training mode; call eval() on the module before freezing it");
  EXPECT_EQ(t.gm->code(), code);
}

TEST(OptimizeForInference, ConcurrentForwardsOfNewShapesAgree) {
  // No example inputs: every thread's first call makes kernels and packs
  // weights for its batch size while the others run.
  Traced t = traced_tiny_net();
  auto opt = fx::optimize_for_inference(t.gm);
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> inputs, want(6), got(6);
  for (int64_t i = 0; i < 6; ++i) inputs.push_back(at::randn({1 + i % 3, 3, 32, 32}));
  for (size_t i = 0; i < inputs.size(); ++i) want[i] = t.net->forward(inputs[i]);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < inputs.size(); ++i)
    threads.emplace_back([&, i] {
      at::NoGradGuard guard;
      got[i] = opt->forward(inputs[i]);
    });
  for (auto& th : threads) th.join();
  for (size_t i = 0; i < inputs.size(); ++i) EXPECT_LE(relative_error(got[i], want[i]), 1e-4) << i;
}

// An optimised module is saved with its packed operators unpacked (weights
// in torch's layout, post-ops, dtypes) and packed again at load: the loaded
// module prints and computes as the one in memory, bit for bit, fp32 and
// bf16, at the batch size it was warmed up with and at others; a file saved
// before the first forward (weights not yet packed) loads the same; and
// saving the loaded module gives the same file.
TEST(OptimizeForInference, SavedAndLoadedComputesBitForBit) {
  Traced t = traced_tiny_net();
  for (c10::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    for (bool warm_up : {true, false}) {
      fx::OptimizeOptions options;
      options.dtype = dtype;
      options.warm_up = warm_up;
      options.example_inputs = {at::randn({2, 3, 32, 32})};
      auto opt = fx::optimize_for_inference(t.gm, options);
      const std::string bytes = fx::save_to_string(*opt);
      auto loaded = fx::load_from_string(bytes, "opt.fx");
      EXPECT_EQ(loaded->code(), opt->code());
      EXPECT_EQ(loaded->graph().str(), opt->graph().str());
      EXPECT_TRUE(loaded->memory_planning());
      EXPECT_EQ(fx::save_to_string(*loaded), bytes);
      at::NoGradGuard no_grad;
      for (int64_t batch : {2, 1, 5}) {
        at::Tensor x = at::randn({batch, 3, 32, 32});
        at::Tensor want = opt->forward(x);
        at::Tensor got = loaded->forward(x);
        EXPECT_TRUE(got.equal(want)) << c10::toString(dtype) << " warm_up " << warm_up << " batch " << batch;
        EXPECT_EQ(got.strides(), want.strides());
      }
    }
  }
  fx::save_to_string(*t.gm);  // the original still saves
}

// An optimised graph exported to TorchScript (fx::export: its packed
// operators are attributes of torch.classes.fxcpp.PackedConv / PackedLinear,
// pickled as what they are made of) is saved, loaded by stock
// torch::jit::load, and computes what the optimised module does, bit for bit.
TEST(OptimizeForInference, ExportedToTorchScriptComputesBitForBit) {
  Traced t = traced_tiny_net();
  fx::OptimizeOptions options;
  options.example_inputs = {at::randn({2, 3, 32, 32})};
  auto opt = fx::optimize_for_inference(t.gm, options);
  std::stringstream file;
  fx::to_torchscript(*opt).save(file);
  torch::jit::Module loaded = torch::jit::load(file);
  at::NoGradGuard no_grad;
  for (int64_t batch : {2, 3}) {
    at::Tensor x = at::randn({batch, 3, 32, 32});
    EXPECT_TRUE(loaded.forward({x}).toTensor().equal(opt->forward(x))) << batch;
  }
}

// ShapeProp on meta tensors runs an optimised graph (fxcpp bench counts the
// FLOPs of a loaded optimised file so): each oneDNN kernel gives its output's
// shape, dtype and strides without running, as a real run does.
TEST(OptimizeForInference, MetaShapePropagationOfTheOptimisedGraph) {
  Traced t = traced_tiny_net();
  fx::OptimizeOptions options;
  options.linear_kernel = fx::LinearKernel::OneDnn;  // the lowering itself, not a timed choice
  options.example_inputs = {at::randn({2, 3, 32, 32})};
  auto opt = fx::optimize_for_inference(t.gm, options);
  ASSERT_GT(count_calls(opt->graph(), "fxcpp::onednn_conv2d"), 0u);
  ASSERT_GT(count_calls(opt->graph(), "fxcpp::onednn_linear"), 0u);
  auto metas = [&] {
    std::vector<std::string> out;
    for (const fx::Node* n : opt->graph().nodes()) {
      auto it = n->meta().find("tensor_meta");
      const auto* m = it == n->meta().end() ? nullptr : std::any_cast<fx::TensorMetadata>(&it->second);
      out.push_back(n->name() + ": " + (m ? m->str() : std::string("-")));
    }
    return out;
  };
  at::NoGradGuard no_grad;
  fx::ShapeProp(opt).propagate({at::randn({3, 3, 32, 32})});
  const std::vector<std::string> real = metas();
  fx::ShapeProp(opt).propagate_meta({at::empty({3, 3, 32, 32}, at::device(at::kMeta))});
  EXPECT_EQ(metas(), real);
}

TEST(FreezeModules, WritesLayersAsTheirAtenCalls) {
  // The call_module nodes an imported TorchScript model has, by hand.
  torch::manual_seed(0);
  auto root = std::make_shared<nn::Module>("Root");
  root->register_module("conv", nn::Conv2d(nn::Conv2dOptions(3, 8, 3).stride(2).padding(1)));
  root->register_module("bn", random_batch_norm(8));
  root->register_module("act", nn::ReLU6());
  root->register_module("pool", nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1)));
  root->register_module("flat", nn::Flatten());
  root->register_module("drop", nn::Dropout(0.5));
  root->register_module("fc", nn::Linear(8 * 4 * 4, 4));
  root->register_module("gelu", nn::GELU());
  root->eval();
  auto g = std::make_shared<fx::Graph>();
  fx::Node* v = g->placeholder("x");
  for (const char* m : {"conv", "bn", "act", "pool", "flat", "drop", "fc", "gelu"}) v = g->call_module(m, {v});
  g->output(v);
  auto gm = std::make_shared<fx::GraphModule>(root, g);
  at::NoGradGuard no_grad;
  at::Tensor x = at::randn({2, 3, 16, 16});
  at::Tensor expected = gm->forward(x);
  EXPECT_TRUE(fx::freeze_modules(gm).modified);
  EXPECT_EQ(gm->code(), R"(


def forward(self, x):
    conv_weight = self.conv.weight
    conv_bias = self.conv.bias
    conv2d = torch.ops.aten.conv2d(x, conv_weight, conv_bias, [2, 2], [1, 1], [1, 1], 1);  x = conv_weight = conv_bias = None
    bn_weight = self.bn.weight
    bn_bias = self.bn.bias
    bn_running_mean = self.bn.running_mean
    bn_running_var = self.bn.running_var
    batch_norm = torch.ops.aten.batch_norm(conv2d, bn_weight, bn_bias, bn_running_mean, bn_running_var, False, 0.1, 1e-05, True);  conv2d = bn_weight = bn_bias = bn_running_mean = bn_running_var = None
    hardtanh = torch.ops.aten.hardtanh(batch_norm, 0.0, 6.0);  batch_norm = None
    max_pool2d = torch.ops.aten.max_pool2d(hardtanh, [3, 3], [2, 2], [1, 1], [1, 1], False);  hardtanh = None
    flatten = torch.ops.aten.flatten(max_pool2d, 1, -1);  max_pool2d = None
    fc_weight = self.fc.weight
    fc_bias = self.fc.bias
    linear = torch.ops.aten.linear(flatten, fc_weight, fc_bias);  flatten = fc_weight = fc_bias = None
    gelu_1 = torch.ops.aten.gelu(linear, approximate = 'none');  linear = None
    return gelu_1
    )");
  EXPECT_TRUE(at::allclose(gm->forward(x), expected, 1e-5, 1e-6));
  EXPECT_FALSE(fx::freeze_modules(gm).modified);
}

// An AdaptiveAvgPool2d layer (as Python's torchvision models hold it, e.g.
// squeeze-excitation's AdaptiveAvgPool2d(1)) freezes to the ATen call when
// every output size is given; a None size (keep that dimension) stays a call.
TEST(FreezeModules, AdaptiveAvgPoolWithOptionalSizes) {
  namespace nn = torch::nn;
  auto root = std::make_shared<nn::Module>();
  root->register_module("pool", nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions(1)));
  root->register_module("keep", nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions({c10::nullopt, 2})));
  root->eval();
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  g->output(fx::Argument::tuple({fx::Argument(g->call_module("pool", {x})), fx::Argument(g->call_module("keep", {x}))}));
  auto gm = std::make_shared<fx::GraphModule>(root, g);
  const at::Tensor in = at::randn({2, 3, 6, 5});
  const auto expected = gm->forward(std::vector<c10::IValue>{in}).toTuple()->elements();
  EXPECT_TRUE(fx::freeze_modules(gm).modified);
  std::vector<std::string> calls;
  for (fx::Node* n : gm->graph().nodes())
    if (n->op() == fx::Opcode::CallFunction || n->op() == fx::Opcode::CallModule) calls.push_back(n->format_node());
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_NE(calls[0].find("call_function[target=aten::adaptive_avg_pool2d](args = (%x, [1, 1])"), std::string::npos)
      << calls[0];
  EXPECT_NE(calls[1].find("call_module[target=keep]"), std::string::npos) << calls[1];
  const auto got = gm->forward(std::vector<c10::IValue>{in}).toTuple()->elements();
  EXPECT_TRUE(at::equal(got[0].toTensor(), expected[0].toTensor()));
  EXPECT_TRUE(at::equal(got[1].toTensor(), expected[1].toTensor()));
}

TEST(FoldBatchNorm, FoldsIntoConvAndKeepsValues) {
  Traced t = traced_tiny_net();
  fx::freeze_modules(t.gm);
  at::NoGradGuard no_grad;
  at::Tensor x = at::randn({2, 3, 32, 32});
  at::Tensor before = t.gm->forward(x);
  at::Tensor stem_weight = t.net->stem->weight.clone();
  EXPECT_TRUE(fx::fold_batch_norm(t.gm).modified);
  EXPECT_EQ(count_calls(t.gm->graph(), "aten::batch_norm"), 0u);
  EXPECT_LE(relative_error(t.gm->forward(x), before), 1e-5);
  EXPECT_TRUE(at::equal(t.net->stem->weight, stem_weight));  // the module's own weight is not changed
  EXPECT_NE(t.gm->code().find("self._folded.conv2d_7.weight"), std::string::npos) << t.gm->code();
  EXPECT_FALSE(fx::fold_batch_norm(t.gm).modified);
}

TEST(FoldBatchNorm, Float64WeightsAreCopiedNotScaledInPlace) {
  torch::manual_seed(0);
  TinyNet net;
  net->eval();
  net->to(at::kDouble);
  at::Tensor x = at::randn({2, 3, 32, 32}, at::kDouble);
  auto gm = fx::symbolic_trace(net.ptr(), {x});
  fx::freeze_modules(gm);
  at::NoGradGuard no_grad;
  at::Tensor before = gm->forward(x);
  at::Tensor stem_weight = net->stem->weight.clone();
  ASSERT_EQ(stem_weight.scalar_type(), at::kDouble);
  EXPECT_TRUE(fx::fold_batch_norm(gm).modified);
  EXPECT_TRUE(at::equal(net->stem->weight, stem_weight));  // copied, not scaled in place
  EXPECT_LE(relative_error(gm->forward(x), before), 1e-6);
}

TEST(FoldConvAddMul, FoldsPerChannelConstantsOnly) {
  auto root = std::make_shared<torch::nn::Module>("Root");
  root->register_buffer("w", at::randn({4, 3, 3, 3}));
  root->register_buffer("b", at::randn({4}));
  root->register_buffer("shift", at::randn({1, 4, 1, 1}));
  root->register_buffer("plane", at::randn({4, 6, 6}));  // varies over space: cannot be a bias
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* c = g->call_function("aten::conv2d", {x, g->get_attr("w"), g->get_attr("b")});
  fx::Node* v = g->call_function("aten::mul", {c, 0.5});
  v = g->call_function("aten::add", {g->get_attr("shift"), v});
  v = g->call_function("aten::div", {v, 4});
  v = g->call_function("aten::sub", {v, 1});
  v = g->call_function("aten::relu", {v});
  fx::Node* c2 = g->call_function("aten::conv2d", {x, g->get_attr("w")});
  fx::Node* p = g->call_function("aten::add", {c2, g->get_attr("plane")});
  fx::Node* q = g->call_function("aten::rsub", {p, 1});  // 1 - p: not folded
  g->output(fx::Argument::tuple({v, q}));
  auto gm = std::make_shared<fx::GraphModule>(root, g);
  at::Tensor in = at::randn({2, 3, 8, 8});
  c10::IValue want = gm->forward({in});
  size_t count = 0;
  EXPECT_TRUE(fx::fold_conv_add_mul(gm, &count).modified);
  EXPECT_EQ(count, 4u);
  EXPECT_EQ(call_targets(gm->graph()),
            (std::vector<std::string>{"aten::conv2d", "aten::relu", "aten::conv2d", "aten::add", "aten::rsub"}));
  c10::IValue got = gm->forward({in});
  for (size_t i = 0; i < 2; ++i)
    EXPECT_LE(relative_error(got.toTupleRef().elements()[i].toTensor(), want.toTupleRef().elements()[i].toTensor()),
              1e-5);
  EXPECT_TRUE(at::equal(root->named_buffers()["w"], gm->fetch_attr("w")));  // the original weight is untouched
  EXPECT_FALSE(fx::fold_conv_add_mul(gm).modified);
}

// OptimizeOptions::winograd off: no convolution of the optimised graph may use it.
TEST(OptimizeForInference, WinogradCanBeTurnedOff) {
  Traced t = traced_tiny_net();
  for (bool winograd : {true, false}) {
    fx::OptimizeOptions options;
    options.winograd = winograd;
    options.example_inputs = {at::randn({1, 3, 32, 32})};
    auto opt = fx::optimize_for_inference(t.gm, options);
    size_t marked = 0;
    for (const fx::Node* n : opt->graph().nodes())
      if (n->target() == "fxcpp::onednn_conv2d")
        marked += fx::onednn::describe(n->args()[1].to_constant()).find("winograd") != std::string::npos;
    EXPECT_EQ(marked, winograd ? 2u : 0u);
  }
}

}  // namespace
