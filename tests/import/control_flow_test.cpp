// Run-time control flow imported as sub-GraphModules (fx/control_flow.h),
// rank/dtype folding from example inputs, leaves without forward and
// overloaded forwards: structure, and numbers against eager PyTorch on both
// branches / several trip counts.
#include "cases.h"

#include <fx/control_flow.h>
#include <fx/graph_module.h>
#include <fx/import.h>
#include <fx/interpreter.h>
#include <fx/shape_guard.h>
#include <fx/tensor_file.h>

#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <string>
#include <vector>

namespace {

std::string path(const std::string& name) { return fx::testing::control_flow_cases_dir() + "/" + name; }

bool exists(const std::string& p) { return std::ifstream(p).good(); }

// Runs `gm` on NAME.input.pt (and NAME.input2.pt when there is one) through
// forward() and the Interpreter and compares the whole outputs with eager's.
void check_values(const std::shared_ptr<fx::GraphModule>& gm, const std::string& name) {
  for (const std::string suffix : {"", "2"}) {
    const std::string in = path(name + ".input" + suffix + ".pt");
    if (!exists(in)) continue;
    auto inputs = fx::load_inputs(in);
    c10::IValue expected = fx::load_value(path(name + ".output" + suffix + ".pt"));
    auto d = fx::compare_values(gm->forward(inputs), expected);
    EXPECT_LE(d.max_abs_diff, 1e-5 * std::max(1.0, d.max_abs_expected)) << name << suffix << " forward";
    auto di = fx::compare_values(fx::Interpreter(gm).run(inputs), expected);
    EXPECT_LE(di.max_abs_diff, 1e-5 * std::max(1.0, di.max_abs_expected)) << name << suffix << " interpreter";
  }
}

std::shared_ptr<fx::GraphModule> import_case(const std::string& name, fx::ImportOptions options = {}) {
  auto gm = fx::import_torchscript(path(name + ".pt"), options);
  gm->graph().lint();
  fx::for_each_subgraph(*gm, [](const std::string&, fx::GraphModule& sub) { sub.graph().lint(); });
  return gm;
}

std::vector<std::string> targets(const fx::Graph& g, fx::Opcode op) {
  std::vector<std::string> out;
  for (fx::Node* n : g.nodes())
    if (n->op() == op) out.push_back(n->target());
  return out;
}

bool has_target_prefix(const fx::Graph& g, const std::string& prefix) {
  for (fx::Node* n : g.nodes())
    if (n->target().rfind(prefix, 0) == 0) return true;
  return false;
}

std::vector<std::string> subgraph_paths(fx::GraphModule& gm) {
  std::vector<std::string> out;
  fx::for_each_subgraph(gm, [&](const std::string& p, fx::GraphModule&) { out.push_back(p); });
  return out;
}

TEST(ControlFlow, GeneratorRan) {
  ASSERT_FALSE(fx::testing::control_flow_cases_dir().empty()) << "python/make_control_flow_cases.py failed";
}

TEST(ControlFlow, DataDependentIfBecomesACondWithTwoBranchGraphs) {
  auto gm = import_case("data_if");
  ASSERT_EQ(targets(gm->graph(), fx::Opcode::CallModule), std::vector<std::string>{"cond_0"});
  fx::Node* cond = gm->graph().find_nodes(fx::Opcode::CallModule, "cond_0").at(0);
  // (predicate, x): the branches read x, and the weights come from get_attr inside.
  ASSERT_EQ(cond->args().size(), 2u);
  EXPECT_EQ(cond->args()[1].to_node()->op(), fx::Opcode::Placeholder);
  auto module = std::dynamic_pointer_cast<fx::CondModule>(gm->get_submodule("cond_0"));
  ASSERT_TRUE(module);
  EXPECT_EQ(targets(module->true_graph().graph(), fx::Opcode::CallModule), std::vector<std::string>{"lin"});
  EXPECT_TRUE(has_target_prefix(module->false_graph().graph(), "aten::mul"));
  EXPECT_FALSE(has_target_prefix(module->false_graph().graph(), "lin"));
  EXPECT_EQ(module->num_results(), 1u);
  // The leaf is the model's own module, shared with the branch.
  EXPECT_EQ(module->true_graph().get_submodule("lin").get(), gm->get_submodule("cond_0.true_graph.lin").get());
  EXPECT_EQ(subgraph_paths(*gm), (std::vector<std::string>{"cond_0.true_graph", "cond_0.false_graph"}));
  check_values(gm, "data_if");  // input: the true branch; input2: the false one
}

TEST(ControlFlow, PrintReadableShowsTheBranchClasses) {
  auto gm = import_case("data_if");
  const std::string text = gm->print_readable();
  EXPECT_NE(text.find("cond_0 = self.cond_0("), std::string::npos) << text;
  EXPECT_NE(text.find("class true_graph_0(torch.nn.Module)"), std::string::npos) << text;
  EXPECT_NE(text.find("class false_graph_0(torch.nn.Module)"), std::string::npos) << text;
}

TEST(ControlFlow, NestedIfsAndSeveralResults) {
  auto gm = import_case("nested_if");
  // x.size(0) > 2 stays a condition (sizes are never specialised); a nested
  // data-dependent if lives in its true branch.
  EXPECT_EQ(subgraph_paths(*gm), (std::vector<std::string>{"cond_1.true_graph.cond_0.true_graph",
                                                          "cond_1.true_graph.cond_0.false_graph", "cond_1.true_graph",
                                                          "cond_1.false_graph"}));
  auto module = std::dynamic_pointer_cast<fx::CondModule>(gm->get_submodule("cond_1"));
  ASSERT_TRUE(module);
  EXPECT_EQ(module->num_results(), 2u);
  EXPECT_EQ(gm->graph().find_nodes(fx::Opcode::CallFunction, "operator.getitem").size(), 2u);
  check_values(gm, "nested_if");
}

TEST(ControlFlow, LoopOverATensorsLengthAppendsToOneRunTimeList) {
  auto gm = import_case("loop_over_length");
  EXPECT_EQ(targets(gm->graph(), fx::Opcode::CallModule), std::vector<std::string>{"loop_0"});
  EXPECT_EQ(gm->graph().find_nodes(fx::Opcode::CallFunction, "prim::ListConstruct.Tensor").size(), 1u);
  auto loop = std::dynamic_pointer_cast<fx::WhileLoopModule>(gm->get_submodule("loop_0"));
  ASSERT_TRUE(loop);
  EXPECT_EQ(loop->num_carried(), 0u);
  EXPECT_TRUE(has_target_prefix(loop->body().graph(), "aten::append"));
  check_values(gm, "loop_over_length");  // 3 and 5 iterations
  // A second forward does not see the first one's appends.
  auto inputs = fx::load_inputs(path("loop_over_length.input.pt"));
  EXPECT_EQ(gm->forward(inputs).toTensor().size(0), 3);
  EXPECT_EQ(gm->forward(inputs).toTensor().size(0), 3);
}

TEST(ControlFlow, CarriedValuesAndWhileLoops) {
  auto gm = import_case("carried_loop");
  auto loop = std::dynamic_pointer_cast<fx::WhileLoopModule>(gm->get_submodule("loop_0"));
  ASSERT_TRUE(loop);
  EXPECT_EQ(loop->num_carried(), 1u);
  EXPECT_EQ(targets(loop->body().graph(), fx::Opcode::CallModule), std::vector<std::string>{"cell"});
  check_values(gm, "carried_loop");
  auto w = import_case("while_data");
  ASSERT_TRUE(std::dynamic_pointer_cast<fx::WhileLoopModule>(w->get_submodule("loop_0")));
  check_values(w, "while_data");  // (x halved n times, n): the int compared exactly
}

TEST(ControlFlow, LoopLeftEarlyByTheDataUnrollsUntilTheConditionIsDataDependent) {
  // for i in range(4): if x.sum() > 4 i: break — TorchScript makes it a
  // while loop with a counter. Its first iteration is unrolled (the break
  // test becomes cond_0); from then on the condition is data dependent, so
  // the rest runs as loop_0: trip count INT64_MAX - 1, counter starting at 1.
  auto gm = import_case("break_loop");
  EXPECT_EQ(targets(gm->graph(), fx::Opcode::CallModule), (std::vector<std::string>{"cond_0", "loop_0"}));
  fx::Node* node = gm->graph().find_nodes(fx::Opcode::CallModule, "loop_0").at(0);
  ASSERT_EQ(node->args().size(), 4u);  // (trip count, condition, x, counter)
  EXPECT_EQ(node->args()[0].to_int(), std::numeric_limits<int64_t>::max() - 1);
  EXPECT_EQ(node->args()[3].to_int(), 1);
  check_values(gm, "break_loop");  // input: runs all 4 (x += 0+1+2+3); input2: breaks at once
}

TEST(ControlFlow, EarlyReturnOptionalArgumentsAndDictResults) {
  for (const std::string name : {"early_return", "optional_arg", "dict_out"}) {
    SCOPED_TRACE(name);
    check_values(import_case(name), name);
  }
}

TEST(ControlFlow, InterpolateKeepsRankChecksAsConditionsWithoutExampleInputs) {
  auto gm = import_case("interpolate");
  EXPECT_FALSE(subgraph_paths(*gm).empty());
  check_values(gm, "interpolate");
}

TEST(ControlFlow, ExampleInputsFoldRankChecksAndGuardTheRank) {
  fx::ImportOptions options;
  options.example_inputs = fx::load_inputs(path("interpolate.input.pt"));
  auto gm = import_case("interpolate", options);
  EXPECT_TRUE(subgraph_paths(*gm).empty()) << gm->code();
  EXPECT_TRUE(targets(gm->graph(), fx::Opcode::CallModule) == std::vector<std::string>{"conv"}) << gm->code();
  EXPECT_TRUE(has_target_prefix(gm->graph(), "aten::upsample_bilinear2d")) << gm->code();
  fx::Node* x = gm->graph().find_nodes(fx::Opcode::Placeholder).at(0);
  const fx::ShapeGuard* guard = fx::shape_guard_of(*x);
  ASSERT_NE(guard, nullptr);
  EXPECT_EQ(guard->shape, (std::vector<int64_t>{-1, -1, -1, -1}));
  check_values(gm, "interpolate");  // input2 has another batch and size: sizes stay dynamic
  // Another rank is refused before anything runs, never computed wrongly.
  try {
    gm->forward({at::zeros({3, 5, 6})});
    FAIL() << "a 3-D input ran a graph folded for 4-D inputs";
  } catch (const fx::ShapeGuardError& e) {
    EXPECT_NE(std::string(e.what()).find("forward(): input 'x'"), std::string::npos) << e.what();
  }
}

TEST(ControlFlow, SpecialisedShapesFoldSizeConditionsAndUnrollLoops) {
  fx::ImportOptions options;
  options.example_inputs = fx::load_inputs(path("nested_if.input.pt"));  // x, y: [3, 4]
  options.specialize_shapes = true;
  auto gm = import_case("nested_if", options);
  // x.size(0) > 2 folded: only the data-dependent conditional is left.
  EXPECT_EQ(subgraph_paths(*gm), (std::vector<std::string>{"cond_0.true_graph", "cond_0.false_graph"}));
  fx::Node* x = gm->graph().find_nodes(fx::Opcode::Placeholder).at(0);
  ASSERT_NE(fx::shape_guard_of(*x), nullptr);
  EXPECT_EQ(fx::shape_guard_of(*x)->shape, (std::vector<int64_t>{3, 4}));
  auto inputs = fx::load_inputs(path("nested_if.input.pt"));
  auto d = fx::compare_values(gm->forward(inputs), fx::load_value(path("nested_if.output.pt")));
  EXPECT_LE(d.max_abs_diff, 1e-6);
  EXPECT_THROW(gm->forward(fx::load_inputs(path("nested_if.input2.pt"))), fx::ShapeGuardError);  // [2, 4]

  options.example_inputs = fx::load_inputs(path("loop_over_length.input.pt"));  // [3, 4]
  auto unrolled = import_case("loop_over_length", options);
  EXPECT_TRUE(subgraph_paths(*unrolled).empty());
  EXPECT_EQ(unrolled->graph().find_nodes(fx::Opcode::CallFunction, "aten::mul.Scalar").size(), 3u);
  auto u = fx::compare_values(unrolled->forward(options.example_inputs),
                              fx::load_value(path("loop_over_length.output.pt")));
  EXPECT_LE(u.max_abs_diff, 1e-6);
}

TEST(ControlFlow, ExampleInputsMustMatchForward) {
  fx::ImportOptions options;
  options.example_inputs = {at::zeros({1, 3, 4, 4}), at::zeros({1})};
  try {
    fx::import_torchscript(path("interpolate.pt"), options);
    FAIL() << "no error";
  } catch (const fx::ImportError& e) {
    EXPECT_NE(std::string(e.what()).find("example_inputs has 2 values but forward of __torch__.Interpolate takes 1"),
              std::string::npos)
        << e.what();
  }
}

TEST(ControlFlow, ScriptedLstmIsOneLeafCallThroughItsForwardOverload) {
  fx::ImportOptions options;
  options.example_inputs = fx::load_inputs(path("lstm.input.pt"));
  for (const auto& opts : {fx::ImportOptions{}, options}) {
    auto gm = import_case("lstm", opts);
    EXPECT_EQ(targets(gm->graph(), fx::Opcode::CallModule), std::vector<std::string>{"rnn"});
    check_values(gm, "lstm");
  }
  auto traced = import_case("lstm_traced");
  check_values(traced, "lstm_traced");
}

TEST(ControlFlow, ObjectsOfScriptClassesLiveOnlyWhileImporting) {
  // Boxes(x, 2.0); alias.scale = 3.0; b.scaled() + 1: the object's attributes
  // are shared by its names, its method inlined; the graph holds tensors only.
  auto gm = import_case("uses_object");
  EXPECT_TRUE(targets(gm->graph(), fx::Opcode::CallModule).empty());
  std::vector<std::string> calls = targets(gm->graph(), fx::Opcode::CallFunction);
  EXPECT_EQ(calls, (std::vector<std::string>{"aten::mul.Scalar", "aten::add.Scalar"}));
  fx::Node* mul = gm->graph().find_nodes(fx::Opcode::CallFunction, "aten::mul.Scalar").at(0);
  EXPECT_EQ(mul->args()[1].to_double(), 3.0);
  check_values(gm, "uses_object");
}

TEST(ControlFlow, ObjectChangedInsideARunTimeBranchIsRefused) {
  try {
    fx::import_torchscript(path("sets_object_in_branch.pt"));
    FAIL() << "no error";
  } catch (const fx::ImportError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("an attribute of an object of class __torch__.Boxes is set inside run-time control flow; set it "
                       "after the branch from the branch's result: prim::If at "),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("if bool(x.sum() > 0):"), std::string::npos) << msg;
  }
}

