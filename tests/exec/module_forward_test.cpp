// call_module: torch::nn layers through the registered forwards, default
// arguments, tuple results, containers, nested GraphModules, user modules.
#include "exec_test_util.h"

#include <fx/graph_module.h>

#include <torch/nn/functional.h>
#include <torch/nn/modules.h>

#include <gtest/gtest.h>

namespace {

using c10::IValue;
using fx::Graph;
using fx::Node;
using fx_test::error_of;
using fx_test::same;

/// A GraphModule whose graph calls `module` (installed as "m") on its inputs.
std::shared_ptr<fx::GraphModule> wrap(std::shared_ptr<torch::nn::Module> module, size_t num_inputs,
                                      const std::function<fx::Argument(Graph&, Node*)>& post = nullptr) {
  auto root = std::make_shared<torch::nn::Module>("Root");
  root->register_module("m", std::move(module));
  auto g = std::make_shared<Graph>();
  fx::ArgList inputs;
  for (size_t i = 0; i < num_inputs; ++i) inputs.push_back(g->placeholder("x" + std::to_string(i)));
  Node* call = g->call_module("m", inputs);
  g->output(post ? post(*g, call) : fx::Argument(call));
  return std::make_shared<fx::GraphModule>(root, g);
}

TEST(ModuleForward, CommonLayersMatchEager) {
  torch::manual_seed(0);
  at::Tensor img = at::randn({2, 3, 8, 8});
  torch::nn::Conv2d conv(torch::nn::Conv2dOptions(3, 4, 3).padding(1));
  EXPECT_TRUE(same(wrap(conv.ptr(), 1)->forward(img), conv->forward(img)));
  torch::nn::BatchNorm2d bn(3);
  bn->eval();
  EXPECT_TRUE(same(wrap(bn.ptr(), 1)->forward(img), bn->forward(img)));
  torch::nn::MaxPool2d pool(torch::nn::MaxPool2dOptions(2));
  EXPECT_TRUE(same(wrap(pool.ptr(), 1)->forward(img), pool->forward(img)));
  torch::nn::AdaptiveAvgPool2d gap(torch::nn::AdaptiveAvgPool2dOptions({1, 1}));
  EXPECT_TRUE(same(wrap(gap.ptr(), 1)->forward(img), gap->forward(img)));
  torch::nn::Flatten flatten;
  EXPECT_EQ(wrap(flatten.ptr(), 1)->forward(img).sizes(), at::IntArrayRef({2, 192}));
  at::Tensor v = at::randn({5, 6});
  torch::nn::Linear lin(6, 2);
  EXPECT_TRUE(same(wrap(lin.ptr(), 1)->forward(v), lin->forward(v)));
  torch::nn::LayerNorm ln(torch::nn::LayerNormOptions({6}));
  EXPECT_TRUE(same(wrap(ln.ptr(), 1)->forward(v), ln->forward(v)));
  torch::nn::GELU gelu;
  EXPECT_TRUE(same(wrap(gelu.ptr(), 1)->forward(v), gelu->forward(v)));
  torch::nn::Softmax softmax(1);
  EXPECT_TRUE(same(wrap(softmax.ptr(), 1)->forward(v), softmax->forward(v)));
  torch::nn::Dropout dropout(0.5);
  dropout->eval();
  EXPECT_TRUE(same(wrap(dropout.ptr(), 1)->forward(v), v));
  torch::nn::Embedding emb(10, 3);
  at::Tensor idx = at::tensor({1, 7, 7}, at::kLong);
  EXPECT_TRUE(same(wrap(emb.ptr(), 1)->forward(idx), emb->forward(idx)));
}

TEST(ModuleForward, TupleResultsAndGetitem) {
  torch::manual_seed(0);
  torch::nn::LSTM lstm(torch::nn::LSTMOptions(4, 3));
  at::Tensor seq = at::randn({5, 2, 4});
  auto gm = wrap(lstm.ptr(), 1, [](Graph& g, Node* call) {
    Node* out = g.call_function("operator.getitem", {call, 0});
    Node* state = g.call_function("operator.getitem", {call, 1});
    Node* h = g.call_function("operator.getitem", {state, 0});
    return fx::Argument::tuple({out, h});
  });
  IValue r = gm->forward(std::vector<IValue>{seq});  // hx omitted: LSTM's default
  auto expected = lstm->forward(seq);
  EXPECT_TRUE(same(r.toTupleRef().elements()[0].toTensor(), std::get<0>(expected)));
  EXPECT_TRUE(same(r.toTupleRef().elements()[1].toTensor(), std::get<0>(std::get<1>(expected))));
}

TEST(ModuleForward, DefaultArgumentsOfTorchLayersAreFilled) {
  torch::manual_seed(0);
  torch::nn::TransformerEncoderLayer layer(torch::nn::TransformerEncoderLayerOptions(8, 2).dim_feedforward(16));
  layer->eval();
  at::Tensor src = at::randn({3, 2, 8});
  EXPECT_TRUE(same(wrap(layer.ptr(), 1)->forward(src), layer->forward(src)));
  torch::nn::MultiheadAttention mha(torch::nn::MultiheadAttentionOptions(8, 2));
  mha->eval();
  IValue r = wrap(mha.ptr(), 3)->forward(std::vector<IValue>{src, src, src});
  auto expected = mha->forward(src, src, src);
  EXPECT_TRUE(same(r.toTupleRef().elements()[0].toTensor(), std::get<0>(expected)));
  EXPECT_TRUE(same(r.toTupleRef().elements()[1].toTensor(), std::get<1>(expected)));
  // Fewer arguments than the declared defaults leave required: the range it takes.
  const std::string msg = error_of([&] { wrap(mha.ptr(), 2)->forward(std::vector<IValue>{src, src}); });
  EXPECT_NE(msg.find("torch::nn::MultiheadAttention::forward() takes from 3 to 7 arguments but 2 were given"),
            std::string::npos)
      << msg;
}

TEST(ModuleForward, SequentialRunsItsChildrenInOrder) {
  torch::manual_seed(0);
  torch::nn::Sequential seq(torch::nn::Linear(4, 3), torch::nn::ReLU(), torch::nn::Linear(3, 2));
  at::Tensor x = at::randn({2, 4});
  EXPECT_TRUE(same(wrap(seq.ptr(), 1)->forward(x), seq->forward(x)));
}

struct ScaleImpl : torch::nn::Module {
  explicit ScaleImpl(double f) : factor(f) {}
  at::Tensor forward(const at::Tensor& x, double extra) { return x * factor + extra; }
  double factor;
};

TEST(ModuleForward, UserModulesNeedARegisteredType) {
  auto m = std::make_shared<ScaleImpl>(2.0);
  auto gm = wrap(m, 2);
  std::string msg = error_of([&] { gm->forward(std::vector<IValue>{at::ones({1}), 1.0}); });
  EXPECT_NE(msg.find("no forward is registered for module 'm'"), std::string::npos) << msg;
  fx::register_module_type<ScaleImpl>();
  EXPECT_EQ(gm->forward(std::vector<IValue>{at::ones({1}), 1.0}).toTensor().item<float>(), 3.0f);
  msg = error_of([&] { gm->forward(std::vector<IValue>{at::ones({1})}); });
  EXPECT_NE(msg.find("forward() missing 1 required positional argument: 'x1'"), std::string::npos) << msg;
  // A call_module with fewer arguments than a forward without defaults takes.
  msg = error_of([&] { wrap(m, 1)->forward(std::vector<IValue>{at::ones({1})}); });
  EXPECT_NE(msg.find("ScaleImpl::forward() takes 2 arguments but 1 were given"), std::string::npos) << msg;
}

// A forward of three arguments whose FORWARD_HAS_DEFAULT_ARGS gives a default
// for the second only: torch::nn's own macro then fills one argument short.
struct MisdeclaredImpl : torch::nn::Module {
  at::Tensor forward(const at::Tensor& x, double a, double b) { return x * a + b; }

