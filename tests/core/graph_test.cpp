// Graph: names, insertion points, erasure, copying, DCE, lint, iteration.
#include <fx/error.h>
#include <fx/graph.h>
#include <fx/target.h>

#include "core_test_util.h"

#include <gtest/gtest.h>

namespace {

using fx::Argument;
using fx::Graph;
using fx::Node;
using fx::Opcode;

using fx_test::error_of;
using fx_test::node_names;

TEST(GraphNames, FollowTorchFxRules) {
  Graph g;
  Node* x = g.placeholder("x");
  EXPECT_EQ(g.call_function("aten::add", {x, x})->name(), "add");
  EXPECT_EQ(g.call_function("aten::add.Tensor", {x, x})->name(), "add_1");
  EXPECT_EQ(g.call_function("operator.add", {x, x})->name(), "add_2");
  EXPECT_EQ(g.call_module("layer1.0.conv1", {x})->name(), "layer1_0_conv1");
  EXPECT_EQ(g.get_attr("layer1.0.conv1.weight")->name(), "layer1_0_conv1_weight");
  EXPECT_EQ(g.placeholder("input")->name(), "input_1");  // builtins are taken
  EXPECT_EQ(g.call_function("getattr", {x, "shape"})->name(), "getattr_1");
  fx::register_function("torch._assert", [](std::vector<c10::IValue>&, fx::ValueKwargs&) { return c10::IValue(); });
  EXPECT_EQ(g.call_function("torch._assert", {true, "msg"})->name(), "_assert");  // callable.__name__
  EXPECT_EQ(g.call_method("__add__", {x, x})->name(), "add_3");
  EXPECT_EQ(g.call_method("myMethod", {x})->name(), "my_method");
  EXPECT_EQ(g.create_node(Opcode::CallFunction, "aten::relu", {x}, {}, std::string("0bad.name"))->name(), "_0bad_name");
  EXPECT_EQ(g.create_node(Opcode::CallFunction, "aten::relu", {x}, {}, std::string("add_7"))->name(), "add_7");
  EXPECT_EQ(g.call_function("aten::add", {x, x})->name(), "add_8");
  EXPECT_EQ(g.placeholder("x")->name(), "x_1");
  EXPECT_EQ(g.placeholder("x")->target(), "x");
}

TEST(GraphNames, ChainOfAddsIsNumberedInOrder) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* v = x;
  for (int i = 0; i < 1000; ++i) v = g.call_function("aten::add", {v, x});
  EXPECT_EQ(v->name(), "add_999");
  EXPECT_EQ(g.nodes().size(), 1001u);
}

TEST(GraphInsert, InsertingBeforeAndAfterAreScopedAndNestable) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* r = g.call_function("aten::relu", {x});
  g.output(r);
  {
    auto after = g.inserting_after(x);
    g.call_function("aten::neg", {x});
    g.call_function("aten::sin", {x});  // torch.fx: each new node goes right after x
    {
      auto before = g.inserting_before(r);
      g.call_function("aten::cos", {x});
    }
    g.call_function("aten::tan", {x});
  }
  g.call_function("aten::exp", {x});  // back at the end
  EXPECT_EQ(node_names(g), (std::vector<std::string>{"x", "tan", "sin", "neg", "cos", "relu", "output", "exp"}));
  {
    auto start = g.inserting_before(nullptr);
    g.placeholder("first");
  }
  EXPECT_EQ(g.nodes().to_vector().front()->name(), "first");
}

TEST(GraphErase, RefusesNodesWithUsersAndLeavesTheGraphAlone) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* add = g.call_function("aten::add", {x, x});
  Node* relu = g.call_function("aten::relu", {add});
  g.output(relu);
  const std::string before = g.str();
  EXPECT_EQ(error_of([&] { g.erase_node(add); }),
            "Tried to erase Node add but it still had 1 users in the graph: {relu: None}!");
  EXPECT_EQ(g.str(), before);
  relu->replace_all_uses_with(add);
  g.erase_node(relu);
  EXPECT_EQ(node_names(g), (std::vector<std::string>{"x", "add", "output"}));
  EXPECT_EQ(add->users().size(), 1u);
  EXPECT_THROW(g.erase_node(relu), fx::Error);  // already erased
  g.lint();
}

TEST(GraphIteration, ErasingTheCurrentNodeIsSafeAndReverseWorks) {
  Graph g;
  Node* x = g.placeholder("x");
  for (int i = 0; i < 5; ++i) g.call_function("aten::neg", {x});
  g.output(x);
  for (Node* n : g.nodes())
    if (n->target() == "aten::neg") g.erase_node(n);
  EXPECT_EQ(node_names(g), (std::vector<std::string>{"x", "output"}));
  std::vector<std::string> rev;
  for (Node* n : g.nodes().reversed()) rev.push_back(n->name());
  EXPECT_EQ(rev, (std::vector<std::string>{"output", "x"}));
}

