// PassManager: order, constraints, fixed point, checks, rollback on failure.
#include <fx/passes.h>

#include "passes_test_util.h"

#include "random_graph.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace {

using fx_test::error_of;

using fx::NamedPass;
using fx::PassManager;
using fx::PassResult;

std::shared_ptr<fx::GraphModule> relu_relu() {
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* a = g->call_function("aten::relu", {x});
  fx::Node* b = g->call_function("aten::relu", {a});
  g->output(b);
  return std::make_shared<fx::GraphModule>(std::make_shared<torch::nn::Module>("Root"), g);
}

/// A pass that records its name into `log` and changes nothing.
NamedPass logging(const std::string& name, std::vector<std::string>& log) {
  return fx::make_pass(name, [name, &log](std::shared_ptr<fx::GraphModule> gm) {
    log.push_back(name);
    return PassResult{gm, false};
  });
}

TEST(PassManager, RunsPassesInOrderAndReportsModified) {
  std::vector<std::string> log;
  PassManager pm({logging("a", log), logging("b", log)});
  auto gm = relu_relu();
  PassResult r = pm(gm);
  EXPECT_EQ(log, (std::vector<std::string>{"a", "b"}));
  EXPECT_FALSE(r.modified);
  EXPECT_EQ(r.graph_module, gm);
}

TEST(PassManager, SolvesConstraintsStably) {
  std::vector<std::string> log;
  PassManager pm({logging("c", log), logging("b", log), logging("a", log)},
                 {fx::this_before_that_pass_constraint("a", "c")});
  pm(relu_relu());
  // "a" must precede "c"; otherwise the listed order is kept.
  EXPECT_EQ(log, (std::vector<std::string>{"b", "a", "c"}));
}

TEST(PassManager, ValidateConstraintsNamesBothPasses) {
  std::vector<std::string> log;
  PassManager pm({logging("b", log), logging("a", log)}, {fx::this_before_that_pass_constraint("a", "b")});
  EXPECT_EQ(error_of([&] { pm.validate_constraints(); }),
            "pass schedule constraint violated. Expected 'a' before 'b' but found 'b' at index 0 and 'a' at index 1 "
            "in pass list.");
}

TEST(PassManager, CircularConstraintsAreAnError) {
  std::vector<std::string> log;
  PassManager pm({logging("a", log), logging("b", log), logging("c", log)},
                 {fx::this_before_that_pass_constraint("a", "b"), fx::this_before_that_pass_constraint("b", "a")});
  EXPECT_EQ(error_of([&] { pm(relu_relu()); }),
            "Circular dependency detected within the following passes: ['a', 'b']");
  EXPECT_TRUE(log.empty());
}

TEST(PassManager, RepeatsUntilFixedPointWithinSteps) {
  // Each run removes one relu; the graph has two, so the third round changes nothing.
  int runs = 0;
  auto peel = fx::make_pass("peel", [&runs](std::shared_ptr<fx::GraphModule> gm) {
    ++runs;
    for (fx::Node* n : gm->graph().nodes()) {
      if (n->target() == "aten::relu") {
        n->replace_all_uses_with(n->args()[0].to_node());
        gm->graph().erase_node(n);
        return PassResult{gm, true};
      }
    }
    return PassResult{gm, false};
  });
  auto gm = relu_relu();
  PassManager pm({peel}, {}, /*steps=*/10);
  PassResult r = pm(gm);
  EXPECT_TRUE(r.modified);
  EXPECT_EQ(runs, 3);
  EXPECT_TRUE(gm->graph().find_nodes(fx::Opcode::CallFunction).empty());

  int limited_runs = 0;
  auto gm2 = relu_relu();
  PassManager one({fx::make_pass("count", [&](std::shared_ptr<fx::GraphModule> m) {
    ++limited_runs;
    return PassResult{m, true};
  })}, {}, /*steps=*/4);
  one(gm2);
  EXPECT_EQ(limited_runs, 4);  // always modified: stops at the step limit
  EXPECT_EQ(error_of([&] { one.set_steps(0); }), "PassManager: steps must be at least 1, got 0");
}

TEST(PassManager, ThrowingPassLeavesTheGraphAsItWas) {
  auto gm = relu_relu();
  const std::string before = gm->graph().str();
  auto half = fx::make_pass("half_edit", [](std::shared_ptr<fx::GraphModule> m) -> PassResult {
    fx::Node* relu = m->graph().find_nodes(fx::Opcode::CallFunction).front();
    relu->replace_all_uses_with(relu->args()[0].to_node());
    m->graph().erase_node(relu);
    throw fx::Error("something went wrong");
  });
  std::vector<std::string> log;
  PassManager pm({logging("first", log), half});
  EXPECT_EQ(error_of([&] { pm(gm); }),
            "An error occurred when running the 'half_edit' pass after the following passes: ['first']\n"
            "something went wrong");
  EXPECT_EQ(gm->graph().str(), before);
  gm->graph().lint();
  at::Tensor x = at::randn({3});
  EXPECT_TRUE(at::equal(gm->forward(x), at::relu(x)));
}

