// CSEPass: what it merges, what it never merges, values kept.
#include <fx/passes/cse.h>

#include "passes_test_util.h"

#include "random_graph.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>

namespace {

using fx_test::module_of;

/// "op target(args)" per node, names resolved: the graph's structure.
std::vector<std::string> structure(const fx::Graph& g) {
  std::vector<std::string> out;
  for (fx::Node* n : g.nodes())
    out.push_back(std::string(fx::to_string(n->op())) + " " + n->target() + fx::format_args(n->args()) +
                  (n->kwargs().empty() ? "" : fx::format_kwargs(n->kwargs())));
  return out;
}

TEST(CSEPass, MergesChainsOfDuplicatesInOneWalk) {
  // torch.fx's docstring example: b = a * a; c = a * a; return b + c, plus a
  // second level that only becomes identical once the first is merged.
  auto g = std::make_shared<fx::Graph>();
  fx::Node* a = g->placeholder("a");
  fx::Node* b = g->call_function("aten::mul", {a, a});
  fx::Node* c = g->call_function("aten::mul", {a, a});
  fx::Node* rb = g->call_function("aten::relu", {b});
  fx::Node* rc = g->call_function("aten::relu", {c});
  fx::Node* s = g->call_function("aten::add", {rb, rc}, {{"alpha", 2}});
  g->output(s);
  auto gm = module_of(g);
  at::Tensor x = at::randn({5});
  at::Tensor expected = gm->forward(x);

  fx::CSEPass cse;
  fx::PassResult r = cse(gm);
  EXPECT_TRUE(r.modified);
  EXPECT_EQ(cse.merged(), 2u);
  EXPECT_EQ(structure(gm->graph()),
            (std::vector<std::string>{"placeholder a()", "call_function aten::mul(%a, %a)",
                                      "call_function aten::relu(%mul,)", "call_function aten::add(%relu, %relu){alpha: 2}",
                                      "output output(%add,)"}));
  gm->graph().lint();
  EXPECT_TRUE(at::allclose(gm->forward(x), expected));
  EXPECT_FALSE(cse(gm).modified);  // idempotent
}

TEST(CSEPass, DistinguishesLiteralsKwargsAndFloatSigns) {
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* a = g->call_function("aten::mul", {x, 0.0});
  fx::Node* b = g->call_function("aten::mul", {x, -0.0});  // x * -0.0 differs in the sign of zeros
  fx::Node* c = g->call_function("aten::add", {x, x}, {{"alpha", 2}});
  fx::Node* d = g->call_function("aten::add", {x, x}, {{"alpha", 3}});
  fx::Node* e = g->call_function("aten::add", {x, x});
  fx::Node* f = g->call_function("aten::sum", {x, fx::Argument::list({0})});
  fx::Node* h = g->call_function("aten::sum", {x, fx::Argument::list({0})});
  g->output(fx::Argument::tuple({a, b, c, d, e, f, h}));
  auto gm = module_of(g);
  fx::CSEPass cse;
  cse(gm);
  EXPECT_EQ(cse.merged(), 1u);  // only the two sums
  EXPECT_EQ(gm->graph().output_node()->args()[0].items()[6].to_node(), f);
}

TEST(CSEPass, NeverMergesRandomInPlaceOrModuleCalls) {
  auto root = std::make_shared<torch::nn::Module>("Root");
  root->register_module("lin", torch::nn::Linear(3, 3));
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* r1 = g->call_function("aten::rand_like", {x});
  fx::Node* r2 = g->call_function("aten::rand_like", {x});
  fx::Node* d1 = g->call_function("aten::dropout", {x, 0.5, true});
  fx::Node* d2 = g->call_function("aten::dropout", {x, 0.5, true});
  fx::Node* n1 = g->call_function("aten::normal", {x});  // nondeterministic_seeded / Generator
  fx::Node* n2 = g->call_function("aten::normal", {x});
  fx::Node* m1 = g->call_module("lin", {x});
  fx::Node* m2 = g->call_module("lin", {x});
  g->output(fx::Argument::tuple({r1, r2, d1, d2, n1, n2, m1, m2}));
  auto gm = module_of(g, root);
  fx::CSEPass cse;
  EXPECT_FALSE(cse(gm).modified);
  EXPECT_TRUE(fx::is_random_function("aten::rand_like"));
  EXPECT_TRUE(fx::is_random_function("aten::normal"));
  EXPECT_TRUE(fx::is_random_function("aten::bernoulli.p"));
  EXPECT_FALSE(fx::is_random_function("aten::add"));

  // Extra banned ops, by name or with the overload.
  auto g2 = std::make_shared<fx::Graph>();
  fx::Node* y = g2->placeholder("y");
  fx::Node* a = g2->call_function("aten::relu", {y});
  fx::Node* b = g2->call_function("aten::relu", {y});
  g2->output(fx::Argument::tuple({a, b}));
  fx::CSEPass banned({"aten::relu"});
  EXPECT_FALSE(banned(module_of(g2)).modified);
}

TEST(CSEPass, MutatedValuesAreNeverMerged) {
  // a = x.clone(); a.add_(1); b = x.clone(): merging b into a would make b see the +1.
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* a = g->call_function("aten::clone", {x});
  fx::Node* v = g->call_method("view", {a, fx::Argument::list({-1})});
  g->call_function("aten::add_", {v, 1});  // writes to a through a view
  fx::Node* b = g->call_function("aten::clone", {x});
  fx::Node* c = g->call_function("aten::clone", {x});  // c and b may merge: neither is written
  fx::Node* i1 = g->call_function("operator.iadd", {c, 1});
  fx::Node* i2 = g->call_function("operator.iadd", {c, 1});
  g->output(fx::Argument::tuple({a, b, i1, i2}));
  auto gm = module_of(g);
  at::Tensor in = at::zeros({3});
  auto expected = gm->forward({in}).toTupleRef().elements().vec();
  fx::CSEPass cse;
  cse(gm);
  EXPECT_EQ(cse.merged(), 0u) << gm->graph().str();  // c is written by iadd; a through its view
  auto got = gm->forward({in}).toTupleRef().elements().vec();
  EXPECT_TRUE(at::equal(got[0].toTensor(), at::ones({3})));
  EXPECT_TRUE(at::equal(got[1].toTensor(), at::zeros({3})));
  EXPECT_TRUE(at::equal(expected[1].toTensor(), got[1].toTensor()));
}

TEST(CSEPass, MergesDuplicateGetAttrsAndWhatUsesThem) {
  auto root = std::make_shared<torch::nn::Module>("Root");
  root->register_buffer("w", at::randn({3}));
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* w1 = g->get_attr("w");
  fx::Node* w2 = g->get_attr("w");
  fx::Node* a = g->call_function("aten::mul", {x, w1});
  fx::Node* b = g->call_function("aten::mul", {x, w2});
  g->output(fx::Argument::tuple({a, b}));
  auto gm = module_of(g, root);
  fx::CSEPass cse;
  cse(gm);
  EXPECT_EQ(cse.merged(), 2u);
  EXPECT_EQ(gm->graph().find_nodes(fx::Opcode::GetAttr).size(), 1u);
}

TEST(CSEPass, RefusesABrokenGraphUnchanged) {
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* a = g->call_function("aten::relu", {x});
  fx::Node* b = g->call_function("aten::relu", {x});
  fx::Node* c = g->call_function("aten::add", {a, b});
  g->output(c);
  a->prepend(c);  // c now uses a and b before they are defined
  auto gm = module_of(g);
  const std::string before = g->str();
  EXPECT_THROW(fx::CSEPass()(gm), fx::LintError);
  EXPECT_EQ(g->str(), before);
}

TEST(CSEPass, RandomGraphsKeepTheirOutputs) {
  size_t merged = 0;
  for (uint64_t seed = 100; seed < 160; ++seed) {
    fx_test::RandomGraph r = fx_test::make_random_graph(seed);
    auto expected = r.gm->forward(r.inputs).toTupleRef().elements().vec();
    fx::CSEPass cse;
    cse(r.gm);
    merged += cse.merged();
    r.gm->graph().lint();
    auto got = r.gm->forward(r.inputs).toTupleRef().elements().vec();
    ASSERT_EQ(expected.size(), got.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(at::allclose(expected[i].toTensor(), got[i].toTensor(), 1e-6, 1e-6)) << "seed " << seed;
  }
  EXPECT_GT(merged, 60u);  // the generator makes ~6 duplicates per graph
}

}  // namespace
