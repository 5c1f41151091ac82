// Argument normalization (NormalizeArgs): differential tests against
// torch.fx 1.13's experimental/normalize.py (goldens), overload resolution,
// idempotence, round trips, what is left alone, errors, random graphs.
#include "foldnorm_golden.h"
#include "random_graph.h"

#include "passes_test_util.h"

#include <fx/error.h>
#include <fx/graph_module.h>
#include <fx/interpreter.h>
#include <fx/passes/normalize.h>
#include <fx/target.h>

#include <ATen/ATen.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>
#include <gtest/gtest.h>

namespace {

using fx_test::flat;

using fx::Argument;
using fx::Graph;
using fx::GraphModule;
using fx::Node;
using fx::Opcode;
using fx_test::Json;

at::Tensor ramp(std::vector<int64_t> shape, double scale = 0.1, double offset = 0.0) {
  int64_t n = 1;
  for (auto s : shape) n *= s;
  return (at::arange(n, at::kFloat).reshape(shape) * scale + offset);
}

void expect_close(const std::vector<double>& a, const std::vector<double>& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], tol) << "at " << i;
}

/// The graph of python/goldens/foldnorm_goldens.py norm_graph().
std::shared_ptr<GraphModule> norm_graph() {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* y = g->placeholder("y");
  Node* add = g->call_function("aten::add", {x, y}, {{"alpha", 2}});
  Node* relu = g->call_function("aten::relu", {add});
  Node* s = g->call_function("aten::sum", {relu}, {{"dim", 1}, {"keepdim", true}});
  Node* tr = g->call_function("aten::transpose", {s, 0, 1});
  Node* cat = g->call_function("aten::cat", {Argument::list({x, y})}, {{"dim", 0}});
  Node* mm = g->call_function("aten::mm", {x, y});
  Node* cl = g->call_function("aten::clamp", {mm}, {{"min", 0.5}});
  Node* sm = g->call_function("aten::softmax", {cl, 1});
  g->output(Argument::tuple({add, relu, s, tr, cat, mm, cl, sm}));
  return std::make_shared<GraphModule>(std::make_shared<torch::nn::Module>("Root"), g);
}

std::string base_target(const std::string& t) {
  auto dot = t.find('.', t.find("::"));
  return dot == std::string::npos ? t : t.substr(0, dot);
}

void compare_with_golden(const std::string& name, GraphModule& gm) {
  SCOPED_TRACE(name);
  const Json& gold = fx_test::foldnorm_goldens()["normalize"][name];
  std::vector<Json> nodes;
  for (Node* n : gm.graph().nodes()) {
    if (n->op() != Opcode::CallFunction) continue;
    std::vector<Json> args, kwargs;
    for (const auto& a : n->args()) args.push_back(fx_test::to_json(a));
    for (const auto& kv : n->kwargs())
      kwargs.push_back(fx_test::json_array({fx_test::json_string(kv.first), fx_test::to_json(kv.second)}));
    nodes.push_back(fx_test::json_array({fx_test::json_string(n->name()), fx_test::json_string(base_target(n->target())),
                                         fx_test::json_array(args), fx_test::json_array(kwargs)}));
  }
  ASSERT_EQ(nodes.size(), gold["nodes"].size());
  for (size_t i = 0; i < nodes.size(); ++i) EXPECT_EQ(nodes[i].str(), gold["nodes"][i].str());
  at::Tensor x = at::tensor(gold["inputs"][0].numbers(), at::kFloat).reshape({3, 3});
  at::Tensor y = at::tensor(gold["inputs"][1].numbers(), at::kFloat).reshape({3, 3});
  expect_close(flat(gm.forward({x, y})), gold["output"].numbers(), 1e-5);
}

std::vector<std::string> targets(const GraphModule& gm) {
  std::vector<std::string> out;
  for (Node* n : gm.graph().nodes())
    if (n->op() == Opcode::CallFunction) out.push_back(n->target());
  return out;
}

TEST(NormalizeGolden, OnlyKwargsMatchesPython) {
  auto gm = norm_graph();
  auto r = fx::normalize_args(gm);
  EXPECT_TRUE(r.modified);
  EXPECT_EQ(r.graph_module, gm);
  compare_with_golden("kwargs_only", *gm);
  EXPECT_EQ(targets(*gm), (std::vector<std::string>{"aten::add.Tensor", "aten::relu", "aten::sum.dim_IntList",
                                                     "aten::transpose.int", "aten::cat", "aten::mm", "aten::clamp",
                                                     "aten::softmax.int"}));
  Node* add = gm->graph().find_nodes(Opcode::CallFunction, std::string("aten::add.Tensor")).at(0);
  EXPECT_EQ(add->format_node(),
            "%add : [#users=2] = call_function[target=aten::add.Tensor](args = (), kwargs = {self: %x, other: %y, "
            "alpha: 2})");
}

