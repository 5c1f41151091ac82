// torch.fx API fidelity (issue #15), IR layer: node iteration under erasure,
// lint without an output rule, DCE of side-effectful ops, slice/Ellipsis
// arguments, renaming and retargeting nodes, type annotations, node_copy,
// print_tabular widths and verbose code. Every expected string below is what
// Python torch.fx 1.13 prints for the same graph (targets mapped to ATen
// names); where fxcpp deliberately does better, the test says so.
#include <fx/error.h>
#include <fx/graph.h>
#include <fx/target.h>

#include "core_test_util.h"

#include <gtest/gtest.h>

#include <sstream>

namespace {

using fx::Argument;
using fx::Graph;
using fx::Node;
using fx::Opcode;

using fx_test::error_of;
using fx_test::node_names;

// ---- 1. iteration ------------------------------------------------------------

TEST(ApiIteration, SkipsNodesErasedDuringTheLoop) {
  // torch.fx: for n in g.nodes: if n is neg: erase relu (a later node), then neg
  // → visits ['x', 'neg', 'sin', 'output'].
  Graph g;
  Node* x = g.placeholder("x");
  Node* neg = g.call_function("aten::neg", {x});
  Node* relu = g.call_function("aten::relu", {neg});
  g.output(g.call_function("aten::sin", {x}));
  std::vector<std::string> seen;
  for (Node* n : g.nodes()) {
    seen.push_back(n->name());
    if (n == neg) {
      g.erase_node(relu);
      g.erase_node(neg);
    }
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"x", "neg", "sin", "output"}));
  g.lint();
}

TEST(ApiIteration, VisitsNodesInsertedAfterTheCurrentOne) {
  // torch.fx reads the successor lazily: ['x', 'relu', 'neg', 'output'].
  Graph g;
  Node* x = g.placeholder("x");
  g.output(g.call_function("aten::neg", {x}));
  std::vector<std::string> seen;
  for (Node* n : g.nodes()) {
    seen.push_back(n->name());
    if (n == x) {
      auto guard = g.inserting_after(x);
      g.call_function("aten::relu", {x});
    }
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"x", "relu", "neg", "output"}));
}

TEST(ApiIteration, ReversedLoopSkipsErasedNodesToo) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function("aten::neg", {x});
  Node* b = g.call_function("aten::relu", {x});
  Node* c = g.call_function("aten::sin", {x});
  g.output(x);
  std::vector<std::string> seen;
  for (Node* n : g.nodes().reversed()) {
    seen.push_back(n->name());
    if (n == c) {
      g.erase_node(c);
      g.erase_node(b);  // the next one the loop would visit
    }
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"output", "sin", "neg", "x"}));
  EXPECT_EQ(node_names(g), (std::vector<std::string>{"x", "neg", "output"}));
  (void)a;
}

// ---- 2. lint without an output rule -------------------------------------------

TEST(ApiLint, AcceptsGraphsWithoutOrWithTwoOutputs) {
  // torch.fx: lint() passes, DCE returns True and leaves ['x'].
  Graph g;
  Node* x = g.placeholder("x");
  g.call_function("aten::neg", {x});
  g.call_function("aten::relu", {x});
  g.lint();
  EXPECT_TRUE(g.eliminate_dead_code());
  EXPECT_EQ(node_names(g), (std::vector<std::string>{"x"}));
  g.output(x);
  g.output(x);
  g.lint();
  EXPECT_EQ(g.str(),
            "graph():\n"
            "    %x : [#users=2] = placeholder[target=x]\n"
            "    return x\n"
            "    return x");
  EXPECT_EQ(g.python_code().src, "\n\n\ndef forward(self, x):\n    return x\n    return x\n    ");
}

// ---- 3. DCE keeps side-effectful ops ------------------------------------------

TEST(ApiDeadCode, KeepsProfilerAndAssertOps) {
  // torch.fx keeps _record_function_enter/_exit and torch._assert:
  // ['x', '_record_function_enter', '_record_function_exit', '_assert', 'output'].
  fx::register_function(
      "torch._assert", [](std::vector<c10::IValue>&, fx::ValueKwargs&) { return c10::IValue(); }, /*impure=*/true);
  Graph g;
  Node* x = g.placeholder("x");
  Node* enter = g.call_function("profiler::_record_function_enter", {"foo"});
  g.call_function("profiler::_record_function_exit", {enter});
  g.call_function("torch._assert", {true, "msg"});
  g.call_function("profiler::_record_function_enter_new", {"bar"});
  // torch.fx 1.13 drops aten::_assert_async (not in _side_effectful_functions);
  // fxcpp keeps every operator that returns nothing: it runs only for its effect.
  g.call_function("aten::_assert_async", {x});
  g.call_function("aten::neg", {x});  // pure: removed
  g.output(x);
  EXPECT_TRUE(fx::is_impure_function("profiler::_record_function_exit._RecordFunction"));
  EXPECT_FALSE(fx::is_impure_function("aten::neg"));
  EXPECT_TRUE(g.eliminate_dead_code());
  EXPECT_EQ(node_names(g), (std::vector<std::string>{"x", "_record_function_enter", "_record_function_exit", "_assert",
                                                     "_record_function_enter_new", "_assert_async", "output"}));
}

