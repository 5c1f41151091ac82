// SubgraphMatcher on its own: options, binding order, undo of failed
// partial matches, lists bound to placeholders, cycles, linear candidates.
#include <fx/passes/subgraph_matcher.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using fx::Argument;
using fx::Graph;
using fx::Node;
using fx::Opcode;

std::vector<std::string> names(const std::vector<Node*>& ns) {
  std::vector<std::string> out;
  for (Node* n : ns) out.push_back(n->name());
  return out;
}

TEST(SubgraphMatcher, BindsInTorchFxOrder) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  g.output(g.call_function("aten::relu", {g.call_function("aten::add", {x, y})}));
  Graph p;
  Node* a = p.placeholder("a");
  Node* b = p.placeholder("b");
  p.output(p.call_function("aten::relu", {p.call_function("aten::add", {a, b})}));
  fx::SubgraphMatcher m(p);
  EXPECT_EQ(names(m.pattern_anchors()), (std::vector<std::string>{"relu"}));
  auto matches = m.match(g);
  ASSERT_EQ(matches.size(), 1u);
  std::vector<std::string> order;
  for (const auto& [pn, v] : matches[0].nodes_map) order.push_back(pn->name() + "->" + v.to_node()->name());
  // torch.fx's dict order: anchor first, then depth first through args.
  EXPECT_EQ(order, (std::vector<std::string>{"relu->relu", "add->add", "a->x", "b->y"}));
  EXPECT_EQ(matches[0].placeholder_nodes[0].to_node(), x);
  EXPECT_EQ(names(matches[0].returning_nodes), (std::vector<std::string>{"relu"}));
}

TEST(SubgraphMatcher, OneGraphNodeCannotMatchTwoPlaceholders) {
  // As torch.fx: add(x, y) does not match add(a, a).
  Graph g;
  Node* x = g.placeholder("x");
  g.output(g.call_function("aten::add", {x, x}));
  Graph p;
  Node* a = p.placeholder("a");
  Node* b = p.placeholder("b");
  p.output(p.call_function("aten::add", {a, b}));
  EXPECT_TRUE(fx::SubgraphMatcher(p).match(g).empty());
}

TEST(SubgraphMatcher, MatchOutputAndPlaceholder) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* r = g.call_function("aten::relu", {x});
  g.output(g.call_function("aten::neg", {r}));
  Graph p;
  p.output(p.call_function("aten::neg", {p.placeholder("a")}));
  EXPECT_EQ(fx::SubgraphMatcher(p).match(g).size(), 1u);
  // match_output: the pattern's output must be the graph's output: still 1.
  EXPECT_EQ(fx::SubgraphMatcher(p, /*match_output=*/true).match(g).size(), 1u);
  // match_placeholder: the pattern's a must be a graph placeholder: relu is not.
  EXPECT_EQ(fx::SubgraphMatcher(p, false, /*match_placeholder=*/true).match(g).size(), 0u);
  Graph p2;
  p2.output(p2.call_function("aten::relu", {p2.placeholder("a")}));
  EXPECT_EQ(fx::SubgraphMatcher(p2, false, true).match(g).size(), 1u);
  EXPECT_EQ(fx::SubgraphMatcher(p2, true).match(g).size(), 0u);  // relu is not returned
}

TEST(SubgraphMatcher, OverlapsKeptOnRequest) {
  Graph g;
  Node* v = g.placeholder("x");
  for (int i = 0; i < 4; ++i) v = g.call_function("aten::relu", {v});
  g.output(v);
  Graph p;
  p.output(p.call_function("aten::relu", {p.call_function("aten::relu", {p.placeholder("a")})}));
  EXPECT_EQ(fx::SubgraphMatcher(p).match(g).size(), 2u);
  EXPECT_EQ(fx::SubgraphMatcher(p, false, false, /*remove_overlapping_matches=*/false).match(g).size(), 3u);
}

TEST(SubgraphMatcher, FailedBranchIsUndone) {
  // mul(add(a, b), add(a, c)) against mul(add(x, y), add(z, y)): the second
  // add fails after binding; torch.fx keeps stale bindings in its dict,
  // fxcpp undoes them so the next candidate starts clean.
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* z = g.placeholder("z");
  Node* bad =
      g.call_function("aten::mul", {g.call_function("aten::add", {x, y}), g.call_function("aten::add", {z, y})});
  Node* good =
      g.call_function("aten::mul", {g.call_function("aten::add", {x, y}), g.call_function("aten::add", {x, z})});
  g.output(Argument::tuple({bad, good}));
  Graph p;
  Node* a = p.placeholder("a");
  Node* b = p.placeholder("b");
  Node* c = p.placeholder("c");
  p.output(p.call_function("aten::mul", {p.call_function("aten::add", {a, b}), p.call_function("aten::add", {a, c})}));
  auto matches = fx::SubgraphMatcher(p).match(g);
  ASSERT_EQ(matches.size(), 1u);
  EXPECT_EQ(matches[0].returning_nodes[0], good);
  EXPECT_EQ(matches[0].nodes_map.size(), 6u);
}

