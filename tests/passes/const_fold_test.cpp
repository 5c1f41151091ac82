// Constant folding (split_const_subgraphs): differential tests against
// torch.fx 1.13's experimental/const_fold.py (goldens), what must never be
// folded, run_folding, literals, errors, and random graphs.
#include "foldnorm_golden.h"
#include "random_graph.h"

#include "passes_test_util.h"

#include <fx/error.h>
#include <fx/graph_module.h>
#include <fx/interpreter.h>
#include <fx/passes/const_fold.h>
#include <fx/passes/normalize.h>
#include <fx/target.h>
#include <fx/trace.h>

#include <ATen/ATen.h>
#include <torch/nn/modules/linear.h>
#include <gtest/gtest.h>

#include <algorithm>

namespace {

using fx_test::flat;

using fx::Argument;
using fx::ConstFoldResult;
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

std::shared_ptr<torch::nn::Module> root_wb() {
  auto root = std::make_shared<torch::nn::Module>("Root");
  root->register_buffer("w", ramp({3, 3}, 0.1, -0.4));
  root->register_buffer("b", ramp({3}, 0.5));
  return root;
}

void expect_close(const std::vector<double>& a, const std::vector<double>& b, double tol = 1e-5) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tol) << "at " << i;
}

// The graphs of python/goldens/foldnorm_goldens.py, node for node.
std::shared_ptr<GraphModule> cf_mixed() {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* w = g->get_attr("w");
  Node* relu = g->call_function("aten::relu", {w});
  Node* add = g->call_function("aten::add", {relu, 1.0});
  Node* b = g->get_attr("b");
  Node* add_1 = g->call_function("aten::add", {x, b});
  Node* mm = g->call_function("aten::mm", {add_1, add});
  Node* s = g->call_function("aten::sum", {w});
  Node* add_2 = g->call_function("aten::add", {mm, s});
  g->output(add_2);
  return std::make_shared<GraphModule>(root_wb(), g);
}

std::shared_ptr<GraphModule> cf_single() {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* w = g->get_attr("w");
  Node* mul = g->call_function("aten::mul", {w, 2.0});
  Node* t = g->call_function("aten::t", {mul});
  g->output(g->call_function("aten::mm", {x, t}));
  return std::make_shared<GraphModule>(root_wb(), g);
}

std::shared_ptr<GraphModule> cf_chain_skip() {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* w = g->get_attr("w");
  Node* neg = g->call_function("aten::neg", {w});
  Node* tanh = g->call_function("aten::tanh", {neg});
  Node* sig = g->call_function("aten::sigmoid", {w});
  Node* add = g->call_function("aten::add", {x, tanh});
  g->output(g->call_function("aten::add", {add, sig}));
  return std::make_shared<GraphModule>(root_wb(), g);
}

std::shared_ptr<GraphModule> cf_nothing() {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* w = g->get_attr("w");
  g->output(g->call_function("aten::add", {x, w}));
  return std::make_shared<GraphModule>(root_wb(), g);
}

std::shared_ptr<GraphModule> cf_rand() {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* r = g->call_function("aten::rand", {Argument::tuple({3, 3})});
  Node* z = g->call_function("aten::mul", {r, 0.0});
  g->output(g->call_function("aten::add", {x, z}));
  return std::make_shared<GraphModule>(root_wb(), g);
}