// ---- 4. slice and Ellipsis arguments ------------------------------------------

/// x[:, 1:size:2, ..., None] and [x, x, x][:-1], as torch.fx 1.13 records them.
struct SliceGraph {
  Graph g;
  Node* x;
  Node* size;
  Node* getitem;
  Node* getitem_1;
  SliceGraph() {
    x = g.placeholder("x");
    size = g.call_method("size", {x, 1});
    getitem = g.call_function(
        "operator.getitem",
        {x, Argument::tuple({Argument::slice(nullptr, nullptr, nullptr), Argument::slice(1, size, 2),
                             Argument::ellipsis(), nullptr})});
    getitem_1 = g.call_function("operator.getitem",
                                {Argument::list({x, x, x}), Argument::slice(nullptr, -1, nullptr)});
    g.output(Argument::tuple({getitem, getitem_1}));
  }
};

TEST(ApiSlice, PrintsLikePython) {
  SliceGraph s;
  EXPECT_EQ(s.g.str(),
            "graph():\n"
            "    %x : [#users=3] = placeholder[target=x]\n"
            "    %size : [#users=1] = call_method[target=size](args = (%x, 1), kwargs = {})\n"
            "    %getitem : [#users=1] = call_function[target=operator.getitem](args = (%x, (slice(None, None, None), "
            "slice(1, size, 2), Ellipsis, None)), kwargs = {})\n"
            "    %getitem_1 : [#users=1] = call_function[target=operator.getitem](args = ([%x, %x, %x], slice(None, "
            "-1, None)), kwargs = {})\n"
            "    return (getitem, getitem_1)");
  EXPECT_EQ(s.g.python_code().src,
            "\n\n\ndef forward(self, x):\n"
            "    size = x.size(1)\n"
            "    getitem = x[(slice(None, None, None), slice(1, size, 2), Ellipsis, None)];  size = None\n"
            "    getitem_1 = [x, x, x][slice(None, -1, None)];  x = None\n"
            "    return (getitem, getitem_1)\n"
            "    ");
}

TEST(ApiSlice, NodesInsideASliceAreUsesAndMapLikeAnyArgument) {
  SliceGraph s;
  EXPECT_EQ(s.size->users().to_vector(), (std::vector<Node*>{s.getitem}));
  EXPECT_EQ(s.getitem->all_input_nodes(), (std::vector<Node*>{s.x, s.size}));
  s.g.lint();
  const Argument idx = s.getitem->args()[1];
  // map_arg rebuilds the slice with the node replaced.
  Argument mapped = fx::map_arg(idx, [&](Node*) -> Argument { return 7; });
  EXPECT_EQ(mapped.repr(), "(slice(None, None, None), slice(1, 7, 2), Ellipsis, None)");
  EXPECT_EQ(idx.items()[1].slice_parts()[1].to_node(), s.size);  // the original is untouched
  EXPECT_TRUE(idx.items()[1].is_slice());
  EXPECT_EQ(idx, s.getitem->args()[1]);
  EXPECT_NE(mapped, idx);
  // replace_all_uses_with reaches into the slice.
  Node* n;
  {
    auto guard = s.g.inserting_after(s.size);
    n = s.g.call_method("size", {s.x, 2});
  }
  s.size->replace_all_uses_with(n);
  EXPECT_EQ(s.getitem->args()[1].items()[1].str(), "slice(1, size_1, 2)");
  EXPECT_TRUE(s.size->users().empty());
  s.g.erase_node(s.size);
  s.g.lint();
}

