// symbolic_trace: what the recorded graph contains (ops kept whole, shape
// code, get_attr / constants, getitem, in-place ops, outputs, meta).
#include <fx/examples/residual_net.h>
#include <fx/trace.h>

#include "trace_models.h"
#include "trace_test_util.h"

#include <gtest/gtest.h>
#include <c10/core/InferenceMode.h>

#include <thread>
#include <torch/nn/modules/normalization.h>

namespace fx {
namespace {

using trace_test::count_calls;
using trace_test::sorted;
using trace_test::targets;

TEST(TraceGraph, ResidualNetKeepsLayersAsCallModules) {
  auto net = examples::ResidualNet();
  net->eval();
  Tracer tracer;
  auto g = tracer.trace(net.ptr(), {at::randn({2, 3, 16, 16})});
  EXPECT_EQ(targets(*g, Opcode::CallModule),
            (std::vector<std::string>{"conv1", "bn1", "block.conv1", "block.bn1", "block.conv2", "block.bn2", "fc"}));
  EXPECT_TRUE(targets(*g, Opcode::GetAttr).empty());
  EXPECT_EQ(count_calls(*g, "aten::relu"), 3u);
  EXPECT_EQ(count_calls(*g, "aten::add.Tensor"), 1u);
  EXPECT_EQ(count_calls(*g, "aten::max_pool2d"), 1u);
  EXPECT_EQ(count_calls(*g, "aten::adaptive_avg_pool2d"), 1u);
  EXPECT_EQ(count_calls(*g, "aten::flatten.using_ints"), 1u);
  // torch.fx names: qualified name with dots as underscores.
  std::vector<std::string> names;
  for (Node* n : g->find_nodes(Opcode::CallModule)) names.push_back(n->name());
  EXPECT_EQ(names[2], "block_conv1");
  EXPECT_EQ(tracer.root_class_name(), "ResidualNet");
  g->lint();
}

TEST(TraceGraph, EveryValueNodeHasTensorMeta) {
  auto net = examples::ResidualNet();
  net->eval();
  Tracer tracer;
  auto g = tracer.trace(net.ptr(), {at::randn({2, 3, 16, 16})});
  for (Node* n : g->nodes()) {
    if (n->op() == Opcode::Output) continue;
    auto it = n->meta().find("tensor_meta");
    ASSERT_NE(it, n->meta().end()) << n->format_node();
    ASSERT_EQ(it->second.type(), typeid(TensorMetadata)) << n->format_node();
  }
  const auto& out = std::any_cast<const TensorMetadata&>(g->find_nodes(Opcode::CallModule, "fc")[0]->meta().at("tensor_meta"));
  EXPECT_EQ(out.shape, (std::vector<int64_t>{2, 10}));
  EXPECT_EQ(out.dtype, at::kFloat);
  EXPECT_TRUE(out.requires_grad);
  EXPECT_EQ(out.memory_format, c10::MemoryFormat::Contiguous);
  const auto& in = std::any_cast<const TensorMetadata&>(g->find_nodes(Opcode::Placeholder)[0]->meta().at("tensor_meta"));
  EXPECT_EQ(in.shape, (std::vector<int64_t>{2, 3, 16, 16}));
  EXPECT_FALSE(in.requires_grad);
}

TEST(TraceGraph, CompositeOpsStaySingleNodesWhenNotLeaves) {
  // Traced through (no leaves): the ATen ops the layers issue, not their decompositions.
  struct NoLeaves : Tracer {
    bool is_leaf_module(const torch::nn::Module&, const std::string&) override { return false; }
  };
  auto conv = torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3));
  auto bn = torch::nn::BatchNorm2d(4);
  auto ln = torch::nn::LayerNorm(torch::nn::LayerNormOptions({4}));
  auto fc = torch::nn::Linear(4, 2);
  auto root = std::make_shared<torch::nn::Module>();
  root->register_module("conv", conv);
  root->register_module("bn", bn);
  root->register_module("ln", ln);
  root->register_module("fc", fc);
  root->eval();
  NoLeaves tracer;
  auto g = tracer.trace(root, [&](std::vector<c10::IValue> a) -> c10::IValue {
    at::Tensor y = bn(conv(a[0].toTensor()));
    y = y.permute({0, 2, 3, 1});
    return fc(ln(y));
  }, {at::randn({1, 3, 6, 6})});
  EXPECT_EQ(count_calls(*g, "aten::conv2d"), 1u);
  EXPECT_EQ(count_calls(*g, "aten::batch_norm"), 1u);
  EXPECT_EQ(count_calls(*g, "aten::layer_norm"), 1u);
  EXPECT_EQ(count_calls(*g, "aten::t"), 1u);
  EXPECT_EQ(count_calls(*g, "aten::matmul"), 1u);  // 4-d input: F::linear's matmul + add_
  EXPECT_EQ(count_calls(*g, "aten::add_.Tensor"), 1u);
  EXPECT_EQ(count_calls(*g, "aten::convolution"), 0u);
  EXPECT_EQ(count_calls(*g, "aten::native_batch_norm"), 0u);
  EXPECT_EQ(count_calls(*g, "aten::native_layer_norm"), 0u);
  EXPECT_TRUE(g->find_nodes(Opcode::CallModule).empty());
  EXPECT_EQ(sorted(targets(*g, Opcode::GetAttr)),
            sorted({"conv.weight", "conv.bias", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var",
                    "ln.weight", "ln.bias", "fc.weight", "fc.bias"}));
}