/// Compares one folded module with its golden (see foldnorm_goldens.py).
void compare_with_golden(const std::string& name, const ConstFoldResult& r) {
  SCOPED_TRACE(name);
  const Json& gold = fx_test::foldnorm_goldens()["const_fold"][name];
  std::vector<Json> folded;
  for (const auto& f : r.folded_nodes) folded.push_back(fx_test::json_string(f));
  EXPECT_EQ(fx_test::json_array(folded).str(), gold["folded"].str());
  EXPECT_EQ(r.folded_attrs.size(), static_cast<size_t>(gold["num_folded_attrs"].num));

  // Folded attributes read as folded:<i>, as the golden spells Python's getitems.
  std::map<const Node*, std::string> rename;
  std::vector<Json> calls, get_attrs;
  Graph& g = r.pass_result.graph_module->graph();
  for (Node* n : g.nodes()) {
    if (n->op() != Opcode::GetAttr) continue;
    for (size_t i = 0; i < r.folded_attrs.size(); ++i)
      if (r.folded_attrs[i].name == n->target()) rename[n] = "folded:" + std::to_string(i);
    if (!rename.count(n)) get_attrs.push_back(fx_test::json_string(n->target()));
  }
  for (Node* n : g.nodes()) {
    if (n->op() != Opcode::CallFunction && n->op() != Opcode::Output) continue;
    std::vector<Json> args;
    for (const auto& a : n->args()) args.push_back(fx_test::to_json(a, rename));
    Json kwargs;
    kwargs.kind = Json::Kind::Object;
    for (const auto& kv : n->kwargs()) kwargs.obj[kv.first] = fx_test::to_json(kv.second, rename);
    calls.push_back(fx_test::json_array({fx_test::json_string(fx::to_string(n->op())),
                                         fx_test::json_string(n->op() == Opcode::Output ? "output" : n->target()),
                                         fx_test::json_array(args), kwargs}));
  }
  EXPECT_EQ(fx_test::json_array(calls).str(), gold["calls"].str());
  EXPECT_EQ(fx_test::json_array(get_attrs).str(), gold["get_attrs"].str());

  at::Tensor x = at::tensor(gold["input"].numbers(), at::kFloat).reshape({3, 3});
  expect_close(flat(r.pass_result.graph_module->forward({x})), gold["output"].numbers());
  expect_close(flat(fx::Interpreter(r.pass_result.graph_module).run({x})), gold["output"].numbers());
}

TEST(ConstFoldGolden, MixedFoldsTwoAttributesLikePython) {
  auto r = fx::split_const_subgraphs(cf_mixed());
  EXPECT_TRUE(r.pass_result.modified);
  compare_with_golden("mixed", r);
  ASSERT_EQ(r.folded_attrs.size(), 2u);
  EXPECT_EQ(r.folded_attrs[0].name, "_FX_CONST_FOLDED_ATTRS.0");
  EXPECT_EQ(r.folded_attrs[0].source_node, "add");
  EXPECT_EQ(r.folded_attrs[1].name, "_FX_CONST_FOLDED_ATTRS.1");
  EXPECT_EQ(r.folded_attrs[1].source_node, "sum_1");
  at::Tensor w = ramp({3, 3}, 0.1, -0.4);
  auto gm = r.pass_result.graph_module;
  EXPECT_TRUE(at::equal(gm->fetch_attr("_FX_CONST_FOLDED_ATTRS.0"), at::relu(w) + 1));
  EXPECT_TRUE(at::allclose(gm->fetch_attr("_FX_CONST_FOLDED_ATTRS.1"), w.sum()));
}

TEST(ConstFoldGolden, SingleValueIsOneAttributeNamedAsInPython) {
  auto r = fx::split_const_subgraphs(cf_single());
  compare_with_golden("single", r);
  ASSERT_EQ(r.folded_attrs.size(), 1u);
  EXPECT_EQ(r.folded_attrs[0].name, "_FX_CONST_FOLDED_ATTRS");
  EXPECT_EQ(r.pass_result.graph_module->code(),
            "\n\n\ndef forward(self, x):\n"
            "    _fx_const_folded_attrs = self._FX_CONST_FOLDED_ATTRS\n"
            "    mm = torch.ops.aten.mm(x, _fx_const_folded_attrs);  x = _fx_const_folded_attrs = None\n"
            "    return mm\n    ");
}

TEST(ConstFoldGolden, SkipPredicateStopsTheChain) {
  auto r = fx::split_const_subgraphs(cf_chain_skip(), [](const Node& n) { return n.target() == "aten::neg"; });
  compare_with_golden("chain_skip", r);
}

