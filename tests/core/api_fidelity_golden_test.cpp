// Differential test against Python torch.fx 1.13 (issue #15): the same graphs
// as python/goldens/api_fidelity_goldens.py builds, compared character for
// character with what torch.fx printed (tests/core/goldens/api_fidelity.json,
// regenerate with /usr/bin/python3 python/goldens/api_fidelity_goldens.py).
#include <fx/graph.h>

#include "../common/golden_string.h"

#include <gtest/gtest.h>

namespace {

using fx::Argument;
using fx::Graph;
using fx::Node;
using fx::Opcode;

std::string golden(const std::string& key) { return fx_test::golden_string("core/goldens/api_fidelity.json", key); }

std::string joined_names(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : " ") + n;
  return s;
}

TEST(ApiGolden, IterationUnderEraseAndInsert) {
  {
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
    EXPECT_EQ(joined_names(seen), golden("iteration_erase"));
  }
  {
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
    EXPECT_EQ(joined_names(seen), golden("iteration_insert"));
  }
}

TEST(ApiGolden, NoOutputAndTwoOutputs) {
  Graph g;
  Node* x = g.placeholder("x");
  g.call_function("aten::neg", {x});
  g.call_function("aten::relu", {x});
  g.lint();
  EXPECT_EQ(g.eliminate_dead_code() ? "True" : "False", golden("no_output_dce"));
  g.output(x);
  g.output(x);
  g.lint();
  EXPECT_EQ(g.str(), golden("two_outputs_str"));
  EXPECT_EQ(g.python_code().src, golden("two_outputs_code"));
}

TEST(ApiGolden, Slices) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* size = g.call_method("size", {x, 1});
  Node* a = g.call_function("operator.getitem",
                            {x, Argument::tuple({Argument::slice(nullptr, nullptr, nullptr), Argument::slice(1, size, 2),
                                                 Argument::ellipsis(), nullptr})});
  Node* b = g.call_function("operator.getitem", {Argument::list({x, x, x}), Argument::slice(nullptr, -1, nullptr)});
  g.output(Argument::tuple({a, b}));
  EXPECT_EQ(g.str(), golden("slice_str"));
  EXPECT_EQ(g.python_code().src, golden("slice_code"));
}

TEST(ApiGolden, PrintTabular) {
  Graph g;
  Node* x = g.placeholder("x");
  g.output(g.call_method("relu", {x}));
  EXPECT_EQ(g.tabular(), golden("tabular"));
}

TEST(ApiGolden, VerboseCode) {
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
  EXPECT_EQ(g.python_code("self", true).src, golden("verbose_code"));
}

TEST(ApiGolden, TypeAnnotations) {
  Graph g;
  Node* y = g.placeholder("y", std::nullopt, "torch.Tensor");
  Node* r = g.create_node(Opcode::CallFunction, "aten::relu", {y}, {}, std::nullopt, "torch.Tensor");
  g.output(r, "torch.Tensor");
  EXPECT_EQ(g.str(), golden("types_str"));
  EXPECT_EQ(g.python_code().src, golden("types_code"));
}

}  // namespace