TEST(ApiSlice, CopiesAndRoundTripsThroughIValues) {
  SliceGraph s;
  Graph h;
  std::unordered_map<const Node*, Node*> val_map;
  auto out = h.graph_copy(s.g, val_map);
  h.output(*out);
  h.lint();
  EXPECT_EQ(h.str(), s.g.str());
  // Constant slices travel as IValues and come back as slices.
  Argument a = Argument::tuple({Argument::slice(1, nullptr, -1), Argument::ellipsis(), 0});
  c10::IValue v = a.to_ivalue();
  EXPECT_TRUE(fx::is_slice_ivalue(v.toTupleRef().elements()[0]));
  EXPECT_TRUE(fx::is_ellipsis_ivalue(v.toTupleRef().elements()[1]));
  EXPECT_FALSE(fx::is_slice_ivalue(c10::ivalue::Tuple::create({c10::IValue(), c10::IValue(), c10::IValue()})));
  EXPECT_EQ(Argument::from_ivalue(v), a);
  EXPECT_EQ(Argument::from_ivalue(v).repr(), "(slice(1, None, -1), Ellipsis, 0)");
  EXPECT_EQ(error_of([&] { (void)Argument(3).slice_parts(); }), "Argument holds a int, not a slice");
}

// ---- 5. set_name, set_target, types, node_copy ---------------------------------

TEST(ApiNode, SetNameKeepsNamesUnique) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* add = g.call_function("aten::add", {x, x});
  Node* neg = g.call_function("aten::neg", {add});
  g.output(neg);
  // torch.fx 1.13's node.name = 'neg' makes two nodes named neg and lint then
  // fails ("Node redefined name neg!"); fxcpp picks the next free name.
  EXPECT_EQ(add->set_name("neg"), "neg_1");
  EXPECT_EQ(add->set_name("neg_1"), "neg_1");  // its own name: unchanged
  g.lint();
  EXPECT_EQ(add->set_name("foo"), "foo");
  // torch.fx after add.name = 'foo':
  EXPECT_EQ(g.python_code().src,
            "\n\n\ndef forward(self, x):\n"
            "    foo = torch.ops.aten.add(x, x);  x = None\n"
            "    neg = torch.ops.aten.neg(foo);  foo = None\n"
            "    return neg\n"
            "    ");
  EXPECT_EQ(g.call_function("aten::add", {x, x})->name(), "add_1");  // "add" stays reserved
  EXPECT_EQ(add->set_name("1st.value"), "_1st_value");               // made a valid identifier
}

TEST(ApiNode, SetTargetRetargetsInPlaceAndRejectsUnknownTargets) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* add = g.call_function("aten::add", {x, x});
  g.output(add);
  const uint64_t v = g.version();
  add->set_target("aten::mul");
  EXPECT_GT(g.version(), v);
  EXPECT_EQ(add->format_node(), "%add : [#users=1] = call_function[target=aten::mul](args = (%x, %x), kwargs = {})");
  const std::string before = g.str();
  try {
    add->set_target("aten::mull");
    FAIL() << "no error";
  } catch (const fx::TargetError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("Node add: cannot retarget to aten::mull: ", 0), 0u) << e.what();
  }
  EXPECT_EQ(g.str(), before);  // unchanged
  // Revalidated against the new schemas: aten::neg takes one argument.
  // (torch.fx accepts node.target = torch.neg and fails only when it runs.)
  const std::string msg = error_of([&] { add->set_target("aten::neg"); });
  EXPECT_EQ(msg.substr(0, msg.find(';')),
            "Node add: cannot retarget to aten::neg: no overload takes 2 positional arguments");
  EXPECT_NE(msg.find("\n  aten::neg(Tensor self) -> Tensor"), std::string::npos) << msg;
  EXPECT_EQ(g.str(), before);
  add->update_kwarg("alpha", 2);
  const std::string div_msg = error_of([&] { add->set_target("aten::div"); });
  EXPECT_EQ(div_msg.substr(0, div_msg.find(';')),
            "Node add: cannot retarget to aten::div: no overload takes 2 positional arguments and keyword arguments "
            "alpha");
  add->set_target("aten::sub");  // sub(Tensor self, Tensor other, *, Scalar alpha=1)
  EXPECT_EQ(add->target(), "aten::sub");
  add->set_kwargs({});
  EXPECT_EQ(error_of([&] { x->set_target(""); }), "Node x: a placeholder node needs a target");
  g.erase_node(g.output_node());
  g.erase_node(add);
  EXPECT_EQ(error_of([&] { add->set_target("aten::sub"); }),
            "Node add was erased from the graph and cannot be used");
}

