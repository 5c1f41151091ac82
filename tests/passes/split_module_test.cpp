// split_module and split_by_tags against torch.fx 1.13 (goldens from
// python/goldens/split_goldens.py), on values, on bad input and on random graphs.
#include <fx/import.h>
#include <fx/interpreter.h>
#include <fx/tensor_file.h>
#include <fx/passes/partitioner.h>
#include <fx/passes/split_module.h>
#include <fx/passes/split_utils.h>

#include "passes_test_util.h"

#include "fx_paths.h"
#include "random_graph.h"

#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

namespace {

std::string golden(const std::string& key) { return fx_test::golden_string("passes/goldens/split.json", key); }

using fx::Argument;
using fx::Graph;
using fx::GraphModule;
using fx::Node;

/// One line per node, as the golden script prints them.
std::string graph_text(const Graph& g) {
  std::string s;
  for (Node* n : g.nodes())
    s += std::string(fx::to_string(n->op())) + "|" + n->name() + "|" + n->target() + "|" + fx::format_args(n->args()) +
         "|" + fx::format_kwargs(n->kwargs()) + "\n";
  return s;
}

std::string module_text(GraphModule& gm, const std::map<std::string, std::string>* qualname_map = nullptr) {
  std::string s = "graph:\n" + graph_text(gm.graph());
  for (const auto& item : gm.named_children())
    if (auto child = std::dynamic_pointer_cast<GraphModule>(item.value()))
      s += "child " + item.key() + ":\n" + graph_text(child->graph());
  if (qualname_map) {
    s += "qualname_map:\n";
    for (const auto& [k, v] : *qualname_map) s += k + "=" + v + "\n";
  }
  return s;
}

/// The Python script's Root: param, linear, layer.sub.lin, buf.
std::shared_ptr<torch::nn::Module> make_root() {
  torch::manual_seed(0);
  auto root = std::make_shared<torch::nn::Module>("Root");
  root->register_parameter("param", torch::rand({3, 4}));
  root->register_module("linear", torch::nn::Linear(4, 5).ptr());
  auto layer = std::make_shared<torch::nn::Module>("Module");
  auto sub = std::make_shared<torch::nn::Module>("Nested");
  sub->register_module("lin", torch::nn::Linear(4, 4).ptr());
  layer->register_module("sub", sub);
  root->register_module("layer", layer);
  root->register_buffer("buf", torch::rand({3, 4}));
  return root;
}

/// g_docstring() of the golden script.
std::shared_ptr<GraphModule> docstring_gm() {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* y = g->placeholder("y");
  Node* p = g->get_attr("param");
  Node* a = g->call_function("aten::add", {x, p});
  Node* l = g->call_module("linear", {a});
  Node* c = g->call_function("aten::clamp", {l}, {{"min", 0.0}, {"max", 1.0}});
  Node* l1 = g->call_module("linear", {y});
  Node* c1 = g->call_function("aten::clamp", {l1}, {{"min", 0.0}, {"max", 1.0}});
  g->output(g->call_function("aten::add", {c, c1}));
  return std::make_shared<GraphModule>(make_root(), g);
}

/// g_multi() of the golden script, with its partition assignment.
std::shared_ptr<GraphModule> multi_gm() {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* y = g->placeholder("y");
  Node* b = g->get_attr("buf");
  Node* r = g->call_function("aten::relu", {x});
  Node* t = g->call_function("aten::tanh", {y});
  Node* m = g->call_function("aten::mul", {r, b});
  Node* a = g->call_function("aten::add", {r, t}, {{"alpha", 2}});
  Node* lo = g->call_function("aten::neg", {t});
  Node* cl = g->call_function("aten::clamp", {a}, {{"min", lo}});
  Node* n = g->call_module("layer.sub.lin", {m});
  Node* s = g->call_function("aten::sub", {n, r});
  Node* sg = g->call_function("aten::sigmoid", {cl});
  Node* z = g->call_function("aten::add", {s, b});
  g->output(Argument::tuple({z, sg, r, b}));
  return std::make_shared<GraphModule>(make_root(), g);
}
const std::map<std::string, int64_t> kMultiAssign = {{"relu", 0}, {"tanh", 1}, {"mul", 0}, {"add", 1},
                                                     {"neg", 2},  {"clamp", 2}, {"layer_sub_lin", 3},
                                                     {"sub", 3},  {"sigmoid", 2}, {"add_1", 3}};

std::shared_ptr<GraphModule> order_gm() {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* a = g->call_function("aten::relu", {x});
  Node* b = g->call_function("aten::neg", {x});
  g->output(g->call_function("aten::add", {a, b}));
  return std::make_shared<GraphModule>(make_root(), g);
}
const std::map<std::string, int64_t> kOrderAssign = {{"relu", 0}, {"neg", 1}, {"add", 2}};

fx::SplitCallback by_name(const std::map<std::string, int64_t>& assign) {
  return [&assign](Node* n) { return assign.at(n->name()); };
}

std::vector<at::Tensor> flatten(const c10::IValue& v) {
  if (v.isTensor()) return {v.toTensor()};
  std::vector<at::Tensor> out;
  if (v.isTuple())
    for (const auto& e : v.toTupleRef().elements()) {
      auto f = flatten(e);
      out.insert(out.end(), f.begin(), f.end());
    }
  if (v.isList())
    for (const auto& e : v.toListRef()) {
      auto f = flatten(e);
      out.insert(out.end(), f.begin(), f.end());
    }
  return out;
}

void expect_same_values(const c10::IValue& expected, const c10::IValue& actual, double atol = 1e-6) {
  auto e = flatten(expected), a = flatten(actual);
  ASSERT_EQ(e.size(), a.size());
  ASSERT_FALSE(e.empty());
  for (size_t i = 0; i < e.size(); ++i) EXPECT_TRUE(at::allclose(e[i], a[i], 0, atol)) << "output " << i;
}

std::vector<c10::IValue> two_inputs() {
  torch::manual_seed(1);
  return {torch::rand({3, 4}) * 2 - 1, torch::rand({3, 4}) * 2 - 1};
}

TEST(SplitModule, DocstringExampleMatchesTorchFx) {
  auto gm = docstring_gm();
  int64_t counter = 0;
  auto split = fx::split_module(gm, nullptr, [&](Node*) { return counter++ % 3; });
  EXPECT_EQ(module_text(*split), golden("split_docstring"));
  split->graph().lint();
  expect_same_values(gm->forward(two_inputs()), split->forward(two_inputs()));
  // The linear layer is shared with the original module, not copied.
  auto sub0 = std::dynamic_pointer_cast<GraphModule>(split->get_submodule("submod_0"));
  ASSERT_TRUE(sub0);
  EXPECT_EQ(sub0->get_submodule("linear").get(), gm->get_submodule("linear").get());
}

TEST(SplitModule, MultipleOutputsGetAttrKwargsNestedModuleMatchTorchFx) {
  for (bool keep : {false, true}) {
    auto gm = multi_gm();
    const std::string before = gm->graph().str();
    std::map<std::string, std::string> qualname_map;
    auto split = fx::split_module(gm, nullptr, by_name(kMultiAssign), &qualname_map, keep);
    EXPECT_EQ(module_text(*split, &qualname_map), golden(keep ? "split_multi_keep" : "split_multi")) << keep;
    EXPECT_EQ(gm->graph().str(), before);  // the input is never modified
    expect_same_values(gm->forward(two_inputs()), split->forward(two_inputs()));
  }
}

TEST(SplitModule, TopologicalOrderOfPartitionsMatchesTorchFx) {
  for (bool keep : {false, true}) {
    auto gm = order_gm();
    std::map<std::string, std::string> qualname_map;
    auto split = fx::split_module(gm, nullptr, by_name(kOrderAssign), &qualname_map, keep);
    EXPECT_EQ(module_text(*split, &qualname_map), golden(keep ? "split_order_keep" : "split_order")) << keep;
    std::vector<c10::IValue> in{torch::randn({3, 4})};
    expect_same_values(gm->forward(in), split->forward(in));
  }
}

TEST(SplitModule, SubmodulesRunThroughTheInterpreterToo) {
  auto gm = multi_gm();
  auto split = fx::split_module(gm, nullptr, by_name(kMultiAssign));
  fx::Interpreter interp(split);
  expect_same_values(gm->forward(two_inputs()), interp.run(two_inputs()));
  // And a submodule alone, through its own forward.
  auto sub2 = std::dynamic_pointer_cast<GraphModule>(split->get_submodule("submod_2"));
  ASSERT_TRUE(sub2);
  at::Tensor t = torch::randn({3, 4}), a = torch::randn({3, 4});
  at::Tensor got = sub2->forward({t, a}).toTensor();
  EXPECT_TRUE(at::allclose(got, torch::sigmoid(torch::clamp(a, -t)), 0, 1e-6));
}

TEST(SplitModule, CallbackMakingACycleIsAnErrorNamingTheNodes) {
  auto gm = multi_gm();
  const std::string before = gm->graph().str();
  auto assign = kMultiAssign;
  assign["sub"] = 0;  // sub reads layer_sub_lin (3), which reads mul (0): 0 -> 3 -> 0
  try {
    fx::split_module(gm, nullptr, by_name(assign));
    FAIL() << "no error";
  } catch (const fx::Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "split_module: cycle exists between partitions! submod_0 -> submod_3 -> submod_0 (each depends on the "
              "next):\n"
              "  node sub (submod_0) uses layer_sub_lin (submod_3)\n"
              "  node layer_sub_lin (submod_3) uses mul (submod_0)");
  }
  EXPECT_EQ(gm->graph().str(), before);
  gm->graph().lint();
  // The module still runs, and a good callback still splits it afterwards.
  auto split = fx::split_module(gm, nullptr, by_name(kMultiAssign));
  expect_same_values(gm->forward(two_inputs()), split->forward(two_inputs()));
}