TEST(NormalizeGolden, PositionalStaysPositionalLikePython) {
  auto gm = norm_graph();
  fx::NormalizeArgsOptions opt;
  opt.normalize_to_only_use_kwargs = false;
  fx::normalize_args(gm, opt);
  compare_with_golden("positional", *gm);
}

TEST(Normalize, ExampleInputsGiveTheSameResult) {
  auto a = norm_graph();
  auto b = norm_graph();
  fx::normalize_args(a);
  fx::NormalizeArgsOptions opt;
  opt.example_inputs = std::vector<c10::IValue>{ramp({3, 3}), ramp({3, 3}, -0.1)};
  fx::normalize_args(b, opt);
  EXPECT_EQ(a->graph().str(), b->graph().str());
}

TEST(Normalize, TwiceChangesNothingAndValuesRoundTrip) {
  auto original = norm_graph();
  auto gm = norm_graph();
  ASSERT_TRUE(fx::normalize_args(gm).modified);
  std::string once = gm->graph().str();
  auto again = fx::normalize_args(gm);
  EXPECT_FALSE(again.modified);
  EXPECT_EQ(gm->graph().str(), once);
  // Positional normalization of a kwargs-only graph changes nothing either.
  fx::NormalizeArgsOptions pos;
  pos.normalize_to_only_use_kwargs = false;
  EXPECT_FALSE(fx::normalize_args(gm, pos).modified);
  at::Tensor x = ramp({3, 3}, 0.3, -1), y = ramp({3, 3}, -0.2, 0.7);
  expect_close(flat(gm->forward({x, y})), flat(original->forward({x, y})), 1e-6);
  expect_close(flat(fx::Interpreter(gm).run({x, y})), flat(original->forward({x, y})), 1e-6);
}

TEST(Normalize, OverloadIsTheOneTheCallRuns) {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* a = g->call_function("aten::add", {x, 2.0});               // Tensor + number: add.Scalar
  Node* v = g->call_function("aten::view", {a, 9});                // int for int[]
  Node* m = g->call_function("aten::max", {x, 1});                 // max.dim: a tuple
  Node* i = g->call_function("operator.getitem", {m, 0});          // Tensor (from the schema)
  Node* sz = g->call_method("size", {x, 0});                       // int
  Node* f = g->call_function("aten::full", {Argument::list({sz}), 1.5});
  Node* o = g->call_function("aten::mul", {i, f});
  g->output(Argument::tuple({v, o}));
  auto gm = std::make_shared<GraphModule>(std::make_shared<torch::nn::Module>("Root"), g);
  at::Tensor in = ramp({3, 3});
  auto expected = flat(gm->forward({in}));
  ASSERT_TRUE(fx::normalize_args(gm).modified);
  EXPECT_EQ(gm->graph().str(),
            "graph():\n"
            "    %x : [#users=3] = placeholder[target=x]\n"
            "    %add : [#users=1] = call_function[target=aten::add.Scalar](args = (), kwargs = {self: %x, other: 2.0, alpha: 1})\n"
            "    %view : [#users=1] = call_function[target=aten::view](args = (), kwargs = {self: %add, size: 9})\n"
            "    %max_1 : [#users=1] = call_function[target=aten::max.dim](args = (), kwargs = {self: %x, dim: 1, keepdim: False})\n"
            "    %getitem : [#users=1] = call_function[target=operator.getitem](args = (%max_1, 0), kwargs = {})\n"
            "    %size : [#users=1] = call_method[target=size](args = (%x, 0), kwargs = {})\n"
            "    %full : [#users=1] = call_function[target=aten::full](args = (), kwargs = {size: [%size], fill_value: 1.5, dtype: None, layout: None, device: None, pin_memory: None})\n"
            "    %mul : [#users=1] = call_function[target=aten::mul.Tensor](args = (), kwargs = {self: %getitem, other: %full})\n"
            "    return (view, mul)");
  expect_close(flat(gm->forward({in})), expected, 1e-6);
  EXPECT_FALSE(fx::normalize_args(gm).modified);
}

TEST(Normalize, VarargsArePackedIntoTheListArgument) {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  g->output(g->call_function("aten::view", {x, 3, 3}));
  auto gm = std::make_shared<GraphModule>(std::make_shared<torch::nn::Module>("Root"), g);
  at::Tensor in = ramp({9});
  at::Tensor expected = gm->forward(in);
  fx::normalize_args(gm);
  Node* v = gm->graph().find_nodes(Opcode::CallFunction).at(0);
  EXPECT_EQ(fx::format_kwargs(v->kwargs()), "{self: %x, size: [3, 3]}");
  EXPECT_TRUE(at::equal(gm->forward(in), expected));
}

