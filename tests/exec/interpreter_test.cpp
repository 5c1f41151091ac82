// Interpreter: torch.fx semantics — placeholders bound in order, defaults,
// argument count errors, error context, initial_env, garbage collection and
// overridable opcode methods (seed 003).
#include "exec_test_util.h"

#include <fx/interpreter.h>

#include <gtest/gtest.h>

namespace {

using c10::IValue;
using fx::Graph;
using fx::Node;
using fx_test::error_of;
using fx_test::module_of;
using fx_test::same;

/// x, y → relu(x + y) * 2
struct AddRelu {
  std::shared_ptr<Graph> g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* y = g->placeholder("y");
  Node* add = g->call_function("aten::add", {x, y});
  Node* relu = g->call_method("relu", {add});
  Node* mul = g->call_function("operator.mul", {relu, 2});
  Node* out = g->output(mul);
  std::shared_ptr<fx::GraphModule> gm = module_of(g);
};

TEST(Interpreter, RunMatchesForward) {
  AddRelu m;
  at::Tensor x = at::randn({4}), y = at::randn({4});
  fx::Interpreter interp(m.gm);
  EXPECT_TRUE(same(interp.run({x, y}).toTensor(), at::relu(x + y) * 2));
  EXPECT_TRUE(same(interp.run({x, y}).toTensor(), m.gm->forward(std::vector<IValue>{x, y}).toTensor()));
}

TEST(Interpreter, TooFewArgumentsGiveTorchFxsError) {
  AddRelu m;
  fx::Interpreter interp(m.gm);
  EXPECT_EQ(error_of([&] { interp.run({at::ones({1})}); }),
            "Expected positional argument for parameter y, but one was not passed in!\n\n"
            "While executing %y : [#users=1] = placeholder[target=y]");
}

TEST(Interpreter, TooManyArgumentsAreAnErrorUnlessAllowed) {
  AddRelu m;
  fx::Interpreter interp(m.gm);
  at::Tensor one = at::ones({1});
  EXPECT_EQ(error_of([&] { interp.run({one, one, one}); }),
            "run() got 3 arguments but the graph has 2 placeholders (x, y); call allow_extra_args(true) to "
            "ignore extras as torch.fx does");
  interp.allow_extra_args(true);
  EXPECT_EQ(interp.run({one, one, one}).toTensor().item<float>(), 4.0f);
}

TEST(Interpreter, PlaceholderDefaults) {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* k = g->placeholder("k", fx::Argument(int64_t(3)));
  g->output(g->call_function("aten::mul", {x, k}));
  fx::Interpreter interp(module_of(g));
  EXPECT_EQ(interp.run({at::ones({1})}).toTensor().item<float>(), 3.0f);
  EXPECT_EQ(interp.run({at::ones({1}), 5}).toTensor().item<float>(), 5.0f);
}

TEST(Interpreter, ExceptionsAreRethrownWithTheNode) {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* view = g->call_method("view", {x, 5});
  g->output(view);
  view->set_stack_trace("  File \"m.py\", line 2, in forward\n    return x.view(5)");
  fx::Interpreter interp(module_of(g));
  try {
    interp.run({at::ones({2})});
    FAIL() << "no error";
  } catch (const fx::Error& e) {
    EXPECT_EQ(std::string(e.what()), "shape '[5]' is invalid for input of size 2\n\nWhile executing " +
                                         view->format_node() +
                                         "\nOriginal traceback:\n  File \"m.py\", line 2, in forward\n    return "
                                         "x.view(5)");
  }
  // fx::Error subclasses keep their type.
  auto g2 = std::make_shared<Graph>();
  Node* bad = g2->call_function("aten::add", {g2->placeholder("x"), "s"});
  g2->output(bad);
  EXPECT_THROW(fx::Interpreter(module_of(g2)).run({at::ones({1})}), fx::TargetError);
}

/// Counts the nodes it runs.
struct CountingInterpreter : fx::Interpreter {
  using fx::Interpreter::Interpreter;
  std::vector<std::string> ran;
  IValue run_node(Node* n) override {
    ran.push_back(n->name());
    return fx::Interpreter::run_node(n);
  }
};

TEST(Interpreter, InitialEnvSkipsNodesWithValues) {
  AddRelu m;
  CountingInterpreter interp(m.gm);
  fx::Env env;
  env.set(m.add, at::full({1}, -3.0f));  // partial evaluation from add on
  env.set(m.x, at::zeros({1}));
  env.set(m.y, at::zeros({1}));
  EXPECT_EQ(interp.run({}, &env).toTensor().item<float>(), 0.0f);
  EXPECT_EQ(interp.ran, (std::vector<std::string>{"relu", "mul", "output"}));
  env.set(m.add, at::full({1}, 4.0f));
  interp.ran.clear();
  EXPECT_EQ(interp.run({}, std::move(env)).toTensor().item<float>(), 8.0f);
  // A placeholder given in the env takes no argument.
  fx::Env only_x;
  only_x.set(m.x, at::ones({1}));
  EXPECT_EQ(interp.run({at::full({1}, 2.0f)}, &only_x).toTensor().item<float>(), 6.0f);
  EXPECT_EQ(error_of([&] { interp.run({at::ones({1}), at::ones({1})}, &only_x); }),
            "run() got 2 arguments but the graph has 1 placeholder (y); call allow_extra_args(true) to ignore "
            "extras as torch.fx does");
}

TEST(Interpreter, GarbageCollectValues) {
  AddRelu m;
  fx::Interpreter gc(m.gm);
  gc.run({at::ones({1}), at::ones({1})});
  EXPECT_EQ(gc.env().size(), 1u);  // only the output is left
  EXPECT_TRUE(gc.env().contains(m.out));
  fx::Interpreter keep(m.gm, /*garbage_collect_values=*/false);
  keep.run({at::ones({1}), at::ones({1})});
  EXPECT_EQ(keep.env().size(), 6u);
  EXPECT_EQ(keep.env().at(m.add).toTensor().item<float>(), 2.0f);
  EXPECT_EQ(error_of([&] { gc.env().at(m.add); }), "no value for node add in the interpreter's environment");
}

/// Seed 003: a custom Interpreter overriding placeholder to inject a value.
struct InjectingInterpreter : fx::Interpreter {
  using fx::Interpreter::Interpreter;
  IValue placeholder(const std::string& target, std::vector<IValue>& args, fx::ValueKwargs& kwargs) override {
    if (target == "y") return at::full({1}, 100.0f);
    return fx::Interpreter::placeholder(target, args, kwargs);
  }
};

TEST(Interpreter, OverridingPlaceholderInjectsValues) {
  AddRelu m;
  InjectingInterpreter interp(m.gm);
  EXPECT_EQ(interp.run({at::ones({1})}).toTensor().item<float>(), 202.0f);
}

/// torch.fx's docstring example: swap neg and sigmoid.
struct NegSigmSwap : fx::Interpreter {
  using fx::Interpreter::Interpreter;
  IValue call_function(const std::string& target, std::vector<IValue>& args, fx::ValueKwargs& kwargs) override {
    if (target == "aten::sigmoid") return at::neg(args[0].toTensor());
    return fx::Interpreter::call_function(target, args, kwargs);
  }
  IValue call_method(const std::string& target, std::vector<IValue>& args, fx::ValueKwargs& kwargs) override {
    if (target == "neg") return at::sigmoid(args[0].toTensor());
    return fx::Interpreter::call_method(target, args, kwargs);
  }
};

TEST(Interpreter, OverridingCallFunctionAndCallMethod) {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  g->output(g->call_method("neg", {g->call_function("aten::sigmoid", {x})}));
  at::Tensor in = at::randn({3});
  EXPECT_TRUE(same(NegSigmSwap(module_of(g)).run({in}).toTensor(), at::sigmoid(at::neg(in))));
}

/// Seed 003's profiling interpreter: times every node through run_node.
struct ProfilingInterpreter : fx::Interpreter {
  using fx::Interpreter::Interpreter;
  std::vector<std::pair<std::string, double>> times;
  IValue run_node(Node* n) override {
    auto t0 = std::chrono::steady_clock::now();
    IValue v = fx::Interpreter::run_node(n);
    times.emplace_back(n->name(), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return v;
  }
};

TEST(Interpreter, ProfilingRunNode) {
  AddRelu m;
  ProfilingInterpreter p(m.gm);
  p.run({at::ones({1}), at::ones({1})});
  ASSERT_EQ(p.times.size(), 6u);
  EXPECT_EQ(p.times[2].first, "add");
  for (const auto& t : p.times) EXPECT_GE(t.second, 0.0);
}

TEST(Interpreter, HelpersAndGetAttr) {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* w = g->get_attr("w");
  Node* cat = g->call_function("aten::cat", {fx::Argument::list({x, w})}, {{"dim", 0}});
  g->output(cat);
  auto root = std::make_shared<torch::nn::Module>("Root");
  root->register_buffer("w", at::full({2}, 9.0f));
  fx::Interpreter interp(std::make_shared<fx::GraphModule>(root, g));
  EXPECT_TRUE(same(interp.run({at::ones({1})}).toTensor(), at::tensor({1.0f, 9.0f, 9.0f})));
  EXPECT_TRUE(same(interp.fetch_attr("w").toTensor(), at::full({2}, 9.0f)));
  interp.env().set(x, at::zeros({1}));
  interp.env().set(w, at::ones({1}));
  auto [args, kwargs] = interp.fetch_args_kwargs_from_env(cat);
  ASSERT_EQ(args.size(), 1u);
  EXPECT_EQ(args[0].toTensorVector().size(), 2u);
  ASSERT_EQ(kwargs.size(), 1u);
  EXPECT_EQ(kwargs[0].first, "dim");
  EXPECT_EQ(kwargs[0].second.toInt(), 0);
  interp.env().erase(w);
  EXPECT_EQ(error_of([&] { interp.map_nodes_to_values(cat->args()[0], cat); }),
            "Node cat referenced nonexistent value w! Run Graph.lint() to diagnose such issues");
}

}  // namespace
