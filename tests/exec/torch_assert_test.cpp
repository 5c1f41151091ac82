// torch._assert is a built-in target: a graph built by hand uses it in a
// process where nothing was imported (ctest runs each test in its own
// process, and test_exec does not even link the importer).
#include "exec_test_util.h"

#include <fx/graph.h>
#include <fx/interpreter.h>
#include <fx/target.h>

#include <gtest/gtest.h>

namespace {

using fx_test::error_of;

/// x → torch._assert(x.size(0) == 2, "batch must be 2") → relu(x).
std::shared_ptr<fx::GraphModule> asserting_module() {
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* dim0 = g->call_method("size", {x, 0});
  g->call_function("torch._assert", {g->call_function("operator.eq", {dim0, 2}), "batch must be 2"});
  g->output(g->call_function("aten::relu", {x}));
  return fx_test::module_of(g);
}

TEST(TorchAssert, IsABuiltInTargetBeforeAnythingIsImported) {
  EXPECT_NO_THROW(fx::check_function_target("torch._assert"));
  EXPECT_TRUE(fx::is_impure_function("torch._assert"));
  auto gm = asserting_module();
  at::Tensor x = at::tensor({-1.0, 2.0}).expand({2, 2}).contiguous();
  EXPECT_TRUE(fx_test::same(gm->forward(x), x.relu()));
  EXPECT_TRUE(fx_test::same(fx::Interpreter(gm).run({x}).toTensor(), x.relu()));
  // Without users it stays: dead code elimination keeps side effects.
  EXPECT_FALSE(gm->graph().eliminate_dead_code());
}

TEST(TorchAssert, AFalseConditionRaisesTheMessage) {
  auto gm = asserting_module();
  const std::string e = error_of([&] { gm->forward(at::ones({3, 2})); });
  EXPECT_NE(e.find("batch must be 2"), std::string::npos) << e;
  // Keyword arguments, a tensor condition, no message.
  EXPECT_NO_THROW(fx::call_function("torch._assert", {}, {{"condition", at::scalar_tensor(true)}, {"message", "m"}}));
  EXPECT_EQ(error_of([] {
              try {
                fx::call_function("torch._assert", {at::scalar_tensor(false)});
              } catch (const std::runtime_error& e) {
                throw fx::Error(e.what());
              }
            }),
            "assertion failed");
}

}  // namespace