TEST(TraceGraph, AtenLinearCalledDirectlyStaysOneNode) {
  at::Tensor w = at::randn({2, 3});
  auto g = Tracer().trace([w](std::vector<c10::IValue> a) -> c10::IValue { return at::linear(a[0].toTensor(), w); },
                          {at::randn({4, 3})});
  EXPECT_EQ(count_calls(*g, "aten::linear"), 1u);
  EXPECT_EQ(g->nodes().size(), 4u);  // x, _tensor_constant0, linear, output
}

TEST(TraceGraph, ShapeCodeTraces) {
  auto g = Tracer().trace(
      [](std::vector<c10::IValue> a) -> c10::IValue {
        at::Tensor x = a[0].toTensor();
        const int64_t n = x.size(0);
        return x.view({n, -1}).sum(1) * x.dim();
      },
      {at::randn({3, 4, 5})});
  ASSERT_EQ(count_calls(*g, "aten::view"), 1u);
  Node* view = g->find_nodes(Opcode::CallFunction, "aten::view")[0];
  EXPECT_EQ(view->args()[1], Argument::list({Argument(int64_t{3}), Argument(int64_t{-1})}));
  EXPECT_EQ(count_calls(*g, "aten::sum.dim_IntList"), 1u);
  EXPECT_EQ(count_calls(*g, "aten::mul.Scalar"), 1u);
}

TEST(TraceGraph, ParametersAreGetAttrAndOpsOnThemAreRecorded) {
  struct Affine : torch::nn::Module {
    Affine() {
      weight = register_parameter("weight", at::randn({4, 3}));
      scale = register_buffer("scale", at::full({4}, 2.0));
    }
    at::Tensor forward(const at::Tensor& x) { return at::matmul(x, weight.t()) * scale; }
    at::Tensor weight, scale;
  };
  auto m = std::make_shared<Affine>();
  auto g = Tracer().trace(m, {at::randn({2, 3})});
  EXPECT_EQ(sorted(targets(*g, Opcode::GetAttr)), sorted({"weight", "scale"}));
  ASSERT_EQ(count_calls(*g, "aten::t"), 1u);
  EXPECT_EQ(g->find_nodes(Opcode::CallFunction, "aten::t")[0]->args()[0].to_node()->target(), "weight");
}

TEST(TraceGraph, OtherTensorsBecomeConstants) {
  at::Tensor bias = at::randn({3});
  Tracer tracer;
  auto g = tracer.trace(
      [bias](std::vector<c10::IValue> a) -> c10::IValue { return a[0].toTensor() + bias + at::ones({3}); },
      {at::randn({2, 3})});
  EXPECT_EQ(targets(*g, Opcode::GetAttr), (std::vector<std::string>{"_tensor_constant0", "_tensor_constant1"}));
  auto params = tracer.root()->named_buffers();
  ASSERT_TRUE(params.contains("_tensor_constant0"));
  EXPECT_TRUE(params["_tensor_constant0"].is_same(bias));
  EXPECT_EQ(tracer.root_class_name(), "GraphModule");
}

TEST(TraceGraph, TupleResultsGiveGetitemOnlyForUsedElements) {
  auto g = Tracer().trace(
      [](std::vector<c10::IValue> a) -> c10::IValue {
        auto [values, indices] = at::max(a[0].toTensor(), 1);
        (void)indices;
        return values * 2;
      },
      {at::randn({3, 4})});
  ASSERT_EQ(count_calls(*g, "aten::max.dim"), 1u);
  auto items = g->find_nodes(Opcode::CallFunction, "operator.getitem");
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0]->args()[1].to_int(), 0);
}

TEST(TraceGraph, InPlaceOpsAreRecordedAndLaterUsesReadThem) {
  auto g = Tracer().trace(
      [](std::vector<c10::IValue> a) -> c10::IValue {
        at::Tensor x = a[0].toTensor() * 1;
        x.relu_();
        x.add_(1);
        return x.neg();
      },
      {at::randn({5})});
  ASSERT_EQ(count_calls(*g, "aten::relu_"), 1u);
  ASSERT_EQ(count_calls(*g, "aten::add_.Scalar"), 1u);
  Node* neg = g->find_nodes(Opcode::CallFunction, "aten::neg")[0];
  EXPECT_EQ(neg->args()[0].to_node()->target(), "aten::add_.Scalar");
}