TEST(SplitModule, NegativePartitionNumberIsAnError) {
  auto gm = order_gm();
  try {
    fx::split_module(gm, nullptr, [](Node* n) { return n->name() == "neg" ? -1 : 0; });
    FAIL() << "no error";
  } catch (const fx::Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "split_module: split_callback returned -1 for node neg; partition numbers must be non-negative "
              "(submod_N must be a valid name)");
  }
}

TEST(SplitModule, PartitionWithUnusedValuesIsKept) {
  // torch.fx 1.13 crashes (IndexError) on a partition nobody reads; fxcpp keeps and calls it.
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  g->call_function("aten::neg", {x});  // dead, alone in partition 1
  g->output(g->call_function("aten::relu", {x}));
  auto gm = std::make_shared<GraphModule>(make_root(), g);
  auto split = fx::split_module(gm, nullptr, [](Node* n) { return n->name() == "neg" ? 1 : 0; });
  EXPECT_EQ(split->graph().str(),
            "graph():\n"
            "    %x : [#users=2] = placeholder[target=x]\n"
            "    %submod_0 : [#users=1] = call_module[target=submod_0](args = (%x,), kwargs = {})\n"
            "    %submod_1 : [#users=0] = call_module[target=submod_1](args = (%x,), kwargs = {})\n"
            "    return submod_0");
  at::Tensor in = torch::randn({5});
  EXPECT_TRUE(at::equal(split->forward({in}).toTensor(), torch::relu(in)));
}