TEST(ConstFoldGolden, OnlyGetAttrsIsNothingToFold) {
  auto gm = cf_nothing();
  std::string before = gm->graph().str();
  auto r = fx::split_const_subgraphs(gm);
  EXPECT_FALSE(r.pass_result.modified);
  EXPECT_EQ(r.const_subgraph_module, nullptr);
  EXPECT_EQ(gm->graph().str(), before);
  compare_with_golden("nothing", r);
}

// Better than torch.fx: Python folds torch.rand (its is_impure knows only a
// few side-effectful functions), so every forward returns the same "random"
// tensor. fxcpp never folds random operators.
TEST(ConstFoldGolden, RandomOpsAreNeverFoldedUnlikePython) {
  const Json& gold = fx_test::foldnorm_goldens()["const_fold"]["rand"];
  EXPECT_EQ(gold["folded"].str(), "[\"rand\", \"mul\"]");  // what Python does
  auto gm = cf_rand();
  std::string before = gm->graph().str();
  auto r = fx::split_const_subgraphs(gm);
  EXPECT_FALSE(r.pass_result.modified);
  EXPECT_TRUE(r.folded_nodes.empty());
  EXPECT_EQ(gm->graph().str(), before);
}

TEST(ConstFold, ImpureAndRandomNodesAreNeverFolded) {
  fx::register_function("foldnorm_test::impure_twice", [](std::vector<c10::IValue>& a, fx::ValueKwargs&) {
    return c10::IValue(a[0].toTensor() * 2);
  }, /*impure=*/true);
  auto root = root_wb();
  root->register_buffer("v", ramp({3, 3}));
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* w = g->get_attr("w");
  Node* v = g->get_attr("v");
  Node* inplace = g->call_function("aten::add_", {v, 1.0});          // mutates a buffer
  Node* drop = g->call_function("aten::dropout", {w, 0.5, true});    // random
  Node* rl = g->call_function("aten::randn_like", {w});              // random
  Node* bern = g->call_method("bernoulli", {w});                     // random method
  Node* mul_ = g->call_method("mul_", {w, 1.0});                     // in-place method
  Node* imp = g->call_function("foldnorm_test::impure_twice", {w});  // registered impure
  Node* ok = g->call_function("aten::neg", {w});                     // foldable
  Node* sum = g->call_function("aten::add", {inplace, drop});
  sum = g->call_function("aten::add", {sum, rl});
  sum = g->call_function("aten::add", {sum, bern});
  sum = g->call_function("aten::add", {sum, mul_});
  sum = g->call_function("aten::add", {sum, imp});
  sum = g->call_function("aten::add", {sum, ok});
  g->output(g->call_function("aten::add", {sum, x}));
  auto gm = std::make_shared<GraphModule>(root, g);
  for (Node* n : {inplace, drop, rl, bern, mul_, imp}) EXPECT_FALSE(fx::is_foldable_operation(*n)) << n->name();
  EXPECT_TRUE(fx::is_foldable_operation(*ok));
  auto r = fx::split_const_subgraphs(gm);
  EXPECT_TRUE(r.pass_result.modified);
  EXPECT_EQ(r.folded_nodes, std::vector<std::string>{"neg"});
  for (const char* name : {"add_", "dropout", "randn_like", "bernoulli", "mul_", "impure_twice"}) {
    bool found = false;
    for (Node* n : gm->graph().nodes()) found = found || n->name() == name;
    EXPECT_TRUE(found) << name << " was folded away";
  }
  gm->graph().lint();
}

