// Graphs whose placeholders or nodes stand in unusual places: forward and
// the Interpreter must agree on every graph that lints clean.
#include "exec_test_util.h"

#include <fx/interpreter.h>

#include <gtest/gtest.h>

namespace {

using fx_test::error_of;
using fx_test::module_of;

TEST(Placement, PlaceholderAfterOpNodes) {
  // y's input is written before the first step; the slot of x (dead after
  // relu) must not be handed to y.
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* a = g->call_function("aten::relu", {x});
  fx::Node* b = g->call_function("aten::neg", {a});
  fx::Node* y = g->placeholder("y");
  fx::Node* c = g->call_function("aten::add", {b, y});
  g->output(c);
  g->lint();
  auto gm = module_of(g);
  at::Tensor xv = at::randn({4}), yv = at::randn({4});
  at::Tensor expected = -at::relu(xv) + yv;
  EXPECT_TRUE(at::equal(gm->forward({xv, yv}).toTensor(), expected));
  EXPECT_TRUE(at::equal(fx::Interpreter(gm).run({xv, yv}).toTensor(), expected));
}

TEST(Placement, PlaceholderMovedBetweenCalls) {
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* y = g->placeholder("y");
  fx::Node* a = g->call_function("aten::sigmoid", {x});
  fx::Node* b = g->call_function("aten::tanh", {a});
  fx::Node* c = g->call_function("aten::mul", {b, y});
  g->output(c);
  b->append(y);  // y now stands between tanh and mul
  g->lint();
  auto gm = module_of(g);
  at::Tensor xv = at::randn({3}), yv = at::randn({3});
  at::Tensor expected = at::tanh(at::sigmoid(xv)) * yv;
  EXPECT_TRUE(at::equal(gm->forward({xv, yv}).toTensor(), expected));
  EXPECT_TRUE(at::equal(fx::Interpreter(gm).run({xv, yv}).toTensor(), expected));
}

TEST(Placement, NodesAfterTheOutputFollowTorchFx) {
  // torch.fx: the generated forward's signature lists every placeholder,
  // the Interpreter returns at the output node.
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  g->output(g->call_function("aten::relu", {x}));
  fx::Node* late = g->placeholder("late");
  g->call_function("aten::neg", {late});
  auto gm = module_of(g);
  at::Tensor xv = at::randn({3});
  EXPECT_TRUE(at::equal(gm->forward({xv, at::ones({1})}).toTensor(), at::relu(xv)));
  EXPECT_TRUE(at::equal(fx::Interpreter(gm).run({xv, at::ones({1})}).toTensor(), at::relu(xv)));
  EXPECT_EQ(error_of([&] { gm->forward({xv}); }), "forward() missing 1 required positional argument: 'late'");
  EXPECT_TRUE(at::equal(fx::Interpreter(gm).run({xv}).toTensor(), at::relu(xv)));
}

TEST(Placement, ErasedNodesCannotBeMovedOrMoveOthers) {
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* a = g->call_function("aten::relu", {x});
  fx::Node* b = g->call_function("aten::neg", {x});
  g->output(b);
  g->erase_node(a);
  const std::string before = g->str();
  EXPECT_NE(error_of([&] { a->prepend(b); }), "<no error>");
  EXPECT_NE(error_of([&] { a->append(b); }), "<no error>");
  EXPECT_NE(error_of([&] { b->prepend(a); }), "<no error>");
  EXPECT_EQ(g->str(), before);
  g->lint();
}

}  // namespace
