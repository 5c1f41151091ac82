// The passes on graphs with run-time control flow (fx/control_flow.h): the
// PassManager runs passes inside branches and loop bodies; CSE, dead code
// elimination, remove_dropout, ShapeProp and optimize_for_inference reach
// them themselves; nothing is merged, folded or removed across a graph
// boundary. Graphs are built by hand; values are compared before and after.
#include "passes_test_util.h"

#include <fx/control_flow.h>
#include <fx/passes.h>
#include <fx/optimize/optimize_for_inference.h>
#include <fx/passes/shape_prop.h>

#include <gtest/gtest.h>
#include <torch/nn.h>

namespace {

using fx::Opcode;
using fx::PassResult;
using fx_test::error_of;
namespace nn = torch::nn;

using GM = std::shared_ptr<fx::GraphModule>;

size_t count(const fx::Graph& g, Opcode op, const std::string& target = "") {
  size_t n = 0;
  for (const fx::Node* node : g.nodes()) n += node->op() == op && (target.empty() || node->target() == target);
  return n;
}

/// true_graph(a, w): (a * w) + (a * w), with a dead neg(a) and a no-train dropout.
GM true_branch() {
  auto g = std::make_shared<fx::Graph>();
  fx::Node* a = g->placeholder("a");
  fx::Node* w = g->placeholder("w");
  fx::Node* m1 = g->call_function("aten::mul", {a, w});
  fx::Node* m2 = g->call_function("aten::mul", {a, w});
  g->call_function("aten::neg", {a});
  fx::Node* s = g->call_function("aten::add", {m1, m2});
  fx::Node* d = g->call_function("aten::dropout", {s, 0.5, false});
  g->output(d);
  return fx_test::module_of(g);
}

/// false_graph(a, w): a - w, or a.sum(0) (another shape) when `other_shape`.
GM false_branch(bool other_shape = false) {
  auto g = std::make_shared<fx::Graph>();
  fx::Node* a = g->placeholder("a");
  fx::Node* w = g->placeholder("w");
  g->output(other_shape ? g->call_function("aten::sum", {a, fx::Argument::list({0})})
                        : g->call_function("aten::sub", {a, w}));
  return fx_test::module_of(g);
}

/// forward(x, w): cond_0(x.sum() > 0, x, w) * w, with cond_0 called twice on
/// the same operands (two calls never merge).
GM cond_model(bool other_shape = false) {
  auto root = std::make_shared<nn::Module>("Root");
  root->register_module("cond_0", std::make_shared<fx::CondModule>(true_branch(), false_branch(other_shape), 1));
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* w = g->placeholder("w");
  fx::Node* pred = g->call_function("aten::gt", {g->call_function("aten::sum", {x}), 0});
  fx::Node* c1 = g->call_module("cond_0", {pred, x, w});
  fx::Node* c2 = g->call_module("cond_0", {pred, x, w});
  g->output(fx::Argument::tuple({c1, c2}));
  return fx_test::module_of(g, root);
}

/// loop_0: for i in range(n): acc = acc + w (a dead acc * 2 in the body).
GM loop_model() {
  auto body = std::make_shared<fx::Graph>();
  body->placeholder("i");
  fx::Node* acc = body->placeholder("acc");
  fx::Node* bw = body->placeholder("w");
  fx::Node* next = body->call_function("aten::add", {acc, bw});
  body->call_function("aten::mul", {acc, 2});
  body->output(fx::Argument::tuple({true, next}));
  auto root = std::make_shared<nn::Module>("Root");
  root->register_module("loop_0", std::make_shared<fx::WhileLoopModule>(fx_test::module_of(body), 1));
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* w = g->placeholder("w");
  g->output(g->call_module("loop_0", {3, true, x, w}));
  return fx_test::module_of(g, root);
}

fx::CondModule& cond_of(const GM& gm, const std::string& target = "cond_0") {
  return dynamic_cast<fx::CondModule&>(*gm->get_submodule(target));
}

/// Both branches' inputs: x with a positive and with a negative sum.
std::vector<std::vector<c10::IValue>> both_ways() {
  at::Tensor w = at::rand({3});
  return {{at::rand({3}) + 1, w}, {-at::rand({3}) - 1, w}};
}

void expect_same(const c10::IValue& a, const c10::IValue& b) {
  auto x = fx_test::flat(a), y = fx_test::flat(b);
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], 1e-5) << i;
}

// ---- PassManager ---------------------------------------------------------------------

