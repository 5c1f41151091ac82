// Cleanup passes: eliminate_dead_code as a pass, remove_dropout, remove_noops.
#include <fx/passes/dead_code.h>
#include <fx/passes/remove_dropout.h>
#include <fx/passes/remove_noops.h>
#include <fx/tensor_meta.h>
#include <fx/trace.h>

#include "passes_test_util.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn.h>

namespace {

using fx_test::module_of;

std::vector<std::string> targets(const fx::Graph& g) {
  std::vector<std::string> out;
  for (fx::Node* n : g.nodes()) out.push_back(n->target());
  return out;
}

TEST(DeadCodeEliminationPass, ErasesDeadNodesAndOptionallyUnusedModules) {
  auto root = std::make_shared<torch::nn::Module>("Root");
  root->register_module("lin", torch::nn::Linear(2, 2));
  root->register_buffer("unused", at::ones({2}));
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* w = g->get_attr("unused");
  g->call_function("aten::mul", {x, w});  // dead, and so is w after it
  fx::Node* keep = g->call_function("aten::add_", {x, 1});  // in place: kept without users
  (void)keep;
  g->output(x);
  auto gm = module_of(g, root);
  fx::DeadCodeEliminationPass dce(/*delete_unused_submodules=*/true);
  fx::PassResult r = dce(gm);
  EXPECT_TRUE(r.modified);
  EXPECT_EQ(targets(gm->graph()), (std::vector<std::string>{"x", "aten::add_", "output"}));
  EXPECT_FALSE(dce(gm).modified);
  EXPECT_EQ(gm->named_children().size(), 0u);  // "lin": no node calls it
  EXPECT_EQ(gm->named_buffers().size(), 1u);   // torch.fx rules: attributes stay
}

TEST(DeadCodeEliminationPass, KeepsInPlaceBuiltins) {
  // x += 1 whose result nobody reads still writes x (torch.fx's DCE would drop it).
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* c = g->call_function("aten::clone", {x});
  g->call_function("operator.iadd", {c, 1});
  g->output(c);
  auto gm = module_of(g);
  EXPECT_FALSE(fx::eliminate_dead_code(gm).modified);
  EXPECT_TRUE(at::equal(gm->forward(at::zeros({2})), at::ones({2})));
}

struct WithDropout : torch::nn::Module {
  WithDropout() {
    lin = register_module("lin", torch::nn::Linear(4, 4));
    drop = register_module("drop", torch::nn::Dropout(0.5));
  }
  at::Tensor forward(at::Tensor x) {
    x = drop(lin(x));
    x = torch::dropout(x, 0.3, is_training());
    return torch::relu(torch::nn::functional::dropout(x, torch::nn::functional::DropoutFuncOptions().p(0.2).training(is_training())));
  }
  torch::nn::Linear lin{nullptr};
  torch::nn::Dropout drop{nullptr};
};

TEST(RemoveDropout, RemovesModulesAndFunctionalDropouts) {
  torch::manual_seed(0);
  auto m = std::make_shared<WithDropout>();
  m->eval();
  at::Tensor x = at::randn({2, 4});
  auto gm = fx::symbolic_trace(m, {x});
  at::Tensor expected = m->forward(x);
  size_t before = gm->graph().nodes().size();
  fx::PassResult r = fx::remove_dropout(gm);
  EXPECT_TRUE(r.modified);
  for (fx::Node* n : gm->graph().nodes()) EXPECT_EQ(n->target().find("dropout"), std::string::npos) << n->format_node();
  EXPECT_LT(gm->graph().nodes().size(), before);
  gm->graph().lint();
  EXPECT_TRUE(at::allclose(gm->forward(x), expected));
  // In training mode the module would drop values; the pass output is the inference graph.
  gm->train();
  EXPECT_TRUE(at::allclose(gm->forward(x), expected));
  EXPECT_FALSE(fx::remove_dropout(gm).modified);
}

TEST(RemoveDropout, CallMethodAndCallModuleForms) {
  auto root = std::make_shared<torch::nn::Module>("Root");
  root->register_module("d", torch::nn::Dropout2d(0.1));
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* a = g->call_module("d", {x});
  fx::Node* b = g->call_method("dropout", {a, 0.5, false});
  fx::Node* c = g->call_function("aten::feature_alpha_dropout", {b, 0.5, false});
  g->output(c);
  auto gm = module_of(g, root);
  fx::remove_dropout(gm);
  EXPECT_EQ(targets(gm->graph()), (std::vector<std::string>{"x", "output"}));
  EXPECT_EQ(gm->named_children().size(), 0u);  // the Dropout2d module went with its node
}

/// Sets tensor_meta on every node from one real run (what ShapeProp does).
void annotate(fx::GraphModule& gm, const std::vector<at::Tensor>& inputs) {
  std::map<const fx::Node*, at::Tensor> values;
  size_t i = 0;
  for (fx::Node* n : gm.graph().nodes()) {
    at::Tensor v;
    if (n->op() == fx::Opcode::Placeholder) {
      v = inputs[i++];
    } else if (n->op() == fx::Opcode::CallFunction || n->op() == fx::Opcode::CallMethod) {
      std::vector<c10::IValue> args;
      for (const auto& a : n->args())
        args.push_back(a.to_ivalue([&](fx::Node* in) -> c10::IValue { return values.at(in); }));
      c10::IValue out = n->op() == fx::Opcode::CallFunction ? fx::call_function(n->target(), args)
                                                             : fx::call_method(n->target(), args);
      v = out.toTensor();
    } else {
      continue;
    }
    values[n] = v;
    n->meta()["tensor_meta"] = fx::TensorMetadata::from_tensor(v);
  }
}

TEST(RemoveNoops, RemovesProvenIdentitiesOnly) {
  auto root = std::make_shared<torch::nn::Module>("Root");
  root->register_module("ident", torch::nn::Identity());
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* bits = g->placeholder("bits");
  fx::Node* ones_col = g->placeholder("ones_col");
  fx::Node* m1 = g->call_function("aten::mul", {x, 1});
  fx::Node* a0 = g->call_method("add", {m1, 0});
  fx::Node* d1 = g->call_function("aten::div", {a0, 1.0});
  fx::Node* floor_div = g->call_function("aten::div", {d1, 1.0}, {{"rounding_mode", "floor"}});  // rounds: kept
  fx::Node* promoted = g->call_function("aten::add", {bits, 0});  // bool + 0 is int64: kept
  fx::Node* bcast = g->call_function("aten::mul", {x, ones_col});  // no literal: kept
  fx::Node* v = g->call_method("view", {floor_div, fx::Argument::list({2, 3})});  // same shape: removed
  fx::Node* r = g->call_function("aten::relu", {v});
  fx::Node* id = g->call_module("ident", {r});
  fx::Node* written = g->call_function("aten::mul", {x, 1});  // fresh tensor written in place: kept
  fx::Node* w = g->call_function("aten::add_", {written, 1});
  g->output(fx::Argument::tuple({id, promoted, bcast, w}));
  auto gm = module_of(g, root);
  at::Tensor xv = at::randn({2, 3}), bv = at::rand({2, 3}) > 0.5, ov = at::ones({2, 1});
  annotate(*gm, {xv, bv, ov});

  at::Tensor x_copy = xv.clone();
  auto expected = gm->forward({xv.clone(), bv, ov}).toTupleRef().elements().vec();
  EXPECT_TRUE(fx::remove_noops(gm).modified);
  EXPECT_EQ(targets(gm->graph()),
            (std::vector<std::string>{"x", "bits", "ones_col", "aten::div", "aten::add", "aten::mul", "aten::relu",
                                      "aten::mul", "aten::add_", "output"}));
  gm->graph().lint();
  auto got = gm->forward({xv, bv, ov}).toTupleRef().elements().vec();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(at::equal(got[i].toTensor(), expected[i].toTensor())) << i;
  EXPECT_TRUE(at::equal(xv, x_copy));  // the in-place add still writes a copy, not x
  EXPECT_EQ(got[1].toTensor().scalar_type(), at::kLong);
  EXPECT_EQ(gm->named_children().size(), 0u);

  // Without tensor_meta nothing arithmetic is removed.
  auto g2 = std::make_shared<fx::Graph>();
  fx::Node* y = g2->placeholder("y");
  g2->output(g2->call_function("aten::mul", {y, 1}));
  EXPECT_FALSE(fx::remove_noops(module_of(g2)).modified);
}

}  // namespace