TEST(ConstFold, DropoutFoldsOnlyOutsideTraining) {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* w = g->get_attr("w");
  Node* train = g->call_function("aten::dropout", {w, 0.5, true});
  Node* eval = g->call_function("aten::dropout", {w, 0.5}, {{"train", false}});
  Node* feature = g->call_function("aten::feature_dropout", {w, 0.5, false});
  Node* s = g->call_function("aten::add", {x, train});
  s = g->call_function("aten::add", {s, eval});
  g->output(g->call_function("aten::add", {s, feature}));
  EXPECT_FALSE(fx::is_foldable_operation(*train));
  EXPECT_TRUE(fx::is_foldable_operation(*eval));
  EXPECT_TRUE(fx::is_foldable_operation(*feature));
  auto r = fx::split_const_subgraphs(std::make_shared<GraphModule>(root_wb(), g));
  EXPECT_EQ(r.folded_nodes, (std::vector<std::string>{"dropout_1", "feature_dropout"}));
}

TEST(ConstFold, CallModuleIsNeverFolded) {
  auto root = root_wb();
  root->register_module("lin", torch::nn::Linear(3, 3));
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* w = g->get_attr("w");
  Node* lin = g->call_module("lin", {w});
  g->output(g->call_function("aten::add", {x, lin}));
  auto r = fx::split_const_subgraphs(std::make_shared<GraphModule>(root, g));
  EXPECT_FALSE(r.pass_result.modified);
}

TEST(ConstFold, RunFoldingRefoldsAfterTheSourceChanged) {
  auto gm = cf_mixed();
  auto reference = cf_mixed();  // unfolded, shares nothing with gm
  auto r = fx::split_const_subgraphs(gm);
  at::Tensor x = ramp({3, 3}, 0.2, -0.5);
  EXPECT_TRUE(at::allclose(gm->forward(x), reference->forward(x)));
  {
    at::NoGradGuard no_grad;
    gm->fetch_attr("w").mul_(-2);
    reference->fetch_attr("w").mul_(-2);
  }
  EXPECT_FALSE(at::allclose(gm->forward(x), reference->forward(x)));  // still the old constants
  at::Tensor attr0 = gm->fetch_attr("_FX_CONST_FOLDED_ATTRS.0");
  EXPECT_TRUE(fx::run_folding(r));
  EXPECT_TRUE(at::allclose(gm->forward(x), reference->forward(x)));
  // The attribute keeps its identity (register_attr takes the new data).
  EXPECT_TRUE(gm->fetch_attr("_FX_CONST_FOLDED_ATTRS.0").is_same(attr0));
  ConstFoldResult none;
  EXPECT_FALSE(fx::run_folding(none));
}

TEST(ConstFold, ParametersThatRequireGradFoldToParameters) {
  auto root = std::make_shared<torch::nn::Module>("Root");
  root->register_parameter("p", ramp({2, 2}));
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* p = g->get_attr("p");
  Node* t = g->call_function("aten::t", {p});
  g->output(g->call_function("aten::mul", {x, t}));
  auto gm = std::make_shared<GraphModule>(root, g);
  auto r = fx::split_const_subgraphs(gm);
  ASSERT_EQ(r.folded_attrs.size(), 1u);
  at::Tensor folded = gm->fetch_attr("_FX_CONST_FOLDED_ATTRS");
  EXPECT_TRUE(folded.requires_grad());
  EXPECT_TRUE(folded.is_leaf());
  EXPECT_TRUE(gm->named_parameters(false).contains("_FX_CONST_FOLDED_ATTRS"));
}

TEST(ConstFold, NonTensorConstantsAreInlinedAsLiterals) {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* w = g->get_attr("w");
  Node* size = g->call_method("size", {w, 0});
  Node* s2 = g->call_function("operator.mul", {size, 2});
  g->output(g->call_function("aten::mul", {x, s2}));
  auto gm = std::make_shared<GraphModule>(root_wb(), g);
  at::Tensor x_in = ramp({3, 3});
  at::Tensor expected = gm->forward(x_in);
  auto r = fx::split_const_subgraphs(gm);
  EXPECT_TRUE(r.pass_result.modified);
  EXPECT_TRUE(r.folded_attrs.empty());
  EXPECT_EQ(r.const_subgraph_module, nullptr);
  EXPECT_EQ(r.inlined_nodes, std::vector<std::string>{"mul"});
  EXPECT_EQ(r.folded_nodes, (std::vector<std::string>{"size", "mul"}));
  EXPECT_EQ(gm->graph().str(),
            "graph():\n"
            "    %x : [#users=1] = placeholder[target=x]\n"
            "    %mul_1 : [#users=1] = call_function[target=aten::mul](args = (%x, 6), kwargs = {})\n"
            "    return mul_1");
  EXPECT_TRUE(at::allclose(gm->forward(x_in), expected));
}