TEST(Normalize, BuiltinsFunctionsMethodsAndModulesAreLeftAlone) {
  fx::register_function("foldnorm_test::double_it", [](std::vector<c10::IValue>& a, fx::ValueKwargs&) {
    return c10::IValue(a[0].toTensor() * 2);
  });
  auto root = std::make_shared<torch::nn::Module>("Root");
  root->register_module("lin", torch::nn::Linear(3, 3));
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* l = g->call_module("lin", {x});
  Node* d = g->call_function("foldnorm_test::double_it", {l});
  Node* s = g->call_function("operator.add", {d, x});
  Node* m = g->call_method("relu", {s});
  g->output(m);
  auto gm = std::make_shared<GraphModule>(root, g);
  std::string before = gm->graph().str();
  auto r = fx::normalize_args(gm);
  EXPECT_FALSE(r.modified);
  EXPECT_EQ(gm->graph().str(), before);
}

/// call_module nodes in the goldens' form: [name, args, [[key, value]...]].
Json module_calls(const GraphModule& gm) {
  std::vector<Json> out;
  for (Node* n : gm.graph().nodes()) {
    if (n->op() != Opcode::CallModule) continue;
    std::vector<Json> args, kwargs;
    for (const auto& a : n->args()) args.push_back(fx_test::to_json(a));
    for (const auto& kv : n->kwargs())
      kwargs.push_back(fx_test::json_array({fx_test::json_string(kv.first), fx_test::to_json(kv.second)}));
    out.push_back(fx_test::json_array({fx_test::json_string(n->name()), fx_test::json_array(args),
                                       fx_test::json_array(kwargs)}));
  }
  return fx_test::json_array(out);
}

// Python's positional normalization of torch.nn layers keeps `input`
// positional: the same as fxcpp. With only kwargs, Python writes
// {input: x}; a C++ module's forward takes positional arguments only, so
// fxcpp keeps the call positional (the graph must still run).
TEST(NormalizeGolden, ModuleCallsStayPositional) {
  const Json& gold = fx_test::foldnorm_goldens()["normalize"];
  for (bool only_kwargs : {false, true}) {
    auto root = std::make_shared<torch::nn::Module>("Root");
    root->register_module("lin", torch::nn::Linear(3, 3));
    root->register_module("act", torch::nn::ReLU());
    auto g = std::make_shared<Graph>();
    Node* x = g->placeholder("x");
    Node* lin = g->call_module("lin", {x});
    g->output(g->call_module("act", {lin}));
    auto gm = std::make_shared<GraphModule>(root, g);
    fx::NormalizeArgsOptions opt;
    opt.normalize_to_only_use_kwargs = only_kwargs;
    EXPECT_FALSE(fx::normalize_args(gm, opt).modified);
    EXPECT_EQ(module_calls(*gm).str(), gold["modules_positional"].str());
    EXPECT_NO_THROW(gm->forward({ramp({2, 3})}));
  }
  EXPECT_EQ(gold["modules_kwargs_only"].str(),
            "[[\"lin\", [], [[\"input\", \"%x\"]]], [\"act\", [], [[\"input\", \"%lin\"]]]]");
}

TEST(Normalize, UnknownArgumentKindsAreLeftAlone) {
  fx::register_function("foldnorm_test::opaque", [](std::vector<c10::IValue>& a, fx::ValueKwargs&) {
    return a[0];
  });
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* o = g->call_function("foldnorm_test::opaque", {x});  // result kind unknown statically
  Node* a = g->call_function("aten::add", {o, x});
  Node* r = g->call_function("aten::relu", {x});
  g->output(Argument::tuple({a, r}));
  auto gm = std::make_shared<GraphModule>(std::make_shared<torch::nn::Module>("Root"), g);
  fx::normalize_args(gm);
  EXPECT_EQ(targets(*gm), (std::vector<std::string>{"foldnorm_test::opaque", "aten::add", "aten::relu"}));
  EXPECT_EQ(fx::format_kwargs(gm->graph().find_nodes(Opcode::CallFunction, std::string("aten::relu")).at(0)->kwargs()),
            "{self: %x}");
  // With example inputs the real values decide.
  fx::NormalizeArgsOptions opt;
  opt.example_inputs = std::vector<c10::IValue>{ramp({2})};
  EXPECT_TRUE(fx::normalize_args(gm, opt).modified);
  EXPECT_EQ(targets(*gm), (std::vector<std::string>{"foldnorm_test::opaque", "aten::add.Tensor", "aten::relu"}));
}

TEST(Normalize, NamesAndMetaAreKept) {
  auto gm = norm_graph();
  Node* relu = gm->graph().find_nodes(Opcode::CallFunction, std::string("aten::relu")).at(0);
  relu->set_stack_trace("File \"model.py\", line 3");
  fx::normalize_args(gm);
  Node* n = gm->graph().find_nodes(Opcode::CallFunction, std::string("aten::relu")).at(0);
  EXPECT_EQ(n->name(), "relu");
  EXPECT_EQ(n->stack_trace(), "File \"model.py\", line 3");
}