TEST(ControlFlowPasses, PassManagerRunsEachPassOnSubgraphsInnerFirstThenTheModule) {
  // A cond nested in the outer cond's true branch.
  auto outer_true = true_branch();
  outer_true->add_submodule("cond_1", std::make_shared<fx::CondModule>(true_branch(), false_branch(), 1));
  fx::Node* out = outer_true->graph().output_node();
  fx::Node* inner = nullptr;
  {
    fx::Graph& g = outer_true->graph();
    auto at = g.inserting_before(out);
    auto ph = g.find_nodes(Opcode::Placeholder);
    inner = g.call_module("cond_1", {true, ph[0], ph[1]});
  }
  out->replace_input_with(out->args()[0].to_node(), inner);
  auto root = std::make_shared<nn::Module>("Root");
  root->register_module("cond_0", std::make_shared<fx::CondModule>(outer_true, false_branch(), 1));
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  g->output(g->call_module("cond_0", {true, x, x}));
  GM gm = fx_test::module_of(g, root);

  std::vector<fx::GraphModule*> seen;
  auto log = fx::make_pass("log", [&](GM m) {
    seen.push_back(m.get());
    return PassResult{m, m.get() == &cond_of(gm).false_graph()};  // only one graph changes
  });
  fx::PassManager pm({log});
  EXPECT_TRUE(pm.recurse_into_subgraphs());
  PassResult r = pm(gm);
  auto& cond1 = dynamic_cast<fx::CondModule&>(*outer_true->get_submodule("cond_1"));
  EXPECT_EQ(seen, (std::vector<fx::GraphModule*>{&cond1.true_graph(), &cond1.false_graph(), outer_true.get(),
                                                 &cond_of(gm).false_graph(), gm.get()}));
  EXPECT_TRUE(r.modified);  // the OR over every graph

  seen.clear();
  pm.set_recurse_into_subgraphs(false);
  EXPECT_FALSE(pm(gm).modified);
  EXPECT_EQ(seen, std::vector<fx::GraphModule*>{gm.get()});
}

TEST(ControlFlowPasses, PassManagerChecksEverySubgraphAndRestoresThemAllOnFailure) {
  GM gm = cond_model();
  fx::GraphModule& branch = cond_of(gm).true_graph();
  fx::GraphModule& other = cond_of(gm).false_graph();
  const std::string true_before = branch.graph().str(), false_before = other.graph().str(),
                    root_before = gm->graph().str();
  // Adds a node to every graph, and breaks the true branch (a use before its definition).
  auto edit_then_break = fx::make_pass("edit_then_break", [&](GM m) {
    fx::Graph& g = m->graph();
    {
      auto at = g.inserting_before(g.output_node());
      g.call_function("aten::relu", {g.find_nodes(Opcode::Placeholder)[0]});
    }
    if (m.get() == &branch) {
      fx::Node* add = g.find_nodes(Opcode::CallFunction, "aten::add")[0];
      add->prepend(add->next());  // the dropout now runs before the add it reads
    }
    return PassResult{m, true};
  });
  fx::PassManager pm({edit_then_break}, {}, 1, /*run_checks_after_each_pass=*/true);
  std::string err = error_of([&] { pm(gm); });
  EXPECT_NE(err.find("the check after it failed: subgraph 'cond_0.true_graph': Argument 'add' of Node 'dropout' was "
                     "used before it has been defined!"),
            std::string::npos)
      << err;
  EXPECT_EQ(branch.graph().str(), true_before);
  EXPECT_EQ(other.graph().str(), false_before);
  EXPECT_EQ(gm->graph().str(), root_before);

  // On a subgraph a pass must edit in place: a branch cannot be swapped.
  auto swap = fx::make_pass(
      "swap", [](GM m) { return PassResult{std::make_shared<fx::GraphModule>(m, m->graph_ptr()), false}; });
  err = error_of([&] { fx::PassManager({swap})(gm); });
  EXPECT_EQ(err,
            "An error occurred when running the 'swap' pass after the following passes: []\n"
            "on subgraph 'cond_0.true_graph': the pass returned a new module; on a subgraph a pass must edit the "
            "module in place");
}

// ---- CSE, DCE, remove_dropout -----------------------------------------------------------

