// Transformer: a new GraphModule built by symbolic interpretation, with the
// same root attributes and overridable per-opcode methods.
#include "exec_test_util.h"

#include <fx/interpreter.h>

#include <torch/nn/modules/linear.h>

#include <gtest/gtest.h>

namespace {

using c10::IValue;
using fx::Argument;
using fx::Graph;
using fx::Node;
using fx_test::same;

struct Model {
  std::shared_ptr<torch::nn::Module> root = std::make_shared<torch::nn::Module>("Root");
  std::shared_ptr<fx::GraphModule> gm;
  Model() {
    root->register_module("lin", torch::nn::Linear(3, 3));
    root->register_buffer("bias", at::full({3}, 1.0f));
    auto g = std::make_shared<Graph>();
    Node* x = g->placeholder("x");
    Node* k = g->placeholder("k", Argument(2.0));
    Node* l = g->call_module("lin", {x});
    Node* add = g->call_function("aten::add", {l, g->get_attr("bias")});
    add->set_stack_trace("  File \"m.py\", line 4");
    Node* mul = g->call_function("aten::mul", {add, k});
    g->output(g->call_method("sigmoid", {mul}));
    gm = std::make_shared<fx::GraphModule>(root, g);
  }
};

TEST(Transformer, DefaultTransformCopiesTheGraph) {
  Model m;
  auto out = fx::Transformer(m.gm).transform();
  EXPECT_NE(&out->graph(), &m.gm->graph());
  EXPECT_EQ(out->code(), m.gm->code());
  EXPECT_EQ(out->graph().str(), m.gm->graph().str());
  EXPECT_EQ(out->class_name(), "GraphModule");
  // Same attributes, shared.
  EXPECT_EQ(out->get_submodule("lin").get(), m.gm->get_submodule("lin").get());
  EXPECT_TRUE(out->fetch_attr("bias").is_same(m.gm->fetch_attr("bias")));
  at::Tensor x = at::randn({2, 3});
  EXPECT_TRUE(same(out->forward(x), m.gm->forward(x)));
  // Node metadata is carried over.
  Node* add = out->graph().find_nodes(fx::Opcode::CallFunction, std::string("aten::add"))[0];
  EXPECT_EQ(add->stack_trace(), "  File \"m.py\", line 4");
}

/// Replaces aten::add by aten::sub, and sigmoid by relu.
struct AddToSub : fx::Transformer {
  using fx::Transformer::Transformer;
  Argument call_function(const std::string& target, const fx::ArgList& args, const fx::Kwargs& kwargs) override {
    if (target == "aten::add") return fx::Transformer::call_function("aten::sub", args, kwargs);
    return fx::Transformer::call_function(target, args, kwargs);
  }
  Argument call_method(const std::string& target, const fx::ArgList& args, const fx::Kwargs& kwargs) override {
    if (target == "sigmoid") return new_graph().call_function("aten::relu", args, kwargs);
    return fx::Transformer::call_method(target, args, kwargs);
  }
};

TEST(Transformer, OverridesRewriteNodes) {
  Model m;
  auto out = AddToSub(m.gm).transform();
  std::vector<std::string> names;
  for (Node* n : out->graph().nodes()) names.push_back(n->name());
  EXPECT_EQ(names, (std::vector<std::string>{"x", "k", "lin", "bias", "sub", "mul", "relu", "output"}));
  at::Tensor x = at::randn({2, 3});
  auto lin = m.root->named_children()["lin"]->as<torch::nn::Linear>();
  EXPECT_TRUE(same(out->forward(x), at::relu((lin->forward(x) - 1.0) * 2.0)));
  // The placeholder default survives.
  EXPECT_TRUE(same(out->forward(std::vector<IValue>{x, 3.0}).toTensor(), at::relu((lin->forward(x) - 1.0) * 3.0)));
  // The original is untouched.
  EXPECT_TRUE(same(m.gm->forward(x), at::sigmoid((lin->forward(x) + 1.0) * 2.0)));
}

/// Drops the get_attr: each use of the buffer becomes a literal.
struct InlineBias : fx::Transformer {
  using fx::Transformer::Transformer;
  Argument get_attr(const std::string& target, const fx::ArgList& args, const fx::Kwargs& kwargs) override {
    if (target == "bias") return Argument(5.0);
    return fx::Transformer::get_attr(target, args, kwargs);
  }
};

TEST(Transformer, TheNewModuleTakesOnlyWhatItsGraphUses) {
  Model m;
  auto out = InlineBias(m.gm).transform();
  EXPECT_EQ(out->named_buffers().size(), 0u);
  EXPECT_EQ(out->named_children().size(), 1u);
  at::Tensor x = at::randn({2, 3});
  auto lin = m.root->named_children()["lin"]->as<torch::nn::Linear>();
  EXPECT_TRUE(same(out->forward(x), at::sigmoid((lin->forward(x) + 5.0) * 2.0)));
}

}  // namespace