TEST(TraceGraph, OutputsMayBeTuplesListsAndDicts) {
  auto g = Tracer().trace(
      [](std::vector<c10::IValue> a) -> c10::IValue {
        at::Tensor x = a[0].toTensor();
        c10::Dict<std::string, at::Tensor> d;
        d.insert("sin", x.sin());
        d.insert("cos", x.cos());
        return d;
      },
      {at::randn({2})});
  Node* out = g->output_node();
  ASSERT_TRUE(out->args()[0].is_dict());
  EXPECT_EQ(out->args()[0].dict_items()[0].first, "sin");
  auto g2 = Tracer().trace(
      [](std::vector<c10::IValue> a) -> c10::IValue {
        at::Tensor x = a[0].toTensor();
        return std::make_tuple(x.sin(), std::vector<at::Tensor>{x.cos(), x.tan()});
      },
      {at::randn({2})});
  ASSERT_EQ(g2->output_node()->args()[0].kind(), Argument::Kind::Tuple);
  EXPECT_EQ(g2->output_node()->args()[0].items()[1].kind(), Argument::Kind::List);
}

TEST(TraceGraph, ConcreteArgsAreBakedIn) {
  struct Scaled : torch::nn::Module {
    at::Tensor forward(const at::Tensor& x, double scale, bool negate) {
      at::Tensor y = x * scale;
      return negate ? -y : y;
    }
  };
  auto m = std::make_shared<Scaled>();
  auto g = Tracer().trace(m, {at::randn({3})}, {{1, 3.0}, {2, true}});
  EXPECT_EQ(g->find_nodes(Opcode::Placeholder).size(), 1u);
  EXPECT_EQ(count_calls(*g, "aten::neg"), 1u);
  Node* mul = g->find_nodes(Opcode::CallFunction, "aten::mul.Scalar")[0];
  EXPECT_EQ(mul->args()[1], Argument(3.0));
}

TEST(TraceGraph, ListInputsBecomeOnePlaceholderWithGetitems) {
  Tracer tracer;
  tracer.set_input_names({"xs"});
  auto g = tracer.trace(
      [](std::vector<c10::IValue> a) -> c10::IValue {
        auto xs = a[0].toTensorVector();
        return at::cat(xs, 0);
      },
      {c10::List<at::Tensor>({at::randn({2}), at::randn({3})})});
  ASSERT_EQ(g->find_nodes(Opcode::Placeholder).size(), 1u);
  EXPECT_EQ(g->find_nodes(Opcode::Placeholder)[0]->target(), "xs");
  EXPECT_EQ(count_calls(*g, "operator.getitem"), 2u);
  EXPECT_EQ(count_calls(*g, "aten::cat"), 1u);
}

TEST(TraceGraph, InferenceModeInsideForwardStillTraces) {
  // Autograd keys are excluded there: calls reach the kernel registered on
  // PrivateUse1, still before any composite kernel runs.
  auto g = Tracer().trace(
      [](std::vector<c10::IValue> a) -> c10::IValue {
        c10::InferenceMode inference;
        return at::relu(a[0].toTensor()) + 1;
      },
      {at::randn({3})});
  EXPECT_EQ(count_calls(*g, "aten::relu"), 1u);
  EXPECT_EQ(count_calls(*g, "aten::add.Scalar"), 1u);
}

TEST(TraceGraph, ConcurrentTracesOnSeveralThreads) {
  auto net = examples::ResidualNet();
  net->eval();
  std::vector<std::thread> threads;
  std::vector<size_t> counts(4, 0);
  for (size_t t = 0; t < counts.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) counts[t] = Tracer().trace(net.ptr(), {at::randn({1, 3, 8, 8})})->nodes().size();
    });
  }
  for (auto& th : threads) th.join();
  for (size_t c : counts) EXPECT_EQ(c, 16u);
}

TEST(TraceGraph, TracingLeavesTheModelUntouched) {
  auto net = examples::ResidualNet();
  net->train();  // batch norm updates its running statistics in training
  std::vector<at::Tensor> before;
  for (const auto& b : net->buffers()) before.push_back(b.clone());
  for (const auto& p : net->parameters()) before.push_back(p.detach().clone());
  at::Tensor x = at::randn({2, 3, 8, 8});
  at::Tensor x_copy = x.clone();
  Tracer().trace(net.ptr(), {x});
  std::vector<at::Tensor> after;
  for (const auto& b : net->buffers()) after.push_back(b);
  for (const auto& p : net->parameters()) after.push_back(p.detach());
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(before[i].equal(after[i])) << i;
  EXPECT_TRUE(x.equal(x_copy));
}

}  // namespace
}  // namespace fx