TEST(ControlFlowPasses, CseMergesInsideEachBranchButNeverTwoCondCalls) {
  GM gm = cond_model();
  auto inputs = both_ways();
  std::vector<c10::IValue> expected;
  for (auto& in : inputs) expected.push_back(gm->forward(in));
  fx::CSEPass cse;
  PassResult r = cse(gm);
  EXPECT_TRUE(r.modified);
  EXPECT_EQ(cse.merged(), 1u);  // the second a * w in true_graph
  EXPECT_EQ(count(cond_of(gm).true_graph().graph(), Opcode::CallFunction, "aten::mul"), 1u);
  EXPECT_EQ(count(gm->graph(), Opcode::CallModule, "cond_0"), 2u);  // the two cond calls stay
  for (size_t i = 0; i < inputs.size(); ++i) expect_same(gm->forward(inputs[i]), expected[i]);

  // Through the manager: CSE runs once per graph (it handles subgraphs itself).
  GM again = cond_model();
  auto pass = std::make_shared<fx::CSEPass>();
  fx::PassManager pm({fx::make_pass(pass)});
  EXPECT_TRUE(pm.passes()[0].handles_subgraphs);
  EXPECT_TRUE(pm(again).modified);
  EXPECT_EQ(pass->merged(), 1u);
}

TEST(ControlFlowPasses, DeadCodeEliminationCleansBranchesAndLoopBodies) {
  GM gm = loop_model();
  at::Tensor x = at::rand({3}), w = at::rand({3});
  c10::IValue expected = gm->forward({x, w});
  fx::GraphModule& body = dynamic_cast<fx::WhileLoopModule&>(*gm->get_submodule("loop_0")).body();
  ASSERT_EQ(count(body.graph(), Opcode::CallFunction, "aten::mul"), 1u);
  EXPECT_TRUE(fx::eliminate_dead_code(gm).modified);
  EXPECT_EQ(count(body.graph(), Opcode::CallFunction, "aten::mul"), 0u);   // the dead acc * 2
  EXPECT_EQ(count(body.graph(), Opcode::Placeholder), 3u);                // the body's interface stays
  EXPECT_EQ(count(gm->graph(), Opcode::CallModule, "loop_0"), 1u);
  expect_same(gm->forward({x, w}), expected);
  EXPECT_TRUE(at::allclose(expected.toTensor(), x + 3 * w));

  GM c = cond_model();
  EXPECT_TRUE(fx::eliminate_dead_code(c).modified);
  EXPECT_EQ(count(cond_of(c).true_graph().graph(), Opcode::CallFunction, "aten::neg"), 0u);
  EXPECT_FALSE(fx::eliminate_dead_code(c).modified);
}

TEST(ControlFlowPasses, RemoveDropoutReachesBranches) {
  GM gm = cond_model();
  auto inputs = both_ways();
  c10::IValue expected = gm->forward(inputs[0]);
  EXPECT_TRUE(fx::remove_dropout(gm).modified);
  EXPECT_EQ(count(cond_of(gm).true_graph().graph(), Opcode::CallFunction, "aten::dropout"), 0u);
  expect_same(gm->forward(inputs[0]), expected);
}

TEST(ControlFlowPasses, ConstantFoldingNeverFoldsACondAndFoldsInsideBranchesThroughTheManager) {
  // Root: cond_0(True, c, c) on a constant c: the call is not folded. The
  // true branch computes relu(k) on its own constant k: folded in the branch.
  auto t = std::make_shared<fx::Graph>();
  t->placeholder("a");
  t->placeholder("b");
  fx::Node* k = t->get_attr("k");
  t->output(t->call_function("aten::relu", {k}));
  auto troot = std::make_shared<nn::Module>("Branch");
  troot->register_buffer("k", at::tensor({-1.0, 2.0}));
  GM tg = fx_test::module_of(t, troot);
  auto root = std::make_shared<nn::Module>("Root");
  root->register_module("cond_0", std::make_shared<fx::CondModule>(tg, false_branch(), 1));
  root->register_buffer("c", at::tensor({1.0, 1.0}));
  auto g = std::make_shared<fx::Graph>();
  fx::Node* c = g->get_attr("c");
  g->output(g->call_module("cond_0", {true, c, c}));
  GM gm = fx_test::module_of(g, root);

  fx::ConstFoldResult root_only = fx::split_const_subgraphs(gm);
  EXPECT_FALSE(root_only.pass_result.modified);
  EXPECT_EQ(count(gm->graph(), Opcode::CallModule, "cond_0"), 1u);

  fx::PassManager pm({fx::make_pass("const_fold", [](GM m) { return fx::split_const_subgraphs(m).pass_result; })});
  EXPECT_TRUE(pm(gm).modified);
  EXPECT_EQ(count(tg->graph(), Opcode::CallFunction), 0u);
  EXPECT_EQ(count(gm->graph(), Opcode::CallModule, "cond_0"), 1u);
  EXPECT_TRUE(at::equal(gm->forward(std::vector<c10::IValue>{}).toTensor(), at::tensor({0.0, 2.0})));
}

