// fx::save / fx::load round trips: traced C++ models (conv / batch norm /
// linear leaves, an LSTM, nested modules), a hand-built graph with every
// argument kind, graphs after passes (replace_pattern, split_module's nested
// GraphModules), an imported TorchScript model; shared storages and views.
#include "serialize_test_util.h"

#include "../trace/trace_models.h"

#include <fx/examples/residual_net.h>
#include <fx/import.h>
#include <fx/passes/split_module.h>
#include <fx/passes/subgraph_rewriter.h>
#include <fx/tensor_meta.h>
#include <fx/trace.h>

#include <torch/csrc/jit/api/module.h>
#include <torch/nn/modules/linear.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace fx {
namespace {

using serialize_test::expect_same_module;
using serialize_test::round_trip;

TEST(SaveLoad, TracedResidualNet) {
  torch::manual_seed(0);
  examples::ResidualNet net(3, 8, 5);
  net->eval();
  at::Tensor x = at::randn({2, 3, 8, 8});
  auto gm = symbolic_trace(net, {x});
  SaveReport report;
  auto loaded = round_trip(*gm, &report);
  expect_same_module(*gm, *loaded, {x});
  EXPECT_EQ(report.dropped_meta, 0u);
  // The leaves come back as the same torch::nn types with the same options.
  auto conv = std::dynamic_pointer_cast<torch::nn::Conv2dImpl>(loaded->get_submodule("block.conv1"));
  ASSERT_TRUE(conv);
  EXPECT_EQ(conv->options.padding_mode().index(), net->block->conv1->options.padding_mode().index());
  EXPECT_FALSE(conv->options.bias());
  auto bn = std::dynamic_pointer_cast<torch::nn::BatchNorm2dImpl>(loaded->get_submodule("bn1"));
  ASSERT_TRUE(bn);
  EXPECT_TRUE(at::equal(bn->running_var, net->bn1->running_var));
  EXPECT_FALSE(bn->is_training());
  // tensor_meta travels with the nodes.
  for (Node* n : loaded->graph().nodes()) {
    if (n->op() != Opcode::CallModule) continue;
    ASSERT_TRUE(n->meta().count("tensor_meta")) << n->name();
  }
}

TEST(SaveLoad, TrainingModeAndGradientsSurvive) {
  torch::manual_seed(1);
  trace_test::ComplexModel m;
  at::Tensor x = at::randn({3, 10});
  auto gm = symbolic_trace(m, {x});
  auto loaded = round_trip(*gm);
  EXPECT_TRUE(loaded->is_training());
  auto w = loaded->get_submodule("linear1")->named_parameters()["weight"];
  EXPECT_TRUE(w.requires_grad());
  at::Tensor y = loaded->forward(x);
  y.sum().backward();
  EXPECT_TRUE(w.grad().defined());
}

TEST(SaveLoad, TracedLstm) {
  torch::manual_seed(2);
  trace_test::Seq2Vec m;
  m->eval();
  at::Tensor x = at::randn({5, 2, 8});
  auto gm = symbolic_trace(m, {x});
  auto loaded = round_trip(*gm);
  expect_same_module(*gm, *loaded, {x});
  auto lstm = std::dynamic_pointer_cast<torch::nn::LSTMImpl>(loaded->get_submodule("lstm"));
  ASSERT_TRUE(lstm);
  EXPECT_EQ(lstm->options.num_layers(), 2);
  EXPECT_EQ(lstm->options.hidden_size(), 16);
}

c10::IValue identity_fn(std::vector<c10::IValue>& args, ValueKwargs&) { return args.at(0); }

TEST(SaveLoad, EveryArgumentKind) {
  register_function("serialize_test::first", identity_fn);
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x", std::nullopt, std::string("torch.Tensor"));
  Node* y = g->placeholder("y", Argument(2.5));
  at::Tensor constant = at::arange(6, at::kFloat);
  ArgList args = {x,
                  Argument(),
                  true,
                  int64_t{-7},
                  0.1,
                  std::numeric_limits<double>::infinity(),
                  -std::numeric_limits<double>::infinity(),
                  std::numeric_limits<double>::quiet_NaN(),
                  "a 'quoted' string\n",
                  c10::ScalarType::Half,
                  c10::Device("cuda:1"),
                  c10::kSparse,
                  c10::MemoryFormat::ChannelsLast,
                  Argument::from_ivalue(constant),
                  Argument::list({1, 2, Argument::tuple({x, y})}),
                  Argument::tuple({}),
                  Argument::dict({{"k", x}, {"nested", Argument::dict({{"z", Argument::list({})}})}}),
                  Argument::slice(Argument(), 2, y),
                  Argument::ellipsis()};
  Node* call = g->call_function("serialize_test::first", args, {{"alpha", 2}, {"beta", Argument::list({x})}});
  call->set_type("torch.Tensor");
  call->set_stack_trace("File \"m.py\", line 3, in forward\n    y = f(x)");
  call->meta()["tag"] = std::string("user string");
  call->meta()["count"] = int64_t{3};
  call->meta()["unsavable"] = std::vector<int>{1};
  Node* view = g->call_method("view", {call, -1});
  Node* item = g->call_function("operator.getitem", {view, Argument::tuple({Argument::slice(1, Argument(), Argument()), Argument::ellipsis()})});
  g->output(Argument::tuple({item, y}), std::string("Tuple[torch.Tensor, float]"));
  auto gm = std::make_shared<GraphModule>(std::make_shared<torch::nn::Module>(), g);

  SaveReport report;
  auto loaded = round_trip(*gm, &report);
  EXPECT_EQ(report.dropped_meta, 1u);
  ASSERT_EQ(report.dropped_meta_keys.size(), 1u);
  EXPECT_EQ(report.dropped_meta_keys[0], "first.unsavable");
  expect_same_module(*gm, *loaded, {at::randn({2, 3})});
  // Argument by argument: the same values (nodes by name).
  Node* call2 = loaded->graph().find_nodes(Opcode::CallFunction, std::string("serialize_test::first")).at(0);
  ASSERT_EQ(call2->args().size(), args.size());
  for (size_t i = 0; i < args.size(); ++i) EXPECT_EQ(call2->args()[i].repr(), args[i].repr()) << i;
  EXPECT_TRUE(at::equal(call2->args()[13].to_constant().toTensor(), constant));
  EXPECT_TRUE(std::isnan(call2->args()[7].to_double()));
  EXPECT_EQ(call2->kwargs().size(), 2u);
  EXPECT_EQ(call2->stack_trace(), call->stack_trace());
  EXPECT_EQ(std::any_cast<std::string>(call2->meta().at("tag")), "user string");
  EXPECT_EQ(std::any_cast<int64_t>(call2->meta().at("count")), 3);
  EXPECT_EQ(call2->meta().count("unsavable"), 0u);
  EXPECT_EQ(call2->type(), "torch.Tensor");
  EXPECT_EQ(loaded->graph().output_node()->type(), "Tuple[torch.Tensor, float]");
}

TEST(SaveLoad, SharedStoragesAndViews) {
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* w = g->get_attr("w");
  Node* v = g->get_attr("sub.v");
  Node* p = g->get_attr("p");
  Node* a = g->call_function("aten::add", {x, v});
  Node* b = g->call_function("aten::mul", {a, v});
  g->output(Argument::tuple({b, p, w}));
  at::Tensor base = at::arange(24, at::kFloat).reshape({4, 6});
  auto root = std::make_shared<torch::nn::Module>();
  auto sub = std::make_shared<torch::nn::Module>();
  root->register_buffer("w", base);
  sub->register_buffer("v", base.t().slice(0, 1, 5, 2));  // a strided view with an offset
  root->register_module("sub", sub);
  root->register_parameter("p", at::ones({2}));
  auto gm = std::make_shared<GraphModule>(root, g);
  auto loaded = round_trip(*gm);
  expect_same_module(*gm, *loaded, {at::ones({2, 4})});
  at::Tensor lw = loaded->fetch_attr("w"), lv = loaded->fetch_attr("sub.v");
  EXPECT_EQ(lw.storage().unsafeGetStorageImpl(), lv.storage().unsafeGetStorageImpl());
  EXPECT_EQ(lv.storage_offset(), 1);
  EXPECT_EQ(lv.strides(), (std::vector<int64_t>{2, 6}));
  EXPECT_TRUE(loaded->fetch_attr("p").requires_grad());
  lw.fill_(0);  // one storage: the view sees the write
  EXPECT_EQ(lv.abs().sum().item<float>(), 0.f);
}

TEST(SaveLoad, AfterReplacePattern) {
  torch::manual_seed(3);
  trace_test::ComplexModel m;
  auto gm = symbolic_trace(m, {at::randn({2, 10})});
  auto pattern = std::make_shared<Graph>();
  {
    Node* px = pattern->placeholder("x");
    pattern->output(pattern->call_function("aten::relu", {px}));
  }
  auto replacement = std::make_shared<Graph>();
  {
    Node* rx = replacement->placeholder("x");
    replacement->output(replacement->call_function("aten::sigmoid", {rx}));
  }
  ASSERT_EQ(replace_pattern(*gm, *pattern, *replacement).size(), 1u);
  auto loaded = round_trip(*gm);
  EXPECT_NE(loaded->code().find("sigmoid"), std::string::npos);
  EXPECT_EQ(loaded->code().find("relu"), std::string::npos);
  expect_same_module(*gm, *loaded, {at::randn({2, 10})});
}

TEST(SaveLoad, SplitModuleNestedGraphModules) {
  torch::manual_seed(4);
  examples::ResidualNet net(3, 4, 3);
  net->eval();
  at::Tensor x = at::randn({1, 3, 6, 6});
  auto gm = symbolic_trace(net, {x});
  int64_t i = 0;
  auto split = split_module(gm, gm, [&](Node*) { return (i++) / 4; });
  auto loaded = round_trip(*split);
  expect_same_module(*split, *loaded, {x});
  auto sub = std::dynamic_pointer_cast<GraphModule>(loaded->get_submodule("submod_1"));
  ASSERT_TRUE(sub);
  EXPECT_EQ(sub->code(), std::dynamic_pointer_cast<GraphModule>(split->get_submodule("submod_1"))->code());
}

TEST(SaveLoad, ImportedTorchScriptLeaves) {
  // A scripted model with a torch.nn-named leaf: the leaf stays TorchScript.
  auto gm = import_torchscript(serialize_test::scripted_model_with_leaf());
  ASSERT_EQ(gm->graph().find_nodes(Opcode::CallModule).size(), 1u);
  auto loaded = round_trip(*gm);
  expect_same_module(*gm, *loaded, {at::randn({2, 3})});
  // The leaf's parameters are the loaded module's, as after import (freeze
  // and fold_batch_norm read them: `fxcpp run M.fx --optimize`).
  std::vector<std::string> imported_names, loaded_names;
  for (const auto& p : gm->named_parameters()) imported_names.push_back(p.key());
  for (const auto& p : loaded->named_parameters()) {
    loaded_names.push_back(p.key());
    EXPECT_TRUE(p.value().equal(gm->named_parameters()[p.key()])) << p.key();
  }
  EXPECT_EQ(loaded_names, (std::vector<std::string>{"scale.s"}));
  EXPECT_EQ(loaded_names, imported_names);
  EXPECT_EQ(loaded->named_buffers().size(), gm->named_buffers().size());
}

TEST(SaveLoad, FileRoundTripAndAtomicOverwrite) {
  trace_test::ComplexModel m;
  auto gm = symbolic_trace(m, {at::randn({2, 10})});
  const std::string path = ::testing::TempDir() + "fxcpp_save_load.fx";
  SaveReport r = save(*gm, path);
  EXPECT_GT(r.bytes, 0u);
  EXPECT_EQ(r.storages, 4u);
  EXPECT_TRUE(is_fxcpp_file(path));
  auto loaded = load(path);
  expect_same_module(*gm, *loaded, {at::randn({2, 10})});
  // The same bytes through a stream.
  std::ostringstream out;
  save(*gm, out);
  std::istringstream in(out.str());
  expect_same_module(*gm, *load(in, "stream"), {at::randn({2, 10})});
  std::remove(path.c_str());
  EXPECT_FALSE(is_fxcpp_file(path));
  EXPECT_FALSE(is_fxcpp_file("/dev/zero"));
}

TEST(SaveLoad, WithoutMeta) {
  trace_test::ComplexModel m;
  auto gm = symbolic_trace(m, {at::randn({2, 10})});
  SaveOptions options;
  options.keep_meta = false;
  SaveReport report;
  auto loaded = load_from_string(save_to_string(*gm, options, &report), "nometa.fx");
  EXPECT_EQ(report.dropped_meta, 0u);  // left out on purpose, not dropped
  for (Node* n : loaded->graph().nodes()) EXPECT_TRUE(n->meta().empty()) << n->name();
  expect_same_module(*gm, *loaded, {at::randn({2, 10})});
}

// A layer the graph reads by get_attr (as freeze_modules leaves a linear
// layer: aten::linear of its weight and bias) loads as the layer it was,
// its type and training flag kept, so saving the loaded module writes the
// same bytes. (GraphModule's constructor, as torch.fx's, would put an empty
// module holding the two tensors there.)
TEST(SaveLoad, LayerReadByGetAttrKeepsItsType) {
  torch::manual_seed(0);
  auto root = std::make_shared<torch::nn::Module>("Root");
  torch::nn::Linear fc(4, 3);
  fc->eval();
  root->register_module("fc", fc.ptr());
  auto g = std::make_shared<Graph>();
  Node* x = g->placeholder("x");
  Node* call = g->call_module("fc", {x});
  g->output(call);
  auto gm = std::make_shared<GraphModule>(root, g);
  {
    InsertPoint at = g->inserting_before(call);
    Node* linear = g->call_function("aten::linear", {x, g->get_attr("fc.weight"), g->get_attr("fc.bias")});
    call->replace_all_uses_with(linear);
  }
  g->erase_node(call);
  gm->recompile();
  const std::string bytes = save_to_string(*gm);
  auto loaded = load_from_string(bytes, "frozen.fx");
  auto layer = std::dynamic_pointer_cast<torch::nn::LinearImpl>(loaded->get_submodule("fc"));
  ASSERT_TRUE(layer);
  EXPECT_FALSE(layer->is_training());
  EXPECT_EQ(save_to_string(*loaded), bytes);
  expect_same_module(*gm, *loaded, {at::randn({2, 4})});
}

}  // namespace
}  // namespace fx