TEST(PassManager, CheckAfterEachPassRejectsABrokenGraph) {
  auto gm = relu_relu();
  const std::string before = gm->graph().str();
  // Moves the last relu before its input: use before definition.
  auto breaker = fx::make_pass("breaker", [](std::shared_ptr<fx::GraphModule> m) {
    auto relus = m->graph().find_nodes(fx::Opcode::CallFunction);
    relus[0]->prepend(relus[1]);
    return PassResult{m, true};
  });
  PassManager pm({breaker}, {}, 1, /*run_checks_after_each_pass=*/true);
  std::string err = error_of([&] { pm(gm); });
  EXPECT_EQ(err.rfind("An error occurred when running the 'breaker' pass after the following passes: []\n"
                      "the check after it failed: Argument 'relu' of Node 'relu_1' was used before it has been "
                      "defined!",
                      0),
            0u)
      << err;
  EXPECT_EQ(gm->graph().str(), before);

  // A user check runs too; suppressed failures are only counted.
  PassManager counted({fx::make_pass("noop", [](std::shared_ptr<fx::GraphModule> m) { return PassResult{m, false}; })},
                      {}, 1, true, /*suppress_check_failures=*/true);
  counted.add_checks([](fx::GraphModule& m) {
    if (m.graph().find_nodes(fx::Opcode::CallFunction, "aten::relu").size() > 1) throw fx::Error("two relus");
  });
  counted(gm);
  EXPECT_EQ(counted.suppressed_check_failures(), 2);  // before the passes and after "noop"
}

TEST(PassManager, PassBaseRunsRequiresAndEnsures) {
  struct Checked : fx::PassBase {
    std::vector<std::string>* log;
    std::string name() const override { return "Checked"; }
    void requires_(fx::GraphModule&) override { log->push_back("requires"); }
    PassResult call(std::shared_ptr<fx::GraphModule> gm) override {
      log->push_back("call");
      return {gm, false};
    }
    void ensures(fx::GraphModule&) override { log->push_back("ensures"); }
  };
  auto p = std::make_shared<Checked>();
  std::vector<std::string> log;
  p->log = &log;
  PassManager pm({fx::make_pass(p)});
  EXPECT_EQ(pm.passes()[0].name, "Checked");
  pm(relu_relu());
  EXPECT_EQ(log, (std::vector<std::string>{"requires", "call", "ensures"}));
}

TEST(PassManager, CseThenDceOnRandomGraphsKeepsOutputs) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    fx_test::RandomGraph r = fx_test::make_random_graph(seed);
    c10::IValue expected = r.gm->forward(r.inputs);
    PassManager pm({fx::make_pass(std::make_shared<fx::CSEPass>()),
                    fx::make_pass(std::make_shared<fx::DeadCodeEliminationPass>())},
                   {}, 3, true);
    PassResult res = pm(r.gm);
    c10::IValue got = res.graph_module->forward(r.inputs);
    auto e = expected.toTupleRef().elements();
    auto o = got.toTupleRef().elements();
    ASSERT_EQ(e.size(), o.size());
    for (size_t i = 0; i < e.size(); ++i)
      EXPECT_TRUE(at::allclose(e[i].toTensor(), o[i].toTensor(), 1e-6, 1e-6)) << "seed " << seed;
  }
}

TEST(PassManager, WholePipelineOnRandomGraphsKeepsOutputs) {
  // ShapeProp on meta tensors feeds remove_noops; constant folding, CSE,
  // normalization and DCE run to a fixed point with lint after every pass.
  size_t shrunk = 0;
  for (uint64_t seed = 200; seed < 220; ++seed) {
    fx_test::RandomGraph r = fx_test::make_random_graph(seed);
    auto expected = r.gm->forward(r.inputs).toTupleRef().elements().vec();
    const size_t before = r.gm->graph().nodes().size();
    std::vector<c10::IValue> inputs = r.inputs;
    PassManager pm({fx::make_pass(std::make_shared<fx::ShapePropPass>(inputs, /*meta=*/true)),
                    fx::make_pass("split_const_subgraphs",
                                  [](std::shared_ptr<fx::GraphModule> gm) {
                                    return fx::split_const_subgraphs(std::move(gm)).pass_result;
                                  }),
                    fx::make_pass(std::make_shared<fx::CSEPass>()), fx::make_pass("remove_noops", fx::remove_noops),
                    fx::make_pass(std::make_shared<fx::NormalizeArgs>()),
                    fx::make_pass(std::make_shared<fx::DeadCodeEliminationPass>())},
                   {}, /*steps=*/4, /*run_checks_after_each_pass=*/true);
    PassResult res = pm(r.gm);
    EXPECT_TRUE(res.modified);
    shrunk += before - res.graph_module->graph().nodes().size();
    auto got = res.graph_module->forward(r.inputs).toTupleRef().elements().vec();
    auto interp = fx::Interpreter(res.graph_module).run(r.inputs).toTupleRef().elements().vec();
    ASSERT_EQ(expected.size(), got.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_TRUE(at::allclose(expected[i].toTensor(), got[i].toTensor(), 1e-6, 1e-6)) << "seed " << seed;
      EXPECT_TRUE(at::equal(got[i].toTensor(), interp[i].toTensor())) << "seed " << seed;
    }
  }
  EXPECT_GT(shrunk, 200u);  // duplicates, dead code and constant chains are gone
}

}  // namespace