// ---- ShapeProp ---------------------------------------------------------------------------

const fx::TensorMetadata* meta_of(const fx::Node* n) {
  auto it = n->meta().find("tensor_meta");
  return it == n->meta().end() ? nullptr : std::any_cast<fx::TensorMetadata>(&it->second);
}

TEST(ControlFlowPasses, ShapePropReachesBothBranchesAndKeepsACondsMetaWhenTheyAgree) {
  for (bool meta : {false, true}) {
    GM gm = cond_model();
    auto inputs = both_ways();
    fx::ShapeProp prop(gm);
    c10::IValue out = meta ? prop.propagate_meta(inputs[0]) : prop.propagate(inputs[0]);
    if (!meta) expect_same(out, gm->forward(inputs[0]));
    for (fx::GraphModule* branch : {&cond_of(gm).true_graph(), &cond_of(gm).false_graph()})
      for (fx::Node* n : branch->graph().nodes()) {
        if (n->op() == Opcode::Output) continue;
        const fx::TensorMetadata* m = meta_of(n);
        ASSERT_NE(m, nullptr) << n->name() << " meta " << meta;
        EXPECT_EQ(m->shape, std::vector<int64_t>{3}) << n->name();
      }
    const fx::TensorMetadata* m = meta_of(gm->graph().find_nodes(Opcode::CallModule)[0]);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->shape, std::vector<int64_t>{3});
  }
  // Branches of different shapes: the cond's shape depends on the data.
  GM gm = cond_model(/*other_shape=*/true);
  auto inputs = both_ways();
  fx::ShapeProp(gm).propagate(inputs[0]);
  fx::Node* sum = cond_of(gm).false_graph().graph().find_nodes(Opcode::CallFunction, "aten::sum")[0];
  ASSERT_NE(meta_of(sum), nullptr);
  EXPECT_TRUE(meta_of(sum)->shape.empty());  // [3] summed over dim 0: a scalar, where true_graph gives [3]
  EXPECT_EQ(meta_of(gm->graph().find_nodes(Opcode::CallModule)[0]), nullptr);
}

TEST(ControlFlowPasses, ShapePropGivesALoopBodyMetaWhenItHoldsForEveryIteration) {
  GM gm = loop_model();
  fx::ShapeProp(gm).propagate({at::rand({2, 3}), at::rand({3})});
  fx::GraphModule& body = dynamic_cast<fx::WhileLoopModule&>(*gm->get_submodule("loop_0")).body();
  fx::Node* add = body.graph().find_nodes(Opcode::CallFunction, "aten::add")[0];
  ASSERT_NE(meta_of(add), nullptr);
  EXPECT_EQ(meta_of(add)->shape, (std::vector<int64_t>{2, 3}));
  ASSERT_NE(meta_of(gm->graph().find_nodes(Opcode::CallModule)[0]), nullptr);

  // Carried [3] + w [2, 3] grows to [2, 3]: the first iteration's meta would lie.
  fx::ShapeProp(gm).propagate({at::rand({3}), at::rand({2, 3})});
  EXPECT_EQ(meta_of(add), nullptr);
  EXPECT_EQ(meta_of(gm->graph().find_nodes(Opcode::CallModule)[0]), nullptr);
}

// ---- optimize_for_inference --------------------------------------------------------------

/// branch(a): relu(bn(conv(a))) with leaves of its own.
GM conv_bn_relu_branch(int64_t kernel) {
  auto m = std::make_shared<nn::Module>("Branch");
  m->register_module("conv", nn::Conv2d(nn::Conv2dOptions(3, 4, kernel).padding(kernel / 2).bias(false)).ptr());
  m->register_module("bn", fx_test::random_batch_norm(4).ptr());
  m->register_module("relu", nn::ReLU().ptr());
  m->eval();
  auto g = std::make_shared<fx::Graph>();
  fx::Node* a = g->placeholder("a");
  g->output(g->call_module("relu", {g->call_module("bn", {g->call_module("conv", {a})})}));
  return fx_test::module_of(g, m);
}

