// torch.fx API fidelity (issue #15), execution layer: slices and Ellipsis run
// through operator.getitem (compiled forward and Interpreter alike),
// graph.owning_module, Transformer's meta, print_readable's stack-trace
// comments and CPython's too-many-arguments text. Expected values are what
// Python torch.fx 1.13 / eager PyTorch give for the same program.
#include <fx/graph.h>
#include <fx/graph_module.h>
#include <fx/interpreter.h>
#include <fx/tensor_meta.h>

#include "exec_test_util.h"

#include <gtest/gtest.h>

namespace {

using fx::Argument;
using fx::Graph;
using fx::Node;
using fx::Opcode;
using fx_test::error_of;
using fx_test::module_of;
using fx_test::same;

c10::IValue run(const std::shared_ptr<fx::GraphModule>& gm, std::vector<c10::IValue> in) {
  return gm->forward(std::move(in));
}

TEST(ApiSliceRun, TensorIndexingMatchesPython) {
  // x[:, 1:size:2, ..., None] with size = x.size(1), and x[..., 1:3] + x[:, 0]
  // (torch.fx traces x[:, 0] to getitem(x, (slice(None, None, None), 0))).
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* size = g->call_method("size", {x, 1});
  Node* a = g->call_function("operator.getitem",
                             {x, Argument::tuple({Argument::slice(nullptr, nullptr, nullptr), Argument::slice(1, size, 2),
                                                  Argument::ellipsis(), nullptr})});
  Node* b = g->call_function("operator.getitem",
                             {x, Argument::tuple({Argument::slice(nullptr, nullptr, nullptr), 0})});
  Node* c = g->call_function("operator.getitem", {x, Argument::tuple({Argument::ellipsis(), Argument::slice(1, 3, nullptr)})});
  Node* d = g->call_function("operator.getitem", {x, Argument::slice(nullptr, nullptr, -1 + 2)});  // x[::1]
  Node* e = g->call_function("operator.getitem", {x, Argument::slice(-1, nullptr, nullptr)});      // x[-1:]
  g->output(Argument::tuple({a, b, c, d, e}));
  auto gm = module_of(g);
  at::Tensor t = at::arange(24, at::kFloat).reshape({2, 3, 4});
  using namespace at::indexing;
  const std::vector<at::Tensor> want = {t.index({Slice(), Slice(1, 3, 2), Ellipsis, None}), t.index({Slice(), 0}),
                                        t.index({Ellipsis, Slice(1, 3)}), t, t.index({Slice(-1, None)})};
  EXPECT_EQ(want[0].sizes(), (std::vector<int64_t>{2, 1, 4, 1}));  // torch.Size([2, 1, 4, 1]) in Python
  for (const c10::IValue& out : {run(gm, {t}), fx::Interpreter(gm).run({t})}) {
    const auto& items = out.toTupleRef().elements();
    ASSERT_EQ(items.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(at::equal(items[i].toTensor(), want[i])) << i;
  }
}

TEST(ApiSliceRun, SequencesSliceLikePython) {
  // [x, x, x][:-1] → 2 tensors; (1, 2, 3, 4, 5)[::-2] → (5, 3, 1); 'abcdef'[1:5:2] → 'bd'.
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* l = g->call_function("operator.getitem", {Argument::list({x, x, x}), Argument::slice(nullptr, -1, nullptr)});
  Node* t = g->call_function("operator.getitem",
                             {Argument::tuple({1, 2, 3, 4, 5}), Argument::slice(nullptr, nullptr, -2)});
  Node* s = g->call_function("operator.getitem", {"abcdef", Argument::slice(1, 5, 2)});
  Node* big = g->call_function("operator.getitem",
                               {Argument::list({1, 2, 3}), Argument::slice(-10, 10, nullptr)});
  g->output(Argument::tuple({l, t, s, big}));
  auto gm = module_of(g);
  at::Tensor v = at::ones({2});
  const auto out = run(gm, {v}).toTupleRef().elements();
  EXPECT_EQ(out[0].toListRef().size(), 2u);
  EXPECT_TRUE(out[0].toListRef()[1].toTensor().is_same(v));
  EXPECT_EQ(Argument::from_ivalue(out[1]).repr(), "(5, 3, 1)");
  EXPECT_EQ(out[2].toStringRef(), "bd");
  EXPECT_EQ(Argument::from_ivalue(out[3]).repr(), "[1, 2, 3]");
}

TEST(ApiSliceRun, BadSlicesFailLikePython) {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* bad = g->call_function("operator.getitem", {Argument::list({x}), Argument::slice(nullptr, nullptr, 0)});
  g->output(bad);
  auto gm = module_of(g);
  EXPECT_EQ(error_of([&] { run(gm, {at::ones({1})}); }),
            "slice step cannot be zero\n\nWhile executing " + bad->format_node());
  bad->update_arg(1, Argument::slice(nullptr, "a", nullptr));
  EXPECT_EQ(error_of([&] { run(gm, {at::ones({1})}); }),
            "slice indices must be integers or None or have an __index__ method\n\nWhile executing " +
                bad->format_node());
}

TEST(ApiNodeEdits, RetargetAndRenameReachTheCompiledModule) {
  // torch.fx: add.target = torch.mul; add.name = 'prod'; gm.recompile().
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* add = g->call_function("aten::add", {x, x});
  g->output(add);
  auto gm = module_of(g);
  at::Tensor t = at::full({2}, 3.0f);
  EXPECT_TRUE(same(run(gm, {t}).toTensor(), at::full({2}, 6.0f)));
  add->set_target("aten::mul");
  add->set_name("prod");
  EXPECT_TRUE(same(run(gm, {t}).toTensor(), at::full({2}, 9.0f)));  // no stale plan
  EXPECT_TRUE(same(fx::Interpreter(gm).run({t}).toTensor(), at::full({2}, 9.0f)));
  EXPECT_EQ(gm->code(),
            "\n\n\ndef forward(self, x):\n"
            "    prod = torch.ops.aten.mul(x, x);  x = None\n"
            "    return prod\n"
            "    ");
}

TEST(ApiNormalizedArguments, RunAsNormalizedKeywords) {
  // torch.fx names `self` `input` (torch.add(input=x, other=y)): the keywords
  // normalized_arguments gives run as they are, compiled and interpreted.
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* y = g->placeholder("y");
  Node* add = g->call_function("aten::add.Tensor", {x, y}, {{"alpha", 2}});
  g->output(add);
  auto gm = module_of(g);
  fx::NormalizeOptions o;
  o.normalize_to_only_use_kwargs = true;
  auto n = add->normalized_arguments(gm.get(), o);
  ASSERT_TRUE(n.has_value());
  add->set_args(n->args);
  add->set_kwargs(n->kwargs);
  EXPECT_EQ(add->format_node(),
            "%add : [#users=1] = call_function[target=aten::add.Tensor](args = (), kwargs = {input: %x, other: %y, "
            "alpha: 2})");
  at::Tensor a = at::full({2}, 1.0f), b = at::full({2}, 3.0f);
  EXPECT_TRUE(same(run(gm, {a, b}).toTensor(), at::full({2}, 7.0f)));
  EXPECT_TRUE(same(fx::Interpreter(gm).run({a, b}).toTensor(), at::full({2}, 7.0f)));
  add->set_target("aten::sub.Tensor");  // retargeting checks the keywords too
  EXPECT_TRUE(same(run(gm, {a, b}).toTensor(), at::full({2}, -5.0f)));
}

TEST(ApiOwningModule, IsTheOnlyGraphModuleOnTheGraph) {
  // torch.fx: g.owning_module is gm; after a second GraphModule(…, g) it is None.
  auto g = std::make_shared<Graph>();
  g->output(g->placeholder("x"));
  EXPECT_EQ(g->owning_module(), nullptr);
  auto gm = module_of(g);
  EXPECT_EQ(g->owning_module(), gm.get());
  {
    auto gm2 = module_of(g);
    EXPECT_EQ(g->owning_module(), nullptr);
  }
  EXPECT_EQ(g->owning_module(), nullptr);  // as in torch.fx: stays None
  // A graph whose module dies does not keep a dangling pointer.
  auto h = std::make_shared<Graph>();
  h->output(h->placeholder("x"));
  {
    auto hm = module_of(h);
    EXPECT_EQ(h->owning_module(), hm.get());
  }
  EXPECT_EQ(h->owning_module(), nullptr);
  // set_graph moves ownership.
  auto k = std::make_shared<Graph>();
  k->output(k->placeholder("y"));
  auto gk = module_of(h);
  EXPECT_EQ(h->owning_module(), gk.get());
  gk->set_graph(k);
  EXPECT_EQ(k->owning_module(), gk.get());
  EXPECT_EQ(h->owning_module(), nullptr);
}

TEST(ApiTransformer, CopiesTheStackTraceButNoOtherMeta) {
  // torch.fx 1.13's Transformer creates fresh nodes: no tensor_meta (it could
  // be stale once an override changes the op).
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* relu = g->call_function("aten::relu", {x});
  relu->set_stack_trace("  File \"m.py\", line 4, in forward\n    y = torch.relu(x)");
  relu->meta()["tensor_meta"] = fx::TensorMetadata::from_tensor(at::ones({2}));
  relu->meta()["custom"] = 1;
  g->output(relu);
  auto out = fx::Transformer(module_of(g)).transform();
  Node* copy = out->graph().find_nodes(Opcode::CallFunction, std::string("aten::relu")).at(0);
  EXPECT_EQ(copy->stack_trace(), relu->stack_trace());
  EXPECT_EQ(copy->meta().count("tensor_meta"), 0u);
  EXPECT_EQ(copy->meta().count("custom"), 0u);
}

TEST(ApiPrintReadable, HasTorchFxStackTraceComments) {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* relu = g->call_function("aten::relu", {x});
  relu->set_stack_trace("  File \"m.py\", line 4, in forward\n    y = torch.relu(x)\n");
  Node* sin = g->call_function("aten::sin", {relu});
  g->output(sin);
  auto gm = module_of(g);
  // torch.fx 1.13 gm.print_readable() (torch.relu / torch.sin there):
  EXPECT_EQ(gm->print_readable(),
            "class GraphModule(torch.nn.Module):\n"
            "    def forward(self, x):\n"
            "        \n"
            "        # File: m.py:4, code: y = torch.relu(x)\n"
            "        relu = torch.ops.aten.relu(x);  x = None\n"
            "        \n"
            "        # No stacktrace found for following nodes \n"
            "        sin = torch.ops.aten.sin(relu);  relu = None\n"
            "        return sin\n"
            "        ");
  EXPECT_EQ(gm->code().find('#'), std::string::npos);  // gm.code is not verbose
}

TEST(ApiForwardArgs, TooManyArgumentsCountSelfAsPythonDoes) {
  // torch.fx: forward(self, x, y=1) given 3 → "takes from 2 to 3 positional
  // arguments but 4 were given"; forward(self, x) given 2 → "takes 2 ... 3 were given";
  // forward(self) given 1 → "takes 1 positional argument but 2 were given".
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  g->placeholder("y", Argument(1));
  g->output(x);
  auto gm = module_of(g);
  EXPECT_EQ(error_of([&] { run(gm, {1, 2, 3}); }), "forward() takes from 2 to 3 positional arguments but 4 were given");
  auto h = std::make_shared<Graph>();
  h->output(h->placeholder("x"));
  EXPECT_EQ(error_of([&] { run(module_of(h), {1, 2}); }), "forward() takes 2 positional arguments but 3 were given");
  auto k = std::make_shared<Graph>();
  k->output(1);
  EXPECT_EQ(error_of([&] { run(module_of(k), {1}); }), "forward() takes 1 positional argument but 2 were given");
}

}  // namespace