TEST(ControlFlow, LeafUsedOnlyThroughItsWeightIsAGetAttr) {
  auto gm = import_case("weight_only_traced");
  EXPECT_TRUE(targets(gm->graph(), fx::Opcode::CallModule).empty());
  EXPECT_EQ(targets(gm->graph(), fx::Opcode::GetAttr), std::vector<std::string>{"proj.weight"});
  check_values(gm, "weight_only_traced");
}

// Names of a graph's placeholders, in order.
std::vector<std::string> placeholder_targets(const fx::Graph& g) { return targets(g, fx::Opcode::Placeholder); }

TEST(ControlFlow, OuterValuesAHelperReadsInsideALoopOrBranchBecomeItsInputs) {
  // forward assigns self.pyramid = [x * 2, x.mean(0)]; a run-time loop, a
  // branch in its body and a branch after it call a method that reads the
  // pyramid through an inlined helper (RAFT's CorrBlock): no TorchScript
  // value of those blocks holds it, so its nodes are lifted when first used.
  auto gm = import_case("attr_in_loop");
  fx::Node* loop = gm->graph().find_nodes(fx::Opcode::CallModule, "loop_0").at(0);
  fx::Node* mul = gm->graph().find_nodes(fx::Opcode::CallFunction, "aten::mul.Scalar").at(0);
  fx::Node* mean = gm->graph().find_nodes(fx::Opcode::CallFunction, "aten::mean.dim").at(0);
  // (trip count, condition, carried y, then the lifted pyramid)
  ASSERT_EQ(loop->args().size(), 5u);
  EXPECT_EQ(loop->args()[3].to_node(), mul);
  EXPECT_EQ(loop->args()[4].to_node(), mean);
  auto body = std::dynamic_pointer_cast<fx::WhileLoopModule>(gm->get_submodule("loop_0"));
  ASSERT_TRUE(body);
  EXPECT_EQ(placeholder_targets(body->body().graph()), (std::vector<std::string>{"i", "y", "mul", "mean"}));
  // The branch inside the body takes them from the body's placeholders.
  auto inner = std::dynamic_pointer_cast<fx::CondModule>(body->body().get_submodule("cond_0"));
  ASSERT_TRUE(inner);
  EXPECT_EQ(placeholder_targets(inner->true_graph().graph()), (std::vector<std::string>{"mul_1", "mul", "mean"}));
  // Only the false branch after the loop reads the pyramid; both take it.
  auto after = std::dynamic_pointer_cast<fx::CondModule>(gm->get_submodule("cond_1"));
  ASSERT_TRUE(after);
  EXPECT_EQ(placeholder_targets(after->true_graph().graph()), (std::vector<std::string>{"loop_0", "mul", "mean"}));
  EXPECT_EQ(placeholder_targets(after->false_graph().graph()), placeholder_targets(after->true_graph().graph()));
  check_values(gm, "attr_in_loop");  // input: the inner branch taken, then the true one; input2: neither, then false
}

}  // namespace
