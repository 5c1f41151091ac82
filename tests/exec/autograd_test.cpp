// Autograd flows through GraphModule::forward and the Interpreter: the
// gradients equal eager libtorch's.
#include "exec_test_util.h"

#include <fx/interpreter.h>

#include <torch/csrc/autograd/autograd.h>
#include <torch/nn/modules/linear.h>

#include <gtest/gtest.h>

namespace {

using c10::IValue;
using fx::Graph;
using fx::Node;
using fx_test::same;

struct Fixture {
  std::shared_ptr<torch::nn::Module> root = std::make_shared<torch::nn::Module>("Root");
  torch::nn::Linear lin{4, 3};
  std::shared_ptr<fx::GraphModule> gm;
  Fixture() {
    torch::manual_seed(0);
    lin = torch::nn::Linear(4, 3);
    root->register_module("lin", lin);
    root->register_parameter("scale", at::full({3}, 0.5f));
    // y = sum(relu(lin(x)) * scale + x.mean(1, keepdim=True))
    auto g = std::make_shared<Graph>();
    Node* x = g->placeholder("x");
    Node* l = g->call_module("lin", {x});
    Node* r = g->call_function("aten::relu", {l});
    Node* m = g->call_function("operator.mul", {r, g->get_attr("scale")});
    Node* mean = g->call_method("mean", {x, 1}, {{"keepdim", true}});
    Node* add = g->call_function("aten::add", {m, mean});
    g->output(g->call_method("sum", {add}));
    gm = std::make_shared<fx::GraphModule>(root, g);
  }
  at::Tensor eager(const at::Tensor& x) {
    return (at::relu(lin->forward(x)) * root->named_parameters()["scale"] + x.mean(1, true)).sum();
  }
};

std::vector<at::Tensor> grads_of(Fixture& f, const at::Tensor& loss, const at::Tensor& x) {
  std::vector<at::Tensor> inputs{x, f.lin->weight, f.lin->bias, f.root->named_parameters()["scale"]};
  return torch::autograd::grad({loss}, inputs);
}

TEST(Autograd, GradientsThroughForwardEqualEager) {
  Fixture f;
  at::Tensor x = at::randn({5, 4}).requires_grad_();
  at::Tensor y = f.gm->forward(x);
  at::Tensor e = f.eager(x);
  ASSERT_TRUE(y.requires_grad());
  EXPECT_TRUE(same(y, e));
  auto gy = grads_of(f, y, x);
  auto ge = grads_of(f, e, x);
  ASSERT_EQ(gy.size(), ge.size());
  for (size_t i = 0; i < gy.size(); ++i) EXPECT_TRUE(same(gy[i], ge[i])) << i;
}

TEST(Autograd, GradientsThroughTheInterpreterEqualEager) {
  Fixture f;
  at::Tensor x = at::randn({5, 4}).requires_grad_();
  at::Tensor y = fx::Interpreter(f.gm).run({x}).toTensor();
  at::Tensor e = f.eager(x);
  auto gy = grads_of(f, y, x);
  auto ge = grads_of(f, e, x);
  for (size_t i = 0; i < gy.size(); ++i) EXPECT_TRUE(same(gy[i], ge[i])) << i;
}

TEST(Autograd, BackwardAccumulatesIntoTheSharedParameters) {
  Fixture f;
  at::Tensor x = at::randn({2, 4});
  f.gm->forward(x).backward();
  ASSERT_TRUE(f.lin->weight.grad().defined());
  at::Tensor from_gm = f.lin->weight.grad().clone();
  f.lin->weight.mutable_grad().zero_();
  f.eager(x).backward();
  EXPECT_TRUE(same(from_gm, f.lin->weight.grad()));
}

}  // namespace