TEST(SplitModule, RandomGraphsKeepTheirOutputs) {
  int splits = 0, cycles = 0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    auto r = fx_test::make_random_graph(seed);
    const c10::IValue expected = r.gm->forward(r.inputs);
    std::mt19937_64 rng(seed);
    // Contiguous chunks of the program order never form a cycle.
    const int64_t chunk = 1 + static_cast<int64_t>(rng() % 12);
    int64_t i = 0;
    auto split = fx::split_module(r.gm, nullptr, [&](Node*) { return i++ / chunk; });
    split->graph().lint();
    expect_same_values(expected, split->forward(r.inputs));
    // Random assignments: either a clean cycle error or the same values.
    const int64_t parts = 1 + static_cast<int64_t>(rng() % 4);
    const std::string before = r.gm->graph().str();
    try {
      auto randomly = fx::split_module(r.gm, nullptr, [&](Node*) { return static_cast<int64_t>(rng() % parts); });
      randomly->graph().lint();
      expect_same_values(expected, randomly->forward(r.inputs));
      ++splits;
    } catch (const fx::Error& e) {
      EXPECT_NE(std::string(e.what()).find("split_module: cycle exists between partitions! submod_"),
                std::string::npos)
          << e.what();
      EXPECT_EQ(r.gm->graph().str(), before);
      ++cycles;
    }
  }
  EXPECT_GT(splits, 5);  // both outcomes are exercised
  EXPECT_GT(cycles, 5);
}