TEST(ConstFold, TensorListValuesAreNotFoldedTheirInputsAre) {
  fx::register_function("foldnorm_test::first_plus", [](std::vector<c10::IValue>& a, fx::ValueKwargs&) {
    return c10::IValue(a[0].toTensorVector()[0] + a[1].toTensor());
  });
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* w = g->get_attr("w");
  Node* neg = g->call_function("aten::neg", {w});
  Node* split = g->call_function("aten::split", {neg, 1});
  g->output(g->call_function("foldnorm_test::first_plus", {split, x}));
  auto gm = std::make_shared<GraphModule>(root_wb(), g);
  at::Tensor x_in = ramp({1, 3});
  at::Tensor expected = gm->forward(x_in);
  auto r = fx::split_const_subgraphs(gm);
  EXPECT_EQ(r.folded_nodes, std::vector<std::string>{"neg"});
  ASSERT_EQ(r.folded_attrs.size(), 1u);
  EXPECT_EQ(r.folded_attrs[0].source_node, "neg");
  EXPECT_EQ(gm->graph().find_nodes(Opcode::CallFunction, std::string("aten::split")).size(), 1u);
  EXPECT_TRUE(at::allclose(gm->forward(x_in), expected));
}

TEST(ConstFold, AttributeNameIsMadeUnique) {
  auto gm = cf_single();
  gm->register_buffer("_FX_CONST_FOLDED_ATTRS", at::zeros({1}));
  auto r = fx::split_const_subgraphs(gm);
  ASSERT_EQ(r.folded_attrs.size(), 1u);
  EXPECT_EQ(r.folded_attrs[0].name, "_FX_CONST_FOLDED_ATTRS_1");
  // Folding the result again finds nothing more to do.
  auto again = fx::split_const_subgraphs(gm);
  EXPECT_FALSE(again.pass_result.modified);
}

TEST(ConstFold, ConstantsWithoutInputsFold) {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* ones = g->call_function("aten::ones", {Argument::list({2})});
  g->output(g->call_function("aten::add", {x, ones}));
  auto gm = std::make_shared<GraphModule>(root_wb(), g);
  auto r = fx::split_const_subgraphs(gm);
  EXPECT_EQ(r.folded_nodes, std::vector<std::string>{"ones"});
  EXPECT_TRUE(at::equal(gm->forward(at::zeros({2})), at::ones({2})));
}

/// A C++ layer that rescales and transposes its weight on every call.
struct ScaledLayerImpl : torch::nn::Module {
  ScaledLayerImpl() {
    weight = register_parameter("weight", ramp({2, 3}, 0.1, -0.2));
    scale = register_parameter("scale", at::full({1}, 0.5f));
    bias = register_parameter("bias", at::tensor({-1.0f, 2.0f}));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = x.matmul((weight * scale).t());
    return y + bias.relu();
  }
  at::Tensor weight, scale, bias;
};

