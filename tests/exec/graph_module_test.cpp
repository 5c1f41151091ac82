// GraphModule: what it takes from root, attribute and submodule access,
// and behaving as a torch::nn::Module (parameters, to, eval).
#include "exec_test_util.h"

#include <fx/graph_module.h>

#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <gtest/gtest.h>

#include <set>

namespace {

using fx::Graph;
using fx::GraphModule;
using fx::Node;
using fx_test::error_of;
using fx_test::same;

/// root: layer1.0.conv1 (Conv2d 1→2, 1x1), layer1.0.extra, unused (Linear),
/// parameter `scale`, buffer `offset`.
std::shared_ptr<torch::nn::Module> make_root() {
  auto root = std::make_shared<torch::nn::Module>("Root");
  auto layer1 = root->register_module("layer1", std::make_shared<torch::nn::Module>("Layer"));
  auto block = layer1->register_module("0", std::make_shared<torch::nn::Module>("Block"));
  block->register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 2, 1)));
  block->register_module("extra", torch::nn::Linear(2, 2));
  root->register_module("unused", torch::nn::Linear(3, 3));
  root->register_parameter("scale", at::full({1}, 3.0f));
  root->register_buffer("offset", at::full({1}, 0.5f));
  return root;
}

/// x → conv1(x) * scale + offset + conv1.bias.sum()
std::shared_ptr<Graph> make_graph() {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* conv = g->call_module("layer1.0.conv1", {x});
  Node* scale = g->get_attr("scale");
  Node* offset = g->get_attr("offset");
  Node* bias = g->get_attr("layer1.0.conv1.bias");
  Node* mul = g->call_function("aten::mul", {conv, scale});
  Node* add = g->call_function("aten::add", {mul, offset});
  Node* bsum = g->call_method("sum", {bias});
  g->output(g->call_function("aten::add", {add, bsum}));
  return g;
}

std::set<std::string> module_names(torch::nn::Module& m) {
  std::set<std::string> out;
  for (const auto& kv : m.named_modules("", /*include_self=*/false)) out.insert(kv.key());
  return out;
}

std::set<std::string> keys(const torch::OrderedDict<std::string, at::Tensor>& d) {
  std::set<std::string> out;
  for (const auto& kv : d) out.insert(kv.key());
  return out;
}

TEST(GraphModule, TakesExactlyWhatTheGraphNamesFromRoot) {
  auto root = make_root();
  auto gm = std::make_shared<GraphModule>(root, make_graph());
  EXPECT_EQ(module_names(*gm), (std::set<std::string>{"layer1", "layer1.0", "layer1.0.conv1"}));
  EXPECT_EQ(keys(gm->named_parameters()),
            (std::set<std::string>{"scale", "layer1.0.conv1.weight", "layer1.0.conv1.bias"}));
  EXPECT_EQ(keys(gm->named_buffers()), (std::set<std::string>{"offset"}));
  // Intermediate modules are new and empty; the named objects are shared, not copied.
  EXPECT_EQ(gm->get_submodule("layer1")->name(), "Module");
  EXPECT_NE(gm->get_submodule("layer1").get(), root->named_children()["layer1"].get());
  auto root_conv = root->named_modules()["layer1.0.conv1"];
  EXPECT_EQ(gm->get_submodule("layer1.0.conv1").get(), root_conv.get());
  EXPECT_TRUE(gm->fetch_attr("scale").is_same(root->named_parameters()["scale"]));
  EXPECT_EQ(gm->class_name(), "GraphModule");
  EXPECT_EQ(gm->name(), "GraphModule");
}

TEST(GraphModule, MissingTargetNamesTheNode) {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* w = g->get_attr("layer1.0.nope");
  g->output(g->call_function("aten::add", {x, w}));
  std::string msg = error_of([&] { GraphModule gm(make_root(), g); });
  EXPECT_EQ(msg, "Node " + w->format_node() +
                     " referenced target layer1.0.nope but that target was not found in root (Root has no "
                     "submodule, parameter or buffer 'layer1.0.nope')");
  auto g2 = std::make_shared<Graph>();
  Node* m = g2->call_module("layer2.conv", {g2->placeholder("x")});
  g2->output(m);
  EXPECT_EQ(error_of([&] { GraphModule gm(make_root(), g2); }),
            "Node " + m->format_node() +
                " referenced target layer2.conv but that target was not found in root (Root has no submodule "
                "'layer2')");
}

TEST(GraphModule, RunsAndMatchesEager) {
  auto root = make_root();
  auto gm = std::make_shared<GraphModule>(root, make_graph());
  at::Tensor x = at::randn({1, 1, 2, 2});
  auto conv = root->named_modules()["layer1.0.conv1"]->as<torch::nn::Conv2d>();
  at::Tensor expected = conv->forward(x) * 3.0 + 0.5 + conv->bias.sum();
  EXPECT_TRUE(same(gm->forward(x), expected));
}