/// g_tags() of the golden script.
std::shared_ptr<GraphModule> tags_gm() {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* y = g->placeholder("y");
  Node* b = g->get_attr("buf");
  Node* r = g->call_function("aten::relu", {x});
  Node* m = g->call_function("aten::mul", {r, b});
  Node* t = g->call_function("aten::tanh", {y});
  Node* a = g->call_function("aten::add", {m, t});
  Node* s = g->call_function("aten::sub", {a, r});
  Node* n = g->call_function("aten::neg", {s});
  Node* k = g->call_function("aten::mul", {n, b});
  g->output(Argument::tuple({k, a, b}));
  const std::map<std::string, std::string> tags = {{"relu", "a"}, {"mul", "a"}, {"tanh", "b"},  {"add", "b"},
                                                    {"sub", "c"},  {"neg", "c"}, {"mul_1", "c"}};
  for (Node* node : g->nodes())
    if (tags.count(node->name())) fx::set_tag(node, tags.at(node->name()));
  return std::make_shared<GraphModule>(make_root(), g);
}

TEST(SplitByTags, MatchesTorchFx) {
  auto gm = tags_gm();
  auto split = fx::split_by_tags(gm, {"a", "b", "c"});
  EXPECT_EQ(module_text(*split), golden("split_by_tags"));
  split->graph().lint();
  expect_same_values(gm->forward(two_inputs()), split->forward(two_inputs()));
}

TEST(SplitByTags, RandomGraphsKeepTheirOutputs) {
  for (uint64_t seed = 0; seed < 30; ++seed) {
    auto r = fx_test::make_random_graph(seed);
    const c10::IValue expected = r.gm->forward(r.inputs);
    // Tags in program order: t0 for the first third of the calls, then t1, t2.
    std::vector<Node*> calls;
    for (Node* n : r.gm->graph().nodes())
      if (n->op() == fx::Opcode::CallFunction) calls.push_back(n);
    for (size_t i = 0; i < calls.size(); ++i) fx::set_tag(calls[i], "t" + std::to_string(3 * i / calls.size()));
    auto split = fx::split_by_tags(r.gm, {"t0", "t1", "t2"});
    split->graph().lint();
    expect_same_values(expected, split->forward(r.inputs));
  }
}

