// Interpreter::boxed_run: the caller's vector is cleared before the graph
// runs, so an input is released as soon as its last user has run (seed 002).
#include "exec_test_util.h"

#include <fx/interpreter.h>

#include <gtest/gtest.h>

namespace {

using c10::IValue;
using fx::Graph;
using fx::Node;
using fx_test::error_of;
using fx_test::module_of;

/// Records, before each node runs, how many handles the watched storage has.
struct WatchingInterpreter : fx::Interpreter {
  WatchingInterpreter(std::shared_ptr<fx::GraphModule> m, const c10::Storage* s)
      : fx::Interpreter(std::move(m)), watched(s) {}
  const c10::Storage* watched;
  std::vector<std::pair<std::string, long>> counts;
  IValue run_node(Node* n) override {
    counts.emplace_back(n->name(), watched->use_count());
    return fx::Interpreter::run_node(n);
  }
};

/// x → relu → neg → neg → output
std::shared_ptr<fx::GraphModule> chain() {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* a = g->call_function("aten::relu", {x});
  Node* b = g->call_function("aten::neg", {a});
  g->output(g->call_function("aten::neg", {b}));
  return module_of(g);
}

TEST(BoxedRun, InputIsReleasedRightAfterItsLastUser) {
  at::Tensor x = at::ones({1024});
  c10::Storage storage = x.storage();  // our own handle: 1 of the count
  WatchingInterpreter interp(chain(), &storage);
  std::vector<IValue> args;
  args.emplace_back(std::move(x));
  IValue out = interp.boxed_run(args);
  EXPECT_TRUE(args.empty());
  using Counts = std::vector<std::pair<std::string, long>>;
  // relu: x is alive in the env (2); after relu (x's last user) only our handle is left.
  EXPECT_EQ(interp.counts, (Counts{{"relu", 2}, {"neg", 1}, {"neg_1", 1}, {"output", 1}}));
  EXPECT_TRUE(at::allclose(out.toTensor(), at::ones({1024})));
}

TEST(BoxedRun, RunKeepsTheCallersReference) {
  at::Tensor x = at::ones({4});
  c10::Storage storage = x.storage();
  WatchingInterpreter interp(chain(), &storage);
  interp.run({x});  // the caller still holds x: nothing can be freed early
  using Counts = std::vector<std::pair<std::string, long>>;
  EXPECT_EQ(interp.counts, (Counts{{"x", 2}, {"relu", 2}, {"neg", 2}, {"neg_1", 2}, {"output", 2}}));
}

TEST(BoxedRun, ArgumentErrors) {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* y = g->placeholder("y");
  g->output(g->call_function("aten::add", {x, y}));
  fx::Interpreter interp(module_of(g));
  std::vector<IValue> one{at::ones({1})};
  EXPECT_EQ(error_of([&] { interp.boxed_run(one); }),
            "Expected positional argument for parameter y, but one was not passed in!\n\n"
            "While executing %y : [#users=1] = placeholder[target=y]");
  EXPECT_TRUE(one.empty());
  std::vector<IValue> three{at::ones({1}), at::ones({1}), at::ones({1})};
  EXPECT_EQ(error_of([&] { interp.boxed_run(three); }),
            "boxed_run() got 3 arguments but the graph has 2 placeholders (x, y); call allow_extra_args(true) to "
            "ignore extras as torch.fx does");
  std::vector<IValue> two{at::ones({1}), at::ones({1})};
  EXPECT_EQ(interp.boxed_run(two).toTensor().item<float>(), 2.0f);
  EXPECT_TRUE(two.empty());
}

}  // namespace