 protected:
  FORWARD_HAS_DEFAULT_ARGS({1, torch::nn::AnyValue(2.0)})
};

TEST(ModuleForward, DefaultsThatFillTooFewArgumentsAreAnError) {
  fx::register_module_type<MisdeclaredImpl>();
  auto m = std::make_shared<MisdeclaredImpl>();
  EXPECT_EQ(wrap(m, 3)->forward(std::vector<IValue>{at::ones({1}), 3.0, 1.0}).toTensor().item<float>(), 4.0f);
  std::string msg = error_of([&] { wrap(m, 1)->forward(std::vector<IValue>{at::ones({1})}); });
  EXPECT_NE(msg.find("MisdeclaredImpl::forward(): its defaults gave 2 arguments of 3"), std::string::npos) << msg;
}

TEST(ModuleForward, NestedGraphModules) {
  auto inner_g = std::make_shared<Graph>();
  Node* a = inner_g->placeholder("a");
  inner_g->output(inner_g->call_function("aten::mul", {a, 10}));
  auto inner = std::make_shared<fx::GraphModule>(nullptr, inner_g, "Inner");
  auto gm = wrap(inner, 1, [](Graph& g, Node* call) { return fx::Argument(g.call_function("aten::add", {call, 1})); });
  EXPECT_EQ(gm->forward(at::ones({1})).item<float>(), 11.0f);
  // Editing the inner graph is seen through the outer module.
  Node* mul = inner_g->find_nodes(fx::Opcode::CallFunction)[0];
  mul->update_arg(1, 100);
  EXPECT_EQ(gm->forward(at::ones({1})).item<float>(), 101.0f);
}

}  // namespace
