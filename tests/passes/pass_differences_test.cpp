// Where fxcpp's CSE and DCE differ from torch.fx 1.13 on purpose (issue 24;
// docs/torch_fx_differences.md, include/fx/passes/cse.h and dead_code.h).
#include <fx/passes/cse.h>
#include <fx/passes/dead_code.h>

#include "passes_test_util.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace {

using fx_test::module_of;

TEST(CSEPass, KeepsIntAndFloatLiteralsApart) {
  // torch.fx merges aten.mul(x, 2) and aten.mul(x, 2.0) (2 == 2.0 in
  // Python); for an integer x they differ: x * 2 stays int64, x * 2.0 is float.
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* by_int = g->call_function("aten::mul", {x, 2});
  fx::Node* by_float = g->call_function("aten::mul", {x, 2.0});
  g->output(fx::Argument::tuple({by_int, by_float}));
  auto gm = module_of(g);
  fx::CSEPass cse;
  EXPECT_FALSE(cse(gm).modified);
  EXPECT_EQ(gm->graph().nodes().size(), 4u);
  const auto out = gm->forward({at::tensor({1, 2}, at::kLong)}).toTupleRef().elements();
  EXPECT_EQ(out[0].toTensor().scalar_type(), at::kLong);
  EXPECT_EQ(out[1].toTensor().scalar_type(), at::kFloat);
}

TEST(DeadCodeEliminationPass, KeepsUnusedInPlaceMethods) {
  // torch.fx 1.13 checks only call_function targets for side effects and
  // drops x.add_(x) when its result is unused; the write to x is what it does.
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  g->call_method("add_", {x, x});
  g->output(x);
  auto gm = module_of(g);
  EXPECT_FALSE(fx::eliminate_dead_code(gm).modified);
  EXPECT_EQ(gm->graph().nodes().size(), 3u);
  at::Tensor in = at::tensor({1.0, 2.0});
  EXPECT_TRUE(at::equal(gm->forward(in), at::tensor({2.0, 4.0})));
}

}  // namespace