TEST(GraphCopy, NodeCopyAndGraphCopyMapInputs) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function("aten::add", {x, x}, {{"alpha", 2}});
  a->meta()["tag"] = std::string("t");
  g.output(Argument::tuple({a, x}));

  Graph h;
  std::unordered_map<const Node*, Node*> val_map;
  Node* y = h.placeholder("y");
  val_map[x] = y;
  auto out = h.graph_copy(g, val_map);
  ASSERT_TRUE(out.has_value());
  h.output(*out);
  EXPECT_EQ(h.str(),
            "graph():\n"
            "    %y : [#users=2] = placeholder[target=y]\n"
            "    %add : [#users=1] = call_function[target=aten::add](args = (%y, %y), kwargs = {alpha: 2})\n"
            "    return (add, y)");
  EXPECT_EQ(std::any_cast<std::string>(val_map.at(a)->meta().at("tag")), "t");
  h.lint();

  Graph k;
  Node* z = k.placeholder("z");
  Node* c = k.node_copy(a, [&](Node*) { return z; });
  EXPECT_EQ(c->format_node(), "%add : [#users=0] = call_function[target=aten::add](args = (%z, %z), kwargs = {alpha: 2})");
  EXPECT_THROW(k.node_copy(a, [](Node* n) { return n; }), fx::Error);  // forgot to map: refused
}

TEST(GraphDce, RemovesDeadPureNodesOnly) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* unused_input = g.placeholder("unused");
  Node* dead1 = g.call_function("aten::neg", {x});
  g.call_function("aten::relu", {dead1});
  g.call_function("aten::add_", {x, 1});  // mutates x: impure
  g.call_module("m", {x});                // modules are impure
  Node* live = g.call_function("aten::sin", {x});
  g.output(live);
  EXPECT_TRUE(g.eliminate_dead_code());
  EXPECT_EQ(node_names(g), (std::vector<std::string>{"x", "unused", "add_", "m", "sin", "output"}));
  EXPECT_FALSE(g.eliminate_dead_code());
  (void)unused_input;
}

TEST(GraphLint, ReportsTheOffendingNode) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function("aten::neg", {x});
  Node* b = g.call_function("aten::relu", {a});
  g.lint();  // no output node: fine, as in torch.fx
  g.output(b);
  g.lint();
  x->append(b);  // b now runs before its input a
  std::string msg = error_of([&] { g.lint(); });
  EXPECT_EQ(msg.substr(0, msg.find('\n')),
            "Argument 'neg' of Node 'relu' was used before it has been defined! Please check that Nodes in the graph "
            "are topologically ordered");
  a->append(b);
  g.lint();
  g.output(x);
  g.lint();  // two output nodes: torch.fx's lint has no rule against it either
}

TEST(GraphTargets, UnknownTargetsFailAtCreationWithSuggestions) {
  Graph g;
  Node* x = g.placeholder("x");
  std::string msg = error_of([&] { g.call_function("aten::addd", {x, x}); });
  EXPECT_EQ(msg.rfind("unknown call_function target 'aten::addd'; did you mean aten::add", 0), 0u) << msg;
  EXPECT_EQ(error_of([&] { g.call_function("aten::add.Bogus", {x, x}); }).rfind("unknown overload 'Bogus' of call_function target 'aten::add'; it has:", 0), 0u);
  EXPECT_THROW(g.call_function("not_a_function", {x}), fx::TargetError);
  EXPECT_EQ(g.nodes().size(), 1u);
  fx::register_function("mylib::scale", [](std::vector<c10::IValue>& a, fx::ValueKwargs&) { return a[0]; });
  EXPECT_EQ(g.call_function("mylib::scale", {x, 2.0})->name(), "scale");
}

TEST(GraphFind, FindNodesByOpAndTarget) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function("aten::add", {x, x});
  g.call_function("aten::neg", {a});
  Node* b = g.call_function("aten::add", {a, x});
  g.output(b);
  auto adds = g.find_nodes(Opcode::CallFunction, std::string("aten::add"));
  ASSERT_EQ(adds.size(), 2u);
  EXPECT_EQ(adds[0], a);
  EXPECT_EQ(adds[1], b);
  EXPECT_EQ(g.find_nodes(Opcode::CallFunction).size(), 3u);
  EXPECT_EQ(g.output_node()->op(), Opcode::Output);
}

}  // namespace