TEST(Normalize, AsAPassBase) {
  auto gm = norm_graph();
  fx::NormalizeArgs pass;
  EXPECT_EQ(pass.name(), "NormalizeArgs");
  auto r = pass.call(gm);
  EXPECT_TRUE(r.modified);
  compare_with_golden("kwargs_only", *r.graph_module);
}

TEST(NormalizeErrors, NullModule) {
  try {
    fx::normalize_args(nullptr);
    FAIL() << "no error";
  } catch (const fx::Error& e) {
    EXPECT_STREQ(e.what(), "NormalizeArgs: the GraphModule is null");
  }
}

TEST(NormalizeErrors, FailingExampleRunLeavesTheGraphUnchanged) {
  auto gm = norm_graph();
  std::string before = gm->graph().str();
  fx::NormalizeArgsOptions opt;
  opt.example_inputs = std::vector<c10::IValue>{ramp({2, 3}), ramp({2, 3})};  // mm(2x3, 2x3) fails
  try {
    fx::normalize_args(gm, opt);
    FAIL() << "no error";
  } catch (const fx::Error& e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.rfind("NormalizeArgs: running the example inputs failed: ", 0), 0u) << msg;
    EXPECT_NE(msg.find("While executing %mm"), std::string::npos) << msg;
  }
  EXPECT_EQ(gm->graph().str(), before);
}

TEST(NormalizeProperty, RandomGraphsKeepTheirOutputs) {
  for (uint64_t seed = 0; seed < 25; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    auto rg = fx_test::make_random_graph(seed);
    auto want = flat(rg.gm->forward(rg.inputs));
    ASSERT_TRUE(fx::normalize_args(rg.gm).modified);
    rg.gm->graph().lint();
    for (Node* n : rg.gm->graph().nodes()) {
      if (n->op() != Opcode::CallFunction) continue;
      EXPECT_TRUE(n->args().empty()) << n->format_node();
      EXPECT_NE(n->kwargs().size(), 0u) << n->format_node();
    }
    expect_close(flat(rg.gm->forward(rg.inputs)), want, 1e-6);
    expect_close(flat(fx::Interpreter(rg.gm).run(rg.inputs)), want, 1e-6);
    std::string once = rg.gm->graph().str();
    EXPECT_FALSE(fx::normalize_args(rg.gm).modified);
    EXPECT_EQ(rg.gm->graph().str(), once);
  }
}

}  // namespace

// ---- a real model (ctest entry passes_foldnorm_models, tests/passes/foldnorm.cmake) ----
#include "fx_paths.h"

#include <fx/import.h>
#include <fx/passes/const_fold.h>
#include <fx/tensor_file.h>

#include <fstream>

namespace {

TEST(FoldNormModels, ResNet50RoundTrips) {
  std::string base = std::string(FX_BINARY_DIR) + "/models/resnet50";
  if (!std::ifstream(base + ".pt")) GTEST_SKIP() << base << ".pt is missing (python/export_models.py exports it)";
  auto gm = fx::import_torchscript(base + ".pt");
  auto inputs = fx::load_inputs(base + ".input.pt");
  at::NoGradGuard no_grad;
  at::Tensor expected = gm->forward(inputs).toTensor();
  auto folded = fx::split_const_subgraphs(gm);
  auto r = fx::normalize_args(gm);
  EXPECT_TRUE(r.modified);
  gm->graph().lint();
  size_t normalized = 0;
  for (fx::Node* n : gm->graph().nodes())
    if (n->op() == fx::Opcode::CallFunction && n->args().empty() && !n->kwargs().empty()) ++normalized;
  EXPECT_GT(normalized, 0u);
  EXPECT_TRUE(at::allclose(gm->forward(inputs).toTensor(), expected, 1e-5, 1e-5));
  EXPECT_FALSE(fx::normalize_args(gm).modified);
}

}  // namespace

namespace {

TEST(NormalizeProperty, RandomGraphsFoldedThenNormalizedKeepTheirOutputs) {
  for (uint64_t seed = 100; seed < 120; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    auto rg = fx_test::make_random_graph(seed);
    auto want = flat(rg.gm->forward(rg.inputs));
    fx::split_const_subgraphs(rg.gm);
    fx::normalize_args(rg.gm);
    rg.gm->graph().lint();
    expect_close(flat(rg.gm->forward(rg.inputs)), want, 1e-6);
    expect_close(flat(fx::Interpreter(rg.gm).run(rg.inputs)), want, 1e-6);
  }
}

}  // namespace
