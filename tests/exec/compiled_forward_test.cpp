// GraphModule::forward: the compiled plan — results, lazy recompilation after
// edits, freeing values after their last use, errors, generated code.
#include "exec_test_util.h"

#include <fx/graph_module.h>
#include <fx/interpreter.h>
#include <fx/target.h>

#include <gtest/gtest.h>

namespace {

using c10::IValue;
using fx::Graph;
using fx::Node;
using fx_test::error_of;
using fx_test::module_of;
using fx_test::same;

IValue run(const std::shared_ptr<fx::GraphModule>& gm, std::vector<IValue> inputs) {
  return gm->forward(std::move(inputs));
}

TEST(CompiledForward, SeedExampleEditIsSeenWithoutRecompile) {
  // Seed 001: x + x, then insert mul(add, 2) after add and reroute the output.
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* add = g->call_function("aten::add", {x, x});
  Node* out = g->output(add);
  auto gm = module_of(g);
  EXPECT_EQ(gm->forward(at::full({1}, 3.0f)).item<float>(), 6.0f);
  Node* mul = nullptr;
  {
    auto guard = g->inserting_after(add);
    mul = g->call_function("aten::mul", {add, 2});
  }
  out->replace_input_with(add, mul);
  // No recompile() call: the stale plan can never run.
  EXPECT_EQ(gm->forward(at::full({1}, 3.0f)).item<float>(), 12.0f);
  EXPECT_NE(gm->code().find("mul = torch.ops.aten.mul(add, 2)"), std::string::npos) << gm->code();
  // Seed 001's second example: replace x * 2.0 by x + 5.0.
  Node* add5 = nullptr;
  {
    auto guard = g->inserting_before(mul);
    add5 = g->call_function("aten::add", {add, 5.0});
  }
  mul->replace_all_uses_with(add5);
  g->erase_node(mul);
  EXPECT_EQ(gm->forward(at::full({1}, 2.0f)).item<float>(), 9.0f);
  gm->recompile();  // exists for parity; harmless
  EXPECT_EQ(gm->forward(at::full({1}, 2.0f)).item<float>(), 9.0f);
}

TEST(CompiledForward, CodeAndPrintReadable) {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* y = g->placeholder("y");
  g->output(g->call_function("aten::add", {x, y}));
  auto gm = module_of(g);
  EXPECT_EQ(gm->code(), g->python_code("self").src);
  EXPECT_EQ(gm->code(),
            "\n\n\ndef forward(self, x, y):\n"
            "    add = torch.ops.aten.add(x, y);  x = y = None\n"
            "    return add\n"
            "    ");
  // torch.fx 1.13 prints the comment even when no node has a stack trace.
  EXPECT_EQ(gm->print_readable(),
            "class GraphModule(torch.nn.Module):\n"
            "    def forward(self, x, y):\n"
            "        \n"
            "        # No stacktrace found for following nodes \n"
            "        add = torch.ops.aten.add(x, y);  x = y = None\n"
            "        return add\n"
            "        ");
  // A nested GraphModule is printed after its parent, indented.
  auto outer_g = std::make_shared<Graph>();
  Node* ox = outer_g->placeholder("x");
  outer_g->output(outer_g->call_module("sub", {ox, ox}));
  auto root = std::make_shared<torch::nn::Module>("Root");
  root->register_module("sub", std::make_shared<fx::GraphModule>(std::make_shared<torch::nn::Module>(), g, "Sub"));
  auto outer = std::make_shared<fx::GraphModule>(root, outer_g, "Outer");
  EXPECT_EQ(outer->print_readable(),
            "class Outer(torch.nn.Module):\n"
            "    def forward(self, x):\n"
            "        \n"
            "        # No stacktrace found for following nodes \n"
            "        sub = self.sub(x, x);  x = None\n"
            "        return sub\n"
            "        \n"
            "    class Sub(torch.nn.Module):\n"
            "        def forward(self, x, y):\n"
            "            add = torch.ops.aten.add(x, y);  x = y = None\n"
            "            return add\n"
            "            ");
  EXPECT_TRUE(same(outer->forward(at::ones({2})), at::full({2}, 2.0f)));
}

// The storage of the graph input, watched by exectest::probe.
c10::Storage* g_watched = nullptr;
std::vector<long> g_counts;

TEST(CompiledForward, ValuesAreFreedAfterTheirLastUse) {
  fx::register_function("exectest::probe", [](std::vector<IValue>& args, fx::ValueKwargs&) -> IValue {
    g_counts.push_back(g_watched->use_count());
    return args.at(0);
  });
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* p0 = g->call_function("exectest::probe", {x});  // x still alive here
  Node* relu = g->call_function("aten::relu", {p0});    // last use of x's value (p0 is x)
  Node* p1 = g->call_function("exectest::probe", {relu});
  g->output(g->call_function("aten::neg", {p1}));
  auto gm = module_of(g);
  at::Tensor input = at::ones({4});
  c10::Storage storage = input.storage();
  g_watched = &storage;
  g_counts.clear();
  std::vector<IValue> inputs;
  inputs.emplace_back(std::move(input));
  at::Tensor out = gm->forward(std::move(inputs)).toTensor();
  // At the first probe: the tensor (in x's and p0's slots, and in the probe's
  // argument) holds the storage, plus our handle. At the second: only ours.
  ASSERT_EQ(g_counts.size(), 2u);
  EXPECT_GT(g_counts[0], 1);
  EXPECT_EQ(g_counts[1], 1);
  EXPECT_TRUE(same(out, -at::ones({4})));
  g_watched = nullptr;
}

TEST(CompiledForward, ErrorsNameTheNode) {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* y = g->placeholder("y");
  Node* mm = g->call_function("aten::mm", {x, y});
  g->output(mm);
  auto gm = module_of(g);
  std::string msg = error_of([&] { run(gm, {at::ones({2, 3}), at::ones({2, 3})}); });
  EXPECT_EQ(msg, "mat1 and mat2 shapes cannot be multiplied (2x3 and 2x3)\n\nWhile executing " + mm->format_node());
  mm->set_stack_trace("  File \"model.py\", line 3, in forward\n    return x @ y");
  msg = error_of([&] { run(gm, {at::ones({2, 3}), at::ones({2, 3})}); });
  EXPECT_EQ(msg, "mat1 and mat2 shapes cannot be multiplied (2x3 and 2x3)\n\nWhile executing " + mm->format_node() +
                     "\nOriginal traceback:\n  File \"model.py\", line 3, in forward\n    return x @ y");
  EXPECT_EQ(error_of([&] { run(gm, {at::ones({2, 3})}); }),
            "forward() missing 1 required positional argument: 'y'");
  EXPECT_EQ(error_of([&] { run(gm, {}); }), "forward() missing 2 required positional arguments: 'x' and 'y'");
  EXPECT_EQ(error_of([&] { run(gm, {at::ones({1}), at::ones({1}), at::ones({1})}); }),
            "forward() takes 3 positional arguments but 4 were given");  // CPython counts self
}

TEST(CompiledForward, ModulesWithoutARegisteredForwardFailAtCompileNamingTheNode) {
  struct Opaque : torch::nn::Module {};
  auto root = std::make_shared<torch::nn::Module>("Root");
  root->register_module("m", std::make_shared<Opaque>());
  auto g = std::make_shared<Graph>();
  Node* call = g->call_module("m", {g->placeholder("x")});
  g->output(call);
  auto gm = std::make_shared<fx::GraphModule>(root, g);
  std::string msg = error_of([&] { gm->forward(at::ones({1})); });
  EXPECT_EQ(msg.rfind("no forward is registered for module 'm' of type ", 0), 0u) << msg;
  EXPECT_NE(msg.find("\n\nWhile compiling " + call->format_node()), std::string::npos) << msg;
}

TEST(CompiledForward, DefaultsAggregatesKwargsAndBuiltins) {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* scale = g->placeholder("scale", fx::Argument(2.0));
  Node* shape = g->call_function("getattr", {x, "shape"});
  Node* n0 = g->call_function("operator.getitem", {shape, 0});
  Node* flat = g->call_method("view", {x, n0, -1});
  Node* mul = g->call_function("aten::mul", {flat, scale});
  Node* add = g->call_function("aten::add", {mul, x}, {{"alpha", 3}});
  Node* cat = g->call_function("aten::cat", {fx::Argument::list({add, x})}, {{"dim", 1}});
  g->output(fx::Argument::tuple({cat, n0, fx::Argument::dict({{"sum", mul}})}));
  auto gm = module_of(g);
  at::Tensor in = at::arange(6, at::kFloat).view({2, 3});
  IValue out = run(gm, {in});
  ASSERT_TRUE(out.isTuple());
  const auto& e = out.toTupleRef().elements();
  EXPECT_TRUE(same(e[0].toTensor(), at::cat({in * 2 + 3 * in, in}, 1)));
  EXPECT_EQ(e[1].toInt(), 2);
  EXPECT_TRUE(same(e[2].toGenericDict().at(std::string("sum")).toTensor(), in * 2));
  IValue out3 = run(gm, {in, 3.0});  // the default overridden
  EXPECT_TRUE(same(out3.toTupleRef().elements()[0].toTensor(), at::cat({in * 6, in}, 1)));
}

TEST(CompiledForward, GraphsWithoutOutputReturnNoneAndSingleInputsPassThrough) {
  auto g = std::make_shared<Graph>();
  g->placeholder("x");
  auto gm = module_of(g);
  EXPECT_TRUE(run(gm, {at::ones({1})}).isNone());
  auto g2 = std::make_shared<Graph>();
  g2->output(g2->placeholder("x"));
  at::Tensor t = at::ones({1});
  EXPECT_TRUE(module_of(g2)->forward(t).is_same(t));
}

TEST(CompiledForward, SetGraphAndAttributeChangesRecompile) {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  g->output(g->call_function("aten::mul", {x, g->get_attr("w")}));
  auto root = std::make_shared<torch::nn::Module>("Root");
  root->register_buffer("w", at::full({1}, 2.0f));
  auto gm = std::make_shared<fx::GraphModule>(root, g);
  EXPECT_EQ(gm->forward(at::ones({1})).item<float>(), 2.0f);
  gm->register_attr("w", at::full({1}, 5.0f));
  EXPECT_EQ(gm->forward(at::ones({1})).item<float>(), 5.0f);
  auto g2 = std::make_shared<Graph>();
  Node* x2 = g2->placeholder("x");
  g2->output(g2->call_function("aten::neg", {x2}));
  gm->set_graph(g2);
  EXPECT_EQ(gm->forward(at::ones({1})).item<float>(), -1.0f);
  EXPECT_NE(gm->code().find("neg = torch.ops.aten.neg(x)"), std::string::npos);
}

TEST(CompiledForward, ArgumentKindsMayChangeBetweenCalls) {
  // The overload cached for (Tensor, Tensor) must not be used for (Tensor, int).
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* y = g->placeholder("y");
  Node* add = g->call_function("aten::add", {x, y});
  g->output(g->call_method("mul", {add, y}));
  auto gm = module_of(g);
  at::Tensor t = at::tensor({1.0, 2.0});
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(same(run(gm, {t, t}).toTensor(), (t + t) * t));
    EXPECT_TRUE(same(run(gm, {t, 3}).toTensor(), (t + 3) * 3));
    EXPECT_TRUE(same(run(gm, {t, 0.5}).toTensor(), (t + 0.5) * 0.5));
  }
  EXPECT_EQ(error_of([&] { run(gm, {t, std::string("s")}); }).rfind("aten::add: no overload of aten::add", 0), 0u);
}

TEST(CompiledForward, LongChainsMatchEager) {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* v = x;
  for (int i = 0; i < 2000; ++i) v = g->call_function("aten::add", {v, x});
  g->output(v);
  auto gm = module_of(g);
  at::Tensor in = at::full({1}, 0.5);
  at::Tensor expected = in;
  for (int i = 0; i < 2000; ++i) expected = at::add(expected, in);
  EXPECT_TRUE(at::equal(gm->forward(in), expected));
  EXPECT_TRUE(at::equal(fx::Interpreter(gm).run({in}).toTensor(), expected));
}

}  // namespace