TEST(ApiNode, TypeAnnotationsPrintAsTorchFxDoes) {
  // torch.fx: g.placeholder('y', type_expr=torch.Tensor); create_node(..., type_expr=torch.Tensor);
  // g.output(z, type_expr=torch.Tensor).
  Graph g;
  Node* y = g.placeholder("y", std::nullopt, "torch.Tensor");
  Node* relu = g.create_node(Opcode::CallFunction, "aten::relu", {y}, {}, std::nullopt, "torch.Tensor");
  g.output(relu, "torch.Tensor");
  EXPECT_EQ(y->type(), "torch.Tensor");
  EXPECT_EQ(g.str(),
            "graph():\n"
            "    %y : torch.Tensor [#users=1] = placeholder[target=y]\n"
            "    %relu : torch.Tensor [#users=1] = call_function[target=aten::relu](args = (%y,), kwargs = {})\n"
            "    return relu");
  EXPECT_EQ(g.python_code().src,
            "\n\n\ndef forward(self, y : torch.Tensor) -> torch.Tensor:\n"
            "    relu : torch.Tensor = torch.ops.aten.relu(y);  y = None\n"
            "    return relu\n"
            "    ");
  relu->set_type("");
  EXPECT_EQ(relu->format_node(), "%relu : [#users=1] = call_function[target=aten::relu](args = (%y,), kwargs = {})");
}

TEST(ApiNode, NodeCopyDefaultsToTheIdentity) {
  // torch.fx: g.node_copy(size) → size_1 with args (x, 1), type and meta copied.
  Graph g;
  Node* x = g.placeholder("x");
  Node* size = g.create_node(Opcode::CallMethod, "size", {x, 1}, {}, std::nullopt, "int");
  size->meta()["k"] = 3;
  Node* copy = g.node_copy(size);
  EXPECT_EQ(copy->name(), "size_1");
  EXPECT_EQ(copy->args(), size->args());
  EXPECT_EQ(copy->type(), "int");
  EXPECT_EQ(std::any_cast<int>(copy->meta().at("k")), 3);
  EXPECT_EQ(x->users().size(), 2u);
  g.output(copy);
  g.lint();
  // Copying a node of another graph without a transform leaves foreign
  // inputs: an error naming them, and this graph unchanged.
  Graph h;
  const std::string before = h.str();
  EXPECT_EQ(error_of([&] { h.node_copy(size); }).substr(0, 48), "Argument x of Node size does not belong to this ");
  EXPECT_EQ(h.str(), before);
}

// ---- 6. printing -------------------------------------------------------------

TEST(ApiPrinting, TabularColumnsAreAtLeastHeaderPlusTwo) {
  // torch.fx (tabulate 0.8.9) for x → relu → output (target aten.relu there):
  Graph g;
  Node* x = g.placeholder("x");
  g.output(g.call_function("aten::relu", {x}));
  EXPECT_EQ(g.tabular(),
            "opcode         name    target      args     kwargs\n"
            "-------------  ------  ----------  -------  --------\n"
            "placeholder    x       x           ()       {}\n"
            "call_function  relu    aten::relu  (x,)     {}\n"
            "output         output  output      (relu,)  {}\n");
}

TEST(ApiPrinting, VerboseCodeSummarisesStackTraces) {
  // torch.fx 1.13 print_readable() / python_code(verbose=True).
  Graph g;
  Node* x = g.placeholder("x");
  Node* relu = g.call_function("aten::relu", {x});
  relu->set_stack_trace("  File \"m.py\", line 4, in forward\n    y = torch.relu(x)\n");
  Node* neg = g.call_function("aten::neg", {relu});
  neg->set_stack_trace(relu->stack_trace());
  Node* sin = g.call_function("aten::sin", {neg});
  Node* cos = g.call_function("aten::cos", {sin});
  cos->set_stack_trace("ctx line\n  File \"n.py\", line 9, in f\n    return z.cos()");
  g.output(cos);
  EXPECT_EQ(g.python_code("self", /*verbose=*/true).src,
            "\n\n\ndef forward(self, x):\n"
            "    \n"
            "    # File: m.py:4, code: y = torch.relu(x)\n"
            "    relu = torch.ops.aten.relu(x);  x = None\n"
            "    neg = torch.ops.aten.neg(relu);  relu = None\n"
            "    \n"
            "    # No stacktrace found for following nodes \n"
            "    sin = torch.ops.aten.sin(neg);  neg = None\n"
            "    \n"
            "    # ctx line, File: n.py:9, code: return z.cos()\n"
            "    cos = torch.ops.aten.cos(sin);  sin = None\n"
            "    return cos\n"
            "    ");
  // Not verbose: no comments.
  EXPECT_EQ(g.python_code().src.find('#'), std::string::npos);
}

}  // namespace