TEST(ControlFlowPasses, OptimizeForInferenceRewritesBranchesOnCopiesAndKeepsTheValues) {
  auto root = std::make_shared<nn::Module>("Root");
  root->register_module("cond_0",
                        std::make_shared<fx::CondModule>(conv_bn_relu_branch(3), conv_bn_relu_branch(1), 1));
  root->eval();
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* pred = g->call_function("aten::gt", {g->call_function("aten::sum", {x}), 0});
  g->output(g->call_module("cond_0", {pred, x}));
  GM gm = fx_test::module_of(g, root);
  const std::string true_before = cond_of(gm).true_graph().graph().str();

  at::Tensor pos = at::rand({1, 3, 8, 8}), neg = -at::rand({1, 3, 8, 8});
  at::Tensor want_pos = gm->forward(pos), want_neg = gm->forward(neg);
  fx::OptimizeReport report;
  GM opt = fx::optimize_for_inference(gm, {}, &report);
  EXPECT_TRUE(at::allclose(opt->forward(pos), want_pos, 1e-4, 1e-4));
  EXPECT_TRUE(at::allclose(opt->forward(neg), want_neg, 1e-4, 1e-4));
  EXPECT_EQ(report.folded_batch_norms, 2u);  // one per branch
  EXPECT_EQ(report.frozen_modules, 6u);
  for (fx::GraphModule* b : {&cond_of(opt).true_graph(), &cond_of(opt).false_graph()}) {
    EXPECT_EQ(count(b->graph(), Opcode::CallModule), 0u) << b->graph().str();
    EXPECT_EQ(count(b->graph(), Opcode::CallFunction, "aten::batch_norm"), 0u);
  }
  // The input module's branches are untouched.
  EXPECT_NE(&cond_of(opt), &cond_of(gm));
  EXPECT_EQ(cond_of(gm).true_graph().graph().str(), true_before);
  EXPECT_TRUE(at::allclose(gm->forward(pos), want_pos));
}

// ---- delete_all_unused_submodules ----------------------------------------------------------

TEST(ControlFlowPasses, UnusedSubmodulesAreDeletedGraphByGraphKeepingLeavesUsedInBranches) {
  GM branch = conv_bn_relu_branch(1);
  branch->add_submodule("spare", nn::ReLU().ptr());  // in the branch, never called
  auto root = std::make_shared<nn::Module>("Root");
  root->register_module("cond_0", std::make_shared<fx::CondModule>(branch, conv_bn_relu_branch(3), 1));
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  g->output(g->call_module("cond_0", {true, x}));
  GM gm = fx_test::module_of(g, root);
  gm->add_submodule("unused", nn::ReLU().ptr());

  // The root keeps everything below a called module (its leaves are the branch's children).
  gm->delete_all_unused_submodules();
  EXPECT_THROW(gm->get_submodule("unused"), fx::Error);
  EXPECT_NO_THROW(gm->get_submodule("cond_0.true_graph.conv"));
  EXPECT_NO_THROW(gm->get_submodule("cond_0.true_graph.spare"));

  // Dead code elimination with delete_unused_submodules cleans each graph.
  fx::eliminate_dead_code(gm, /*delete_unused_submodules=*/true);
  EXPECT_THROW(gm->get_submodule("cond_0.true_graph.spare"), fx::Error);
  for (const char* leaf : {"conv", "bn", "relu"}) EXPECT_NO_THROW(branch->get_submodule(leaf)) << leaf;
  at::Tensor in = at::rand({1, 3, 4, 4});
  EXPECT_TRUE(gm->forward(in).defined());
}

// ---- normalize, drawing, summary ---------------------------------------------------------

TEST(ControlFlowPasses, NormalizeDrawerAndSummaryTakeACondCallAsOneNode) {
  GM gm = cond_model();
  auto inputs = both_ways();
  std::vector<c10::IValue> expected;
  for (auto& in : inputs) expected.push_back(gm->forward(in));
  fx::PassManager pm({fx::make_pass(std::make_shared<fx::NormalizeArgs>())});
  pm(gm);
  for (size_t i = 0; i < inputs.size(); ++i) expect_same(gm->forward(inputs[i]), expected[i]);

  const std::string dot = fx::FxGraphDrawer(gm, "m").get_dot_graph();
  EXPECT_NE(dot.find("cond_0"), std::string::npos);
  fx::ShapeProp(gm).propagate(inputs[0]);
  fx::ModelSummary summary = fx::summarize_model(*gm);
  EXPECT_EQ(summary.nodes.size(), gm->graph().nodes().size());  // the cond calls are rows like any module call
}

}  // namespace
