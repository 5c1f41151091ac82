// lower_to_onednn and reinplace on small graphs: residual sums that must not
// be overwritten, pooling, softmax and layer norm, matmuls that take in a
// transpose, reinplace's rules, kernel errors, Winograd convolutions.
#include "../passes/passes_test_util.h"
#include "optimize_test_util.h"

#include <fx/graph.h>
#include <fx/interpreter.h>
#include <fx/onednn.h>
#include <fx/optimize/lower_to_onednn.h>
#include <fx/optimize/reinplace.h>
#include <fx/passes/shape_prop.h>
#include <fx/tensor_meta.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>
#include <torch/nn.h>

namespace {

using fx_test::error_of;
using namespace optimize_test;

TEST(LowerToOneDnn, ResidualIsNotOverwrittenWhileStillRead) {
  // y = relu(conv(x) + r) where r is read again afterwards: fused, but not in place.
  auto root = std::make_shared<torch::nn::Module>("Root");
  root->register_buffer("w", at::randn({4, 4, 1, 1}));
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* r = g->call_function("aten::relu", {x});
  fx::Node* c = g->call_function("aten::conv2d", {x, g->get_attr("w")});
  fx::Node* s = g->call_function("aten::add", {c, r});
  fx::Node* y = g->call_function("aten::relu", {s});
  g->output(fx::Argument::tuple({y, g->call_function("aten::mul", {r, 2})}));
  auto gm = std::make_shared<fx::GraphModule>(root, g);
  at::Tensor in = at::randn({1, 4, 5, 5});
  c10::IValue expected = gm->forward({in});
  fx::ShapeProp(gm).propagate({in});
  fx::OneDnnLowering counts;
  EXPECT_TRUE(fx::lower_to_onednn(gm, at::kFloat, &counts).modified);
  EXPECT_EQ(counts.convs, 1u);
  EXPECT_EQ(counts.fused_post_ops, 2u);
  fx::Node* lowered = gm->graph().find_nodes(fx::Opcode::CallFunction, "fxcpp::onednn_conv2d").at(0);
  EXPECT_EQ(fx::onednn::describe(lowered->args()[1].to_constant()), "Conv2d(4, 4, kernel=(1, 1), bias=False, +residual, relu)");
  c10::IValue got = gm->forward({in});
  EXPECT_LE(relative_error(got.toTupleRef().elements()[0].toTensor(), expected.toTupleRef().elements()[0].toTensor()),
            1e-5);
  EXPECT_TRUE(at::equal(got.toTupleRef().elements()[1].toTensor(), expected.toTupleRef().elements()[1].toTensor()));
}

TEST(LowerToOneDnn, MaxPoolInFloorModeWithoutDilation) {
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  using L = std::vector<fx::Argument>;
  auto pool = [&](std::vector<fx::Argument> extra) {
    fx::ArgList args{x};
    for (auto& a : extra) args.push_back(std::move(a));
    return g->call_function("aten::max_pool2d", std::move(args));
  };
  auto list = [](L v) { return fx::Argument::list(std::move(v)); };
  std::vector<fx::Argument> outs{
      pool({list({3, 3}), list({2, 2}), list({1, 1}), list({1, 1}), false}),  // ResNet's stem pool
      pool({list({2, 2})}),                                                     // stride = kernel
      pool({list({3, 2}), list({2, 1}), list({1, 0})}),                         // per-dim parameters
      pool({list({3}), list({2})}),                                             // one int for both dims
      pool({list({3, 3}), list({2, 2}), list({1, 1}), list({1, 1}), true}),   // ceil_mode: stays ATen
      pool({list({3, 3}), list({1, 1}), list({1, 1}), list({2, 2}), false}),  // dilation: stays ATen
  };
  g->output(fx::Argument::tuple(outs));
  auto gm = fx_test::module_of(g);
  at::Tensor x0 = at::randn({2, 5, 9, 11});
  std::vector<at::Tensor> inputs{x0, x0.contiguous(at::MemoryFormat::ChannelsLast), x0.to(at::kDouble),
                                 x0.transpose(2, 3), at::randn({1, 1, 3, 3})};
  std::vector<c10::IValue> want;
  for (const auto& in : inputs) want.push_back(gm->forward({in}));
  EXPECT_TRUE(fx::lower_to_onednn(gm).modified);
  EXPECT_EQ(call_targets(gm->graph()),
            (std::vector<std::string>{"fxcpp::max_pool2d", "fxcpp::max_pool2d",
                                      "fxcpp::max_pool2d", "fxcpp::max_pool2d", "aten::max_pool2d",
                                      "aten::max_pool2d"}));
  const fx::Node* first = gm->graph().find_nodes(fx::Opcode::CallFunction, "fxcpp::max_pool2d").at(0);
  EXPECT_EQ(first->format_node(), "%max_pool2d_6 : [#users=1] = call_function[target=fxcpp::max_pool2d]"
                                  "(args = (%x, [3, 3], [2, 2], [1, 1]), kwargs = {})");
  // float (NCHW, channels_last, both at once), double and strided inputs
  // (the last two through ATen) give ATen's values.
  for (size_t i = 0; i < inputs.size(); ++i) {
    c10::IValue got = gm->forward({inputs[i]});
    for (size_t j = 0; j < outs.size(); ++j) {
      const at::Tensor& a = got.toTupleRef().elements()[j].toTensor();
      const at::Tensor& b = want[i].toTupleRef().elements()[j].toTensor();
      EXPECT_EQ(a.sizes(), b.sizes()) << "input " << i << ", pool " << j;
      EXPECT_TRUE(at::equal(a, b)) << "input " << i << ", pool " << j;
    }
  }
  // A channels_last input stays channels_last, as ATen's pooling keeps it.
  EXPECT_TRUE(gm->forward({inputs[1]}).toTupleRef().elements()[0].toTensor().is_contiguous(
      at::MemoryFormat::ChannelsLast));
}

// Int-list parameters as ATen reads them (Argument::to_int_list(2)): a tuple
// like a list, a one-item list [v] as {v, v} (a conv2d's stride [2], a max
// pool's dilation [1]).
TEST(LowerToOneDnn, TuplesAndOneItemListsAreReadAsATenReadsThem) {
  auto root = std::make_shared<torch::nn::Module>("Root");
  root->register_buffer("w", at::randn({4, 4, 3, 3}));
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  auto list = [](std::vector<fx::Argument> v) { return fx::Argument::list(std::move(v)); };
  fx::Node* conv = g->call_function("aten::conv2d", {x, g->get_attr("w"), nullptr, list({2}), list({1}), list({1})});
  fx::Node* pool = g->call_function(
      "aten::max_pool2d", {x, fx::Argument::tuple({3, 3}), fx::Argument::tuple({2, 2}), list({1}), list({1}), false});
  g->output(fx::Argument::tuple({conv, pool}));
  auto gm = std::make_shared<fx::GraphModule>(root, g);
  at::Tensor in = at::randn({1, 4, 9, 9});
  c10::IValue expected = gm->forward({in});
  fx::ShapeProp(gm).propagate({in});
  EXPECT_TRUE(fx::lower_to_onednn(gm).modified);
  const std::vector<std::string> targets = call_targets(gm->graph());  // with the conv's layout nodes
  for (const char* t : {"fxcpp::onednn_conv2d", "fxcpp::max_pool2d"})
    EXPECT_EQ(std::count(targets.begin(), targets.end(), t), 1) << t;
  const fx::Node* lowered_pool = gm->graph().find_nodes(fx::Opcode::CallFunction, "fxcpp::max_pool2d").at(0);
  EXPECT_EQ(lowered_pool->format_node(), "%max_pool2d_1 : [#users=1] = call_function[target=fxcpp::max_pool2d]"
                                         "(args = (%x, [3, 3], [2, 2], [1, 1]), kwargs = {})");
  c10::IValue got = gm->forward({in});
  for (size_t j = 0; j < 2; ++j) {
    const at::Tensor& a = got.toTupleRef().elements()[j].toTensor();
    const at::Tensor& b = expected.toTupleRef().elements()[j].toTensor();
    EXPECT_EQ(a.sizes(), b.sizes()) << "output " << j;
    EXPECT_LE(relative_error(a, b), 1e-5) << "output " << j;
  }
}

// adaptive_avg_pool2d → fxcpp::adaptive_avg_pool2d: oneDNN's average pooling
// where the output size divides the input's (global pooling, 8 → 4), ATen's
// otherwise (9 → 4, whose windows overlap); ATen's values within rounding,
// its sizes, and its layout for channels_last inputs.
TEST(LowerToOneDnn, AdaptiveAvgPoolWhereTheOutputDividesTheInput) {
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  auto list = [](std::vector<fx::Argument> v) { return fx::Argument::list(std::move(v)); };
  std::vector<fx::Argument> outs{g->call_function("aten::adaptive_avg_pool2d", {x, list({1, 1})}),
                                 g->call_function("aten::adaptive_avg_pool2d", {x, list({4, 2})}),
                                 g->call_function("aten::adaptive_avg_pool2d", {x, 4})};
  g->output(fx::Argument::tuple(outs));
  auto gm = fx_test::module_of(g);
  EXPECT_TRUE(fx::lower_to_onednn(gm).modified);
  EXPECT_EQ(call_targets(gm->graph()), (std::vector<std::string>(3, "fxcpp::adaptive_avg_pool2d")));
  const at::Tensor x0 = at::randn({2, 24, 8, 8});
  for (const at::Tensor& in : {x0, x0.contiguous(at::MemoryFormat::ChannelsLast), at::randn({1, 3, 9, 9}),
                               x0.to(at::kDouble), x0.transpose(2, 3)}) {
    const c10::IValue got = gm->forward({in});
    const std::vector<int64_t> sizes[] = {{1, 1}, {4, 2}, {4, 4}};
    for (size_t j = 0; j < outs.size(); ++j) {
      const at::Tensor& a = got.toTupleRef().elements()[j].toTensor();
      const at::Tensor b = at::adaptive_avg_pool2d(in, sizes[j]);
      EXPECT_EQ(a.sizes(), b.sizes()) << in.sizes() << ", pool " << j;
      EXPECT_TRUE(at::allclose(a, b, 1e-6, 1e-6)) << in.sizes() << ", pool " << j;
      EXPECT_EQ(a.is_contiguous(at::MemoryFormat::ChannelsLast), b.is_contiguous(at::MemoryFormat::ChannelsLast));
    }
  }
}

// softmax / layer_norm → fxcpp::softmax / fxcpp::layer_norm: oneDNN's over a
// contiguous float tensor's last dim (with and without weight and bias),
// ATen's for anything else (another dim, two normalized dims, double,
// strided); ATen's values within rounding and its sizes and strides.
TEST(LowerToOneDnn, SoftmaxAndLayerNormOverTheLastDim) {
  auto root = std::make_shared<torch::nn::Module>("Root");
  root->register_buffer("w", at::randn({6}));
  root->register_buffer("b", at::randn({6}));
  root->register_buffer("w2", at::randn({5, 6}));
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  auto list = [](std::vector<fx::Argument> v) { return fx::Argument::list(std::move(v)); };
  fx::Node* w = g->get_attr("w");
  fx::Node* b = g->get_attr("b");
  std::vector<fx::Argument> outs{
      g->call_function("aten::softmax", {x, -1}),
      g->call_function("aten::softmax", {x, 1, fx::Argument()}),
      g->call_function("aten::layer_norm", {x, list({6}), w, b, 1e-5, true}),
      g->call_function("aten::layer_norm", {x, list({6}), fx::Argument(), fx::Argument(), 0}),
      g->call_function("aten::layer_norm", {x, list({5, 6}), g->get_attr("w2"), fx::Argument(), 1e-3, false})};
  g->output(fx::Argument::tuple(outs));
  auto gm = fx_test::module_of(g, root);
  EXPECT_TRUE(fx::lower_to_onednn(gm).modified);
  EXPECT_EQ(call_targets(gm->graph()),
            (std::vector<std::string>{"fxcpp::softmax", "fxcpp::softmax", "fxcpp::layer_norm", "fxcpp::layer_norm",
                                      "fxcpp::layer_norm"}));
  const at::Tensor x0 = at::randn({3, 5, 6}) * 3;
  const at::Tensor w0 = root->named_buffers()["w"], b0 = root->named_buffers()["b"], w2 = root->named_buffers()["w2"];
  for (const at::Tensor& in : {x0, x0.transpose(0, 1).contiguous().transpose(0, 1)}) {
    const c10::IValue got = gm->forward({in});
    const at::Tensor want[] = {at::softmax(in, -1), at::softmax(in, 1), at::layer_norm(in, {6}, w0, b0, 1e-5),
                               at::layer_norm(in, {6}, {}, {}, 0), at::layer_norm(in, {5, 6}, w2, {}, 1e-3)};
    for (size_t j = 0; j < outs.size(); ++j) {
      const at::Tensor& a = got.toTupleRef().elements()[j].toTensor();
      EXPECT_EQ(a.sizes(), want[j].sizes()) << j;
      EXPECT_EQ(a.strides(), want[j].strides()) << j;
      EXPECT_TRUE(at::allclose(a, want[j], 1e-5, 1e-5)) << in.strides() << ", op " << j;
    }
  }
  // double: ATen's softmax.
  const at::Tensor d = x0.to(at::kDouble);
  const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow("fxcpp::softmax", "");
  std::vector<c10::IValue> stack{d, int64_t{-1}, c10::IValue()};
  op.callBoxed(&stack);
  EXPECT_TRUE(stack.back().toTensor().equal(at::softmax(d, -1)));
}

// A matmul whose only user is a transpose(-3, -2) that only flatten /
// reshape read (attention's (p @ v).transpose(1, 2).flatten(2)) writes the
// transposed product contiguous (transpose_out), so the flatten is a view;
// a transpose anything else reads (here the graph output, whose strides
// the caller sees) stays.
TEST(LowerToOneDnn, MatmulTakesInATransposeOnlyFlattenReads) {
  auto g = std::make_shared<fx::Graph>();
  fx::Node* q = g->placeholder("q");
  fx::Node* v = g->placeholder("v");
  fx::Node* a = g->placeholder("a");
  fx::Node* b = g->placeholder("b");
  auto list = [](std::vector<fx::Argument> l) { return fx::Argument::list(std::move(l)); };
  fx::Node* pv = g->call_function("aten::matmul", {q, v});
  fx::Node* t = g->call_function("aten::transpose", {pv, 1, 2});
  fx::Node* flat = g->call_function("aten::flatten", {t, 2});
  fx::Node* pv2 = g->call_function("aten::matmul", {q, v});
  fx::Node* t2 = g->call_function("aten::transpose", {pv2, -2, -3});  // read by the output: stays
  fx::Node* ab = g->call_function("aten::matmul", {a, b});
  fx::Node* t3 = g->call_function("aten::transpose", {ab, 0, 1});
  fx::Node* r3 = g->call_function("aten::reshape", {t3, list({5, -1})});
  g->output(fx::Argument::tuple({flat, t2, r3}));
  auto gm = fx_test::module_of(g);
  const std::vector<c10::IValue> in{at::randn({2, 3, 5, 4}), at::randn({2, 3, 4, 6}), at::randn({3, 5, 4}),
                                    at::randn({3, 4, 2})};
  fx::ShapeProp(gm).propagate(in);
  fx::OneDnnLowering counts;
  EXPECT_TRUE(fx::lower_to_onednn(gm, at::kFloat, &counts).modified);
  EXPECT_EQ(counts.matmuls, 3u);
  EXPECT_EQ(call_targets(gm->graph()),
            (std::vector<std::string>{"fxcpp::onednn_matmul", "aten::flatten", "fxcpp::onednn_matmul",
                                      "aten::transpose", "fxcpp::onednn_matmul", "aten::reshape"}));
  std::vector<size_t> arg_counts;
  for (const fx::Node* n : gm->graph().nodes())
    if (n->op() == fx::Opcode::CallFunction && n->target() == "fxcpp::onednn_matmul") {
      arg_counts.push_back(n->args().size());
      if (n->args().size() == 3) {
        EXPECT_TRUE(n->args()[2].to_bool());
      }
    }
  EXPECT_EQ(arg_counts, (std::vector<size_t>{3, 2, 3}));
  const c10::IValue got = gm->forward(in);
  const at::Tensor want[] = {at::matmul(in[0].toTensor(), in[1].toTensor()).transpose(1, 2).flatten(2),
                             at::matmul(in[0].toTensor(), in[1].toTensor()).transpose(-2, -3),
                             at::matmul(in[2].toTensor(), in[3].toTensor()).transpose(0, 1).reshape({5, -1})};
  for (size_t j = 0; j < 3; ++j) {
    const at::Tensor& o = got.toTupleRef().elements()[j].toTensor();
    EXPECT_EQ(o.sizes(), want[j].sizes()) << j;
    EXPECT_EQ(o.strides(), want[j].strides()) << j;
    EXPECT_TRUE(at::allclose(o, want[j], 1e-5, 1e-5)) << j;
  }
  // The operator itself: the transposed product, contiguous; 2-d operands have no batch to transpose.
  const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow("fxcpp::onednn_matmul", "");
  std::vector<c10::IValue> stack{in[0], in[1], true};
  op.callBoxed(&stack);
  EXPECT_TRUE(stack.back().toTensor().is_contiguous());
  EXPECT_EQ(stack.back().toTensor().sizes(), (std::vector<int64_t>{2, 5, 3, 6}));
  EXPECT_TRUE(at::allclose(stack.back().toTensor(), want[0].view({2, 5, 3, 6}), 1e-5, 1e-5));
  std::vector<c10::IValue> flat_stack{at::randn({5, 4}), at::randn({4, 6}), true};
  EXPECT_EQ(error_of([&] { op.callBoxed(&flat_stack); }),
            "onednn_matmul: transpose_out needs a batch dimension, got 2-d operands");
}

TEST(Reinplace, OnlyDeadFreshValuesWithoutLiveViews) {
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* b = g->placeholder("b");
  fx::Node* a = g->call_function("aten::mul", {x, 3});         // fresh
  fx::Node* r = g->call_function("aten::relu", {a});           // a dead after: relu_
  fx::Node* s = g->call_function("aten::sigmoid", {x});        // x is an input: stays
  fx::Node* v = g->call_function("aten::view", {r, fx::Argument::list({16})});  // a view of r, read at the end
  fx::Node* m = g->call_function("aten::mul", {r, 2});         // r dead after, but its view lives: stays
  fx::Node* t = g->call_function("aten::tanh", {m});           // m dead after: tanh_
  fx::Node* c = g->call_function("aten::add", {g->call_function("aten::mul", {b, 1}), t});  // [4, 1] + [4, 4] broadcasts: stays
  g->output(fx::Argument::tuple({s, v, c}));
  auto gm = fx_test::module_of(g);
  std::vector<c10::IValue> in{at::randn({4, 4}), at::randn({4, 1})};
  c10::IValue want = gm->forward(in);
  fx::ShapeProp(gm).propagate(in);
  size_t count = 0;
  EXPECT_TRUE(fx::reinplace(gm, &count).modified);
  EXPECT_EQ(count, 2u);
  EXPECT_EQ(call_targets(gm->graph()), (std::vector<std::string>{"aten::mul", "aten::relu_", "aten::sigmoid",
                                                                  "aten::view", "aten::mul", "aten::tanh_",
                                                                  "aten::mul", "aten::add"}));
  c10::IValue got = gm->forward(in);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_TRUE(at::equal(got.toTupleRef().elements()[i].toTensor(), want.toTupleRef().elements()[i].toTensor())) << i;
  EXPECT_FALSE(fx::reinplace(gm).modified);
}

// fxcpp::max_pool2d leaves what oneDNN does not pool to ATen: a quantized
// tensor (a graph quantize_fx converted), with the dilation spelled out (the
// quantized kernel read a single dilation as (1, 0) and refused the pool).
TEST(LowerToOneDnn, MaxPoolOfAQuantizedTensorFallsBackToATen) {
  auto op = c10::Dispatcher::singleton()
                .findSchemaOrThrow("fxcpp::max_pool2d", "")
                .typed<at::Tensor(const at::Tensor&, at::IntArrayRef, at::IntArrayRef, at::IntArrayRef)>();
  torch::manual_seed(0);
  const at::Tensor q = at::quantize_per_tensor(at::randn({1, 4, 9, 9}), 0.05, 10, at::kQUInt8);
  const at::Tensor got = op.call(q, {3, 3}, {2, 2}, {1, 1});
  ASSERT_TRUE(got.is_quantized());
  EXPECT_TRUE(got.int_repr().equal(at::max_pool2d(q.dequantize(), {3, 3}, {2, 2}, {1, 1})
                                       .div(0.05).round().add(10).clamp(0, 255).to(at::kByte)));
}

TEST(LowerToOneDnn, KernelErrorsNameTheOperator) {
  auto root = std::make_shared<torch::nn::Module>("Root");
  root->register_buffer("w", at::randn({4, 3, 3, 3}));
  auto g = std::make_shared<fx::Graph>();
  g->output(g->call_function("aten::conv2d", {g->placeholder("x"), g->get_attr("w")}));
  auto gm = std::make_shared<fx::GraphModule>(root, g);
  fx::lower_to_onednn(gm);
  EXPECT_EQ(error_of([&] { gm->forward({at::randn({1, 5, 8, 8})}); }),
            "onednn_conv2d: expected an input [N, 3, H, W], got [1, 5, 8, 8]\n\n"
            "While executing %onednn_conv2d : [#users=1] = call_function[target=fxcpp::onednn_conv2d](args = (%x, "
            "Conv2d(3, 4, kernel=(3, 3), bias=False)), kwargs = {})");
}

// Winograd convolutions (ConvParams::winograd): a 3×3 stride-1 convolution
// of 16-multiple channels uses oneDNN's Winograd kernel where its output is
// at least 14×14 and the direct one below that, for one packed operator
// (where oneDNN has Winograd kernels: AVX-512; below AVX-512, e.g. under
// the ctest run held at AVX2, fxcpp's own Winograd on the packed GEMM above
// 8×8 and GemmConv at 7×7, the same kernel as without the flag);
// both agree with ATen's conv2d (bias, residual sum, ReLU); the weights read
// back exactly (the plain copy is kept: a Winograd layout cannot be read
// back), and the flag survives packed_state / pack.
TEST(LowerToOneDnn, WinogradConvolutionsAgreeWithTheDirectOnes) {
  torch::manual_seed(0);
  at::NoGradGuard no_grad;
  const at::Tensor w = at::randn({32, 16, 3, 3}) / 12, b = at::randn({32});
  fx::onednn::ConvParams params;
  params.padding = {1, 1};
  params.winograd = true;
  fx::onednn::PostOps post;
  post.sum = true;
  post.activation = fx::onednn::Activation::Relu;
  const c10::IValue wino = fx::onednn::pack_conv2d(w, b, params, post, at::kFloat);
  params.winograd = false;
  const c10::IValue direct = fx::onednn::pack_conv2d(w, b, params, post, at::kFloat);
  EXPECT_EQ(fx::onednn::describe(wino), "Conv2d(16, 32, kernel=(3, 3), padding=[1, 1], winograd, +residual, relu)");
  EXPECT_EQ(fx::onednn::describe(direct), "Conv2d(16, 32, kernel=(3, 3), padding=[1, 1], +residual, relu)");
  const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow("fxcpp::onednn_conv2d", "");
  auto conv = [&](const at::Tensor& x, const c10::IValue& packed, const at::Tensor& r) {
    std::vector<c10::IValue> stack{x, packed, r, false};  // a boxed call pushes every argument
    op.callBoxed(&stack);
    return stack.back().toTensor();
  };
  // oneDNN's Winograd from 14×14 (AVX-512); below AVX-512 fxcpp's own above 8×8 (gemm_winograd_test.cpp).
  const bool here = fx::onednn::has_winograd_kernels(), ours = fx::onednn::has_gemm_winograd();
  for (int64_t size : {28, 7, 14, 15}) {
    const std::vector<int64_t> sizes{2, 16, size, size};
    const std::string impl = fx::onednn::implementation(wino, sizes);
    const bool winograd = (here && size >= 14) || (ours && size > 8);
    EXPECT_EQ(impl.find("wino") != std::string::npos, winograd)
        << size << ": " << impl << " (" << fx::onednn::cpu_summary() << ")";
    EXPECT_EQ(fx::onednn::implementation(direct, sizes).find("wino"), std::string::npos);
    at::Tensor x = at::randn(sizes).relu(), r = at::randn({2, 32, size, size});
    at::Tensor want = at::relu(at::conv2d(x, w, b, 1, 1) + r);
    at::Tensor got = conv(x, wino, r), got_direct = conv(x, direct, r);
    EXPECT_LE(relative_error(got, want), 1e-5) << size;
    EXPECT_LE(relative_error(got_direct, want), 1e-5) << size;
    EXPECT_TRUE(got.is_contiguous(at::MemoryFormat::ChannelsLast));
    EXPECT_TRUE(conv(x, wino, r).equal(got)) << size;  // deterministic
    if (!winograd) {
      EXPECT_TRUE(got.equal(got_direct)) << size;
    }
  }
  const fx::onednn::PackedState state = fx::onednn::packed_state(wino);
  EXPECT_TRUE(state.params.winograd);
  EXPECT_TRUE(state.weight.equal(w));
  EXPECT_EQ(fx::onednn::describe(fx::onednn::pack(state)), fx::onednn::describe(wino));
  EXPECT_EQ(error_of([&] { fx::onednn::implementation(wino, {2, 8, 14, 14}); }),
            "onednn_conv2d: expected an input [N, 16, H, W], got [2, 8, 14, 14]");
  // Not for strided, grouped or 8-channel convolutions, nor bf16 kernels.
  params.winograd = true;
  post = {};
  for (auto [weight, stride, groups] : {std::tuple{at::randn({32, 16, 3, 3}), 2, 1},
                                        std::tuple{at::randn({32, 8, 3, 3}), 1, 2},
                                        std::tuple{at::randn({8, 8, 3, 3}), 1, 1}}) {
    params.stride = {stride, stride};
    params.groups = groups;
    const c10::IValue p = fx::onednn::pack_conv2d(weight, c10::nullopt, params, post, at::kFloat);
    EXPECT_EQ(fx::onednn::describe(p).find("winograd"), std::string::npos) << fx::onednn::describe(p);
    EXPECT_EQ(fx::onednn::implementation(p, {1, weight.size(1) * groups, 28, 28}).find("wino"), std::string::npos);
  }
  params.stride = {1, 1};
  params.groups = 1;
  if (fx::onednn::has_bf16_kernels()) {
    const c10::IValue bf16 = fx::onednn::pack_conv2d(w, b, params, post, at::kBFloat16);
    EXPECT_EQ(fx::onednn::implementation(bf16, {1, 16, 28, 28}).find("wino"), std::string::npos);
  }
}

}  // namespace