TEST(SplitByTags, BadTagsAreErrorsNamingTheNode) {
  auto gm = tags_gm();
  const std::string before = gm->graph().str();
  auto expect_error = [&](const std::vector<std::string>& tags, const fx::TagFn& tag_of, const std::string& msg) {
    try {
      fx::split_by_tags(gm, tags, tag_of);
      ADD_FAILURE() << "no error for " << msg;
    } catch (const fx::Error& e) {
      EXPECT_EQ(std::string(e.what()), msg);
    }
    EXPECT_EQ(gm->graph().str(), before);
  };
  expect_error({"a", "b"}, nullptr,
               "split_by_tags: node %sub : [#users=1] = call_function[target=aten::sub](args = (%add, %relu), kwargs = "
               "{}) has tag 'c', which is not in tags");
  expect_error({"b", "a", "c"}, nullptr,
               "split_by_tags: node %add : [#users=2] = call_function[target=aten::add](args = (%mul, %tanh), kwargs = "
               "{}) has tag 'b' but its input comes from tag 'a', which is later in tags");
  expect_error({"a", "b", "c"}, [](const Node* n) { return n->name() == "neg" ? std::string() : fx::get_tag(n); },
               "split_by_tags: node %neg : [#users=1] = call_function[target=aten::neg](args = (%sub,), kwargs = {}) "
               "has no tag");
}

TEST(SplitModuleModels, Resnet50SplitsIntoChunksWithTheSameOutput) {
  // Needs build/models/resnet50.pt (ctest: split_module_resnet50 in
  // tests/passes/split.cmake depends on the export fixture).
  const std::string dir = std::string(FX_BINARY_DIR) + "/models/";
  if (!std::filesystem::exists(dir + "resnet50.pt") || !std::filesystem::exists(dir + "resnet50.input.pt"))
    GTEST_SKIP() << "resnet50.pt not exported (python/export_models.py)";
  auto gm = fx::import_torchscript(dir + "resnet50.pt");
  std::vector<c10::IValue> inputs = fx::load_inputs(dir + "resnet50.input.pt");
  const c10::IValue expected = gm->forward(inputs);
  int64_t i = 0, calls = 0;
  auto split = fx::split_module(gm, nullptr, [&](Node*) { return i++ / 20; });
  for (Node* n : split->graph().nodes()) calls += n->op() == fx::Opcode::CallModule;
  EXPECT_EQ(calls, (i + 19) / 20);
  split->graph().lint();
  expect_same_values(expected, split->forward(inputs), 1e-5);
}

TEST(SplitModuleModels, Resnet50FunctionsFuseBetweenItsLayers) {
  const std::string dir = std::string(FX_BINARY_DIR) + "/models/";
  if (!std::filesystem::exists(dir + "resnet50.pt") || !std::filesystem::exists(dir + "resnet50.input.pt"))
    GTEST_SKIP() << "resnet50.pt not exported (python/export_models.py)";
  auto gm = fx::import_torchscript(dir + "resnet50.pt");
  std::vector<c10::IValue> inputs = fx::load_inputs(dir + "resnet50.input.pt");
  const c10::IValue expected = gm->forward(inputs);
  // A backend that runs every call_function but no layer (call_module).
  auto support = fx::create_op_support(
      [](const fx::SubmoduleMap&, const Node* n) { return n->op() == fx::Opcode::CallFunction; });
  fx::CapabilityBasedPartitioner p(gm, support, /*allows_single_node_partition=*/true);
  auto parts = p.propose_partitions();
  ASSERT_FALSE(parts.empty());
  for (const auto& part : parts) EXPECT_TRUE(fx::validate_partition(part.nodes));
  p.fuse_partitions(parts);
  gm->graph().lint();
  // Every function call is inside a fused module now; the top level keeps
  // the layers, the fused calls and the getitems unpacking their results.
  for (Node* n : gm->graph().nodes())
    if (n->op() == fx::Opcode::CallFunction) {
      EXPECT_EQ(n->target(), "operator.getitem") << n->format_node();
    }
  expect_same_values(expected, gm->forward(inputs), 1e-5);
}

}  // namespace