TEST(ConstFold, TracedTorchNnModuleThenNormalized) {
  auto layer = std::make_shared<ScaledLayerImpl>();
  at::Tensor x = ramp({4, 3}, 0.3, -1.0);
  auto gm = fx::symbolic_trace(layer, {x});
  at::Tensor expected = layer->forward(x);
  auto r = fx::split_const_subgraphs(gm);
  EXPECT_EQ(r.folded_nodes, (std::vector<std::string>{"mul", "t", "relu"}));
  ASSERT_EQ(r.folded_attrs.size(), 2u);
  EXPECT_EQ(r.folded_attrs[0].source_node, "t");
  EXPECT_EQ(r.folded_attrs[1].source_node, "relu");
  EXPECT_TRUE(at::allclose(gm->forward(x), expected));
  // Folded from parameters: parameters themselves (leaves that require grad).
  EXPECT_TRUE(gm->fetch_attr("_FX_CONST_FOLDED_ATTRS.0").requires_grad());
  // Traced targets already name overloads; normalization binds the names.
  ASSERT_TRUE(fx::normalize_args(gm).modified);
  EXPECT_EQ(gm->graph().str(),
            "graph():\n"
            "    %x : [#users=1] = placeholder[target=x]\n"
            "    %_fx_const_folded_attrs_0 : [#users=1] = get_attr[target=_FX_CONST_FOLDED_ATTRS.0]\n"
            "    %matmul : [#users=1] = call_function[target=aten::matmul](args = (), kwargs = {self: %x, other: "
            "%_fx_const_folded_attrs_0})\n"
            "    %_fx_const_folded_attrs_1 : [#users=1] = get_attr[target=_FX_CONST_FOLDED_ATTRS.1]\n"
            "    %add : [#users=1] = call_function[target=aten::add.Tensor](args = (), kwargs = {self: %matmul, "
            "other: %_fx_const_folded_attrs_1, alpha: 1})\n"
            "    return add");
  EXPECT_TRUE(at::allclose(gm->forward(x), expected));
}

TEST(ConstFoldErrors, NullModule) {
  try {
    fx::split_const_subgraphs(nullptr);
    FAIL() << "no error";
  } catch (const fx::Error& e) {
    EXPECT_STREQ(e.what(), "split_const_subgraphs: the GraphModule is null");
  }
}

TEST(ConstFoldErrors, FailingConstantLeavesTheGraphUnchanged) {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* w = g->get_attr("w");
  Node* b = g->get_attr("b");
  Node* ok = g->call_function("aten::neg", {w});
  Node* bad = g->call_function("aten::mm", {b, w});  // b is 1-d: mm fails
  Node* s = g->call_function("aten::add", {x, ok});
  g->output(g->call_function("aten::add", {s, bad}));
  auto gm = std::make_shared<GraphModule>(root_wb(), g);
  std::string before = gm->graph().str();
  try {
    fx::split_const_subgraphs(gm);
    FAIL() << "no error";
  } catch (const fx::Error& e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.rfind("split_const_subgraphs: computing a constant failed: ", 0), 0u) << msg;
    EXPECT_NE(msg.find("While executing %mm"), std::string::npos) << msg;
  }
  EXPECT_EQ(gm->graph().str(), before);
  EXPECT_FALSE(gm->named_buffers(false).contains("_FX_CONST_FOLDED_ATTRS"));
}

TEST(ConstFoldProperty, RandomGraphsKeepTheirOutputs) {
  for (uint64_t seed = 0; seed < 25; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    auto rg = fx_test::make_random_graph(seed);
    c10::IValue expected = rg.gm->forward(rg.inputs);
    size_t nodes_before = rg.gm->graph().nodes().size();
    auto r = fx::split_const_subgraphs(rg.gm);
    rg.gm->graph().lint();
    auto got = flat(rg.gm->forward(rg.inputs));
    auto want = flat(expected);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-6);
    expect_close(flat(fx::Interpreter(rg.gm).run(rg.inputs)), want, 1e-6);
    // Every constant call is gone from the graph.
    for (Node* n : rg.gm->graph().nodes()) {
      if (n->op() != Opcode::CallFunction) continue;
      bool has_input = false;
      for (Node* in : n->all_input_nodes()) has_input = has_input || in->op() != Opcode::GetAttr;
      EXPECT_TRUE(has_input) << n->format_node();
    }
    if (r.pass_result.modified) {
      EXPECT_LE(rg.gm->graph().nodes().size(), nodes_before);
    }
  }
}

}  // namespace