TEST(GraphModule, FetchAttrAndGetSubmodule) {
  auto gm = std::make_shared<GraphModule>(make_root(), make_graph());
  EXPECT_EQ(gm->fetch_attr("layer1.0.conv1.weight").sizes(), at::IntArrayRef({2, 1, 1, 1}));
  EXPECT_TRUE(same(gm->fetch_attr("offset"), at::full({1}, 0.5f)));
  EXPECT_EQ(error_of([&] { gm->fetch_attr("layer1.nope.weight"); }), "Node referenced nonexistent target layer1.nope");
  EXPECT_EQ(error_of([&] { gm->fetch_attr("layer1.0.conv1.nope"); }),
            "Node referenced nonexistent target layer1.0.conv1.nope");
  EXPECT_EQ(gm->get_submodule("").get(), gm.get());
  EXPECT_EQ(error_of([&] { gm->get_submodule("layer1.x"); }), "Module has no attribute `x`");
}

TEST(GraphModule, AddAndDeleteSubmodules) {
  auto gm = std::make_shared<GraphModule>(make_root(), make_graph());
  auto lin = torch::nn::Linear(2, 2);
  EXPECT_TRUE(gm->add_submodule("a.b.c", lin.ptr()));
  EXPECT_EQ(gm->get_submodule("a.b.c").get(), lin.ptr().get());
  EXPECT_EQ(gm->get_submodule("a.b")->name(), "Module");
  EXPECT_FALSE(gm->add_submodule("scale.x", lin.ptr()));  // a parameter is in the way
  EXPECT_TRUE(gm->add_submodule("a.b.c", torch::nn::Linear(3, 3).ptr()));  // replaces
  EXPECT_EQ(gm->get_submodule("a.b.c")->as<torch::nn::Linear>()->options.in_features(), 3);
  EXPECT_TRUE(gm->delete_submodule("a.b.c"));
  EXPECT_FALSE(gm->delete_submodule("a.b.c"));
  EXPECT_FALSE(gm->delete_submodule("scale"));  // not a module
  EXPECT_FALSE(gm->delete_submodule("nope.x"));
  EXPECT_EQ(module_names(*gm), (std::set<std::string>{"layer1", "layer1.0", "layer1.0.conv1", "a", "a.b"}));
}

TEST(GraphModule, DeleteAllUnusedSubmodulesKeepsWhatNodesUse) {
  auto gm = std::make_shared<GraphModule>(make_root(), make_graph());
  gm->add_submodule("extra.deep", torch::nn::Linear(1, 1).ptr());
  gm->add_submodule("layer1.0.spare", torch::nn::Linear(1, 1).ptr());
  auto seq = std::make_shared<torch::nn::Module>("Seq");
  seq->register_module("inner", torch::nn::Linear(1, 1));
  gm->add_submodule("called", seq);
  // A call_module keeps the called module's children alive.
  Node* out = gm->graph().output_node();
  {
    auto guard = gm->graph().inserting_before(out);
    gm->graph().call_module("called", {gm->graph().find_nodes(fx::Opcode::Placeholder)[0]});
  }
  gm->delete_all_unused_submodules();
  EXPECT_EQ(module_names(*gm),
            (std::set<std::string>{"layer1", "layer1.0", "layer1.0.conv1", "called", "called.inner"}));
}

TEST(GraphModule, IsAnOrdinaryModule) {
  auto root = make_root();
  root->eval();
  auto gm = std::make_shared<GraphModule>(root, make_graph());
  EXPECT_FALSE(gm->is_training());  // root's flag is copied
  gm->train();
  EXPECT_TRUE(gm->get_submodule("layer1.0.conv1")->is_training());
  gm->eval();
  EXPECT_FALSE(gm->get_submodule("layer1.0.conv1")->is_training());
  EXPECT_EQ(gm->parameters().size(), 3u);
  gm->to(at::kDouble);
  EXPECT_EQ(gm->fetch_attr("scale").scalar_type(), at::kDouble);
  at::Tensor y = gm->forward(at::ones({1, 1, 2, 2}, at::kDouble));
  EXPECT_EQ(y.scalar_type(), at::kDouble);
}

TEST(GraphModule, RegisterAttr) {
  auto gm = std::make_shared<GraphModule>(make_root(), make_graph());
  gm->register_attr("consts.k", at::ones({2}));
  EXPECT_EQ(keys(gm->named_buffers()).count("consts.k"), 1u);
  gm->register_attr("consts.w", at::ones({2}).requires_grad_());
  EXPECT_EQ(keys(gm->named_parameters()).count("consts.w"), 1u);
  at::Tensor before = gm->fetch_attr("offset");
  gm->register_attr("offset", at::full({1}, 7.0f));  // existing: same tensor, new data
  EXPECT_TRUE(gm->fetch_attr("offset").is_same(before));
  EXPECT_TRUE(same(before, at::full({1}, 7.0f)));
  EXPECT_EQ(error_of([&] { gm->register_attr("layer1", at::ones({1})); }),
            "register_attr: layer1 is a module, not a tensor");
}

}  // namespace

namespace {

TEST(GraphModuleForward, BracedListMeansTheVectorOverload) {
  // DESIGN.md spells gm(x) as gm->forward({x}): it must give the IValue result.
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  g->output(g->call_function("aten::neg", {x}));
  auto gm = fx_test::module_of(g);
  at::Tensor in = at::arange(3.0);
  c10::IValue boxed = gm->forward({in});
  static_assert(std::is_same_v<decltype(gm->forward({in})), c10::IValue>);
  static_assert(std::is_same_v<decltype(gm->forward(in)), at::Tensor>);
  EXPECT_TRUE(fx_test::same(boxed.toTensor(), -in));
  EXPECT_TRUE(fx_test::same(gm->forward(in), -in));
}

}  // namespace