TEST(SubgraphMatcher, PlaceholderBindsListsAndLiterals) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  g.output(g.call_function("aten::cat", {Argument::list({x, y}), 1}));
  Graph p;
  Node* xs = p.placeholder("xs");
  Node* d = p.placeholder("d");
  p.output(p.call_function("aten::cat", {xs, d}));
  auto matches = fx::SubgraphMatcher(p).match(g);
  ASSERT_EQ(matches.size(), 1u);
  EXPECT_EQ(matches[0].placeholder_nodes[0].repr(), "[x, y]");
  EXPECT_EQ(matches[0].placeholder_nodes[1].to_int(), 1);
}

TEST(SubgraphMatcher, MultipleAnchorsFromUsers) {
  // Two anchors sharing an inner node; the second anchor's candidates come
  // from the users of the first match's nodes. 200 blocks: 200 matches.
  Graph g;
  Node* x = g.placeholder("x");
  std::vector<Node*> outs;
  for (int i = 0; i < 200; ++i) {
    Node* a = g.call_function("aten::add", {x, i});
    outs.push_back(g.call_function("aten::relu", {a}));
    outs.push_back(g.call_function("aten::sigmoid", {a}));
  }
  std::vector<Argument> items(outs.begin(), outs.end());
  g.output(Argument::tuple(items));
  Graph p;
  Node* pa = p.call_function("aten::add", {p.placeholder("a"), p.placeholder("k")});
  p.output(Argument::tuple({p.call_function("aten::relu", {pa}), p.call_function("aten::sigmoid", {pa})}));
  auto matches = fx::SubgraphMatcher(p).match(g);
  ASSERT_EQ(matches.size(), 200u);
  for (size_t i = 0; i < matches.size(); ++i) {
    EXPECT_EQ(matches[i].returning_nodes[0], outs[2 * i]);
    EXPECT_EQ(matches[i].returning_nodes[1], outs[2 * i + 1]);
    EXPECT_EQ(matches[i].placeholder_nodes[1].to_int(), static_cast<int64_t>(i));
  }
}

TEST(SubgraphMatcher, FusingWouldFormACycle) {
  // pattern: two outputs relu(a), mul(a, w); graph: w = neg(relu(a)), so
  // fusing {add, relu, mul} would need w before and after it.
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* a = g.call_function("aten::add", {x, y});
  Node* r = g.call_function("aten::relu", {a});
  Node* w = g.call_function("aten::neg", {r});
  g.output(Argument::tuple({r, g.call_function("aten::mul", {a, w})}));
  Graph p;
  Node* pa = p.call_function("aten::add", {p.placeholder("x"), p.placeholder("y")});
  Node* pw = p.placeholder("w");
  p.output(Argument::tuple({p.call_function("aten::relu", {pa}), p.call_function("aten::mul", {pa, pw})}));
  EXPECT_TRUE(fx::SubgraphMatcher(p).match(g).empty());
}

TEST(SubgraphMatcher, OperatorWithoutOverloadMatchesEveryOverload) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* a = g.call_function("aten::add.Tensor", {x, y});
  Node* b = g.call_function("aten::add.Scalar", {a, 1});
  g.output(g.call_function("aten::addmm", {b, x, y}));
  auto count = [&](const char* target) {
    Graph p;
    p.output(p.call_function(target, {p.placeholder("u"), p.placeholder("v")}));
    return fx::SubgraphMatcher(p).match(g).size();
  };
  EXPECT_EQ(count("aten::add"), 2u);         // both overloads, not aten::addmm
  EXPECT_EQ(count("aten::add.Tensor"), 1u);  // exactly that overload
  EXPECT_EQ(count("aten::add.Scalar"), 1u);
}

TEST(SubgraphMatcher, BadPatterns) {
  Graph empty;
  EXPECT_THROW(fx::SubgraphMatcher{empty}, fx::Error);
  Graph identity;
  identity.output(identity.placeholder("x"));
  try {
    fx::SubgraphMatcher m(identity);
    ADD_FAILURE();
  } catch (const fx::Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "SubgraphMatcher: the pattern returns its input %x unchanged; there is nothing to anchor a match on");
  }
}

}  // namespace
