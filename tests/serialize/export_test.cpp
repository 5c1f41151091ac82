// fx::export_torchscript / fx::to_torchscript: exported files run under stock
// torch::jit::load with the GraphModule's outputs; what cannot be exported is
// an fx::ExportError naming the node, and then no file is written.
#include <fx/examples/residual_net.h>
#include <fx/export.h>
#include <fx/import.h>
#include <fx/passes/const_fold.h>
#include <fx/passes/cse.h>
#include <fx/passes/dead_code.h>
#include <fx/passes/remove_dropout.h>
#include <fx/passes/split_module.h>
#include <fx/trace.h>

#include "../passes/random_graph.h"

#include <gtest/gtest.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/rnn.h>

#include <cstdio>
#include <filesystem>
#include <set>
#include <fstream>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;

/// A fresh path in the test's temporary directory.
std::string temp_path(const std::string& name) {
  fs::path path = fs::temp_directory_path() / ("fx_export_test_" + std::to_string(::getpid())) / name;
  fs::create_directories(path.parent_path());
  return path.string();
}

/// Exports gm to a file and loads it back with stock torch::jit::load.
torch::jit::Module export_and_load(fx::GraphModule& gm, const std::string& name) {
  std::string path = temp_path(name);
  fx::export_torchscript(gm, path);
  torch::jit::Module m = torch::jit::load(path);
  fs::remove(path);
  return m;
}

/// Values equal: tensors within 1e-6 with the same dtype and shape, the rest exactly.
void expect_same(const c10::IValue& got, const c10::IValue& want, const std::string& where = "output") {
  if (want.isTensor()) {
    ASSERT_TRUE(got.isTensor()) << where << ": " << got.tagKind();
    const at::Tensor& g = got.toTensor();
    const at::Tensor& w = want.toTensor();
    ASSERT_EQ(g.scalar_type(), w.scalar_type()) << where;
    ASSERT_EQ(g.sizes(), w.sizes()) << where;
    if (w.is_floating_point())
      EXPECT_TRUE(at::allclose(g, w, 1e-6, 1e-6)) << where << ": max diff " << (g - w).abs().max().item<double>();
    else
      EXPECT_TRUE(at::equal(g, w)) << where;
  } else if (want.isTuple() || want.isList()) {
    auto items = [](const c10::IValue& v) {
      return v.isTuple() ? v.toTupleRef().elements().vec() : v.toListRef().vec();
    };
    auto g = items(got), w = items(want);
    ASSERT_EQ(g.size(), w.size()) << where;
    for (size_t i = 0; i < w.size(); ++i) expect_same(g[i], w[i], where + "[" + std::to_string(i) + "]");
  } else {
    EXPECT_EQ(got, want) << where;
  }
}

std::string export_error(fx::GraphModule& gm, const std::string& path);

/// gm's outputs and those of its exported file agree on `inputs`.
void expect_export_matches(fx::GraphModule& gm, const std::vector<c10::IValue>& inputs, const std::string& name) {
  c10::IValue want = gm.forward(inputs);
  torch::jit::Module m = export_and_load(gm, name);
  expect_same(m.forward(inputs), want);
}

TEST(ExportTest, TracedResidualNetRunsUnderTorchJitLoad) {
  torch::manual_seed(0);
  fx::examples::ResidualNet model;
  model->eval();
  auto gm = fx::symbolic_trace(model, {at::randn({2, 3, 16, 16})});
  gm->eval();
  at::Tensor x = at::randn({2, 3, 16, 16});
  c10::IValue want = gm->forward({x});
  torch::jit::Module m = export_and_load(*gm, "residual.pt");
  at::Tensor got = m.forward({x}).toTensor();
  EXPECT_TRUE(at::equal(got, want.toTensor())) << (got - want.toTensor()).abs().max();
  // The module hierarchy is kept: parameters under their qualified names.
  std::set<std::string> names;
  for (const auto& p : m.named_parameters()) names.insert(p.name);
  EXPECT_TRUE(names.count("block.conv1.weight")) << *names.begin();
  EXPECT_TRUE(names.count("fc.bias"));
  EXPECT_FALSE(m.is_training());
}

TEST(ExportTest, InMemoryModuleSharesTensors) {
  torch::manual_seed(0);
  fx::examples::ResidualNet model;
  model->eval();
  auto gm = fx::symbolic_trace(model, {at::randn({1, 3, 8, 8})});
  torch::jit::Module m = fx::to_torchscript(*gm);
  EXPECT_TRUE(m.attr("fc").toModule().attr("weight").toTensor().is_same(gm->fetch_attr("fc.weight")));
  at::Tensor x = at::randn({1, 3, 8, 8});
  EXPECT_TRUE(at::equal(m.forward({x}).toTensor(), gm->forward({x}).toTensor()));
}

TEST(ExportTest, TrainingBatchNormUpdatesStatisticsAsTheGraphDoes) {
  torch::manual_seed(0);
  fx::examples::ResidualNet model;
  model->train();
  auto gm = fx::symbolic_trace(model, {at::randn({2, 3, 8, 8})});
  // The file holds copies of the buffers as they are now; step both once.
  torch::jit::Module m = export_and_load(*gm, "train.pt");
  EXPECT_TRUE(m.is_training());
  at::Tensor x = at::randn({2, 3, 8, 8});
  at::Tensor want = gm->forward({x}).toTensor();
  at::Tensor got = m.forward({x}).toTensor();
  EXPECT_TRUE(at::allclose(got, want, 1e-6, 1e-6));
  auto bn1 = m.attr("bn1").toModule();
  EXPECT_TRUE(at::allclose(bn1.attr("running_mean").toTensor(), gm->fetch_attr("bn1.running_mean"), 1e-6, 1e-6));
  EXPECT_EQ(bn1.attr("num_batches_tracked").toTensor().item<int64_t>(), 1);
  EXPECT_EQ(gm->fetch_attr("bn1.num_batches_tracked").item<int64_t>(), 1);
}

/// Every torch::nn layer that tracing keeps as a leaf.
struct LeafZooImpl : torch::nn::Module {
  LeafZooImpl()
      : conv1d(register_module("conv1d", torch::nn::Conv1d(torch::nn::Conv1dOptions(4, 4, 3).padding(1)))),
        conv(register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(4, 6, 3).stride(2).groups(2)))),
        same(register_module("same", torch::nn::Conv2d(torch::nn::Conv2dOptions(6, 6, 3).padding(torch::kSame)))),
        up(register_module("up", torch::nn::ConvTranspose2d(
                                      torch::nn::ConvTranspose2dOptions(6, 4, 3).stride(2).output_padding(1)))),
        gn(register_module("gn", torch::nn::GroupNorm(2, 4))),
        ln(register_module("ln", torch::nn::LayerNorm(torch::nn::LayerNormOptions({8})))),
        fc(register_module("fc", torch::nn::Linear(torch::nn::LinearOptions(8, 5).bias(false)))) {}
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv1d(x.flatten(2)).view_as(x);   // [N, 4, H*W] through a Conv1d
    y = up(at::relu(same(conv(y))));
    y = ln(gn(y).narrow(2, 0, 8).narrow(3, 0, 8));
    return fc(y);
  }
  torch::nn::Conv1d conv1d;
  torch::nn::Conv2d conv, same;
  torch::nn::ConvTranspose2d up;
  torch::nn::GroupNorm gn;
  torch::nn::LayerNorm ln;
  torch::nn::Linear fc;
};
TORCH_MODULE(LeafZoo);

TEST(ExportTest, TracedLeafLayersAreInlinedAsAtenOperators) {
  torch::manual_seed(0);
  LeafZoo model;
  at::Tensor x = at::randn({2, 4, 9, 9});
  auto gm = fx::symbolic_trace(model, {x});
  size_t leaves = 0;
  for (fx::Node* n : gm->graph().nodes()) leaves += n->op() == fx::Opcode::CallModule;
  ASSERT_EQ(leaves, 7u) << gm->graph().tabular();
  torch::jit::Module m = fx::to_torchscript(*gm);
  std::string code = m.get_method("forward").graph()->toString();
  for (const char* op : {"aten::conv1d", "aten::conv2d", "aten::conv_transpose2d", "aten::group_norm",
                         "aten::layer_norm", "aten::linear"})
    EXPECT_NE(code.find(op), std::string::npos) << op << "\n" << code;
  expect_export_matches(*gm, {x}, "leaves.pt");
}

TEST(ExportTest, TracedEmbedding) {
  torch::manual_seed(0);
  torch::nn::Embedding emb(torch::nn::EmbeddingOptions(10, 3).padding_idx(-2));
  at::Tensor idx = at::tensor({1, 8, 3, 0}, at::kLong);
  auto gm = fx::symbolic_trace(emb, {idx});
  expect_export_matches(*gm, {idx}, "embedding.pt");
}

/// A hand-built graph with every kind of argument: lists of nodes and
/// constants, tuples, None, dtypes, slices / None / Ellipsis indices,
/// getitem of tuple results, kwargs, and int arithmetic on sizes.
std::shared_ptr<fx::GraphModule> every_argument_kind() {
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* k = g->placeholder("k");
  k->set_type("int");
  fx::Node* size = g->call_method("size", {x});
  fx::Node* rows = g->call_function("operator.getitem", {size, 0});
  fx::Node* cols = g->call_method("size", {x, 1});
  fx::Node* half = g->call_function("operator.floordiv", {cols, 2});
  fx::Node* n = g->call_function("operator.add", {g->call_function("operator.mul", {rows, k}), half});
  fx::Node* flat = g->call_function("aten::view", {x, fx::Argument::list({rows, -1})});
  fx::Node* permuted = g->call_method("permute", {g->call_method("reshape", {x, fx::Argument::tuple({-1, rows})}),
                                                  fx::Argument::tuple({1, 0})});
  fx::Node* mx = g->call_function("aten::max.dim", {x, 1}, {{"keepdim", true}});
  fx::Node* values = g->call_function("operator.getitem", {mx, 0});
  fx::Node* indices = g->call_function("operator.getitem", {mx, -1});
  fx::Node* sum = g->call_function("aten::sum", {x, fx::Argument::list({1})},
                                   {{"keepdim", true}, {"dtype", c10::ScalarType::Double}});
  fx::Node* clamp = g->call_function("aten::clamp", {x, nullptr, 0.5});
  fx::Node* scaled = g->call_function("aten::add", {x, clamp}, {{"alpha", 2}});
  fx::Node* cat = g->call_function("aten::cat", {fx::Argument::list({values, scaled})}, {{"dim", 1}});
  auto all = fx::Argument::slice(nullptr, nullptr, nullptr);
  fx::Node* strided = g->call_function(
      "operator.getitem", {cat, fx::Argument::tuple({all, fx::Argument::slice(1, nullptr, 2)})});
  fx::Node* last = g->call_function("operator.getitem", {x, fx::Argument::tuple({fx::Argument::ellipsis(), -1})});
  fx::Node* corner =
      g->call_function("operator.getitem", {x, fx::Argument::tuple({fx::Argument::ellipsis(), 1, -1})});
  fx::Node* positive = g->call_function("aten::gt", {x, 0});
  fx::Node* masked = g->call_function("operator.getitem", {x, positive});
  fx::Node* picked = g->call_function(
      "operator.getitem", {x, fx::Argument::tuple({all, g->call_function("aten::argmax", {x, 0}), nullptr})});
  fx::Node* below = g->call_function("operator.sub", {rows, 1});
  fx::Node* lifted = g->call_function("operator.getitem", {x, fx::Argument::tuple({nullptr, below})});
  fx::Node* row = g->call_function("operator.getitem", {x, 0});
  fx::Node* rsub = g->call_function("operator.sub", {1.0, row});
  fx::Node* rdiv = g->call_function("operator.truediv", {2.0, g->call_method("exp", {row})});
  fx::Node* dbl = g->call_method("double", {g->call_function("operator.mul", {strided, 3})});
  fx::Node* to = g->call_method("to", {indices, c10::ScalarType::Float});
  fx::Node* zeros = g->call_function("aten::zeros", {fx::Argument::list({n, 2})},
                                     {{"dtype", c10::ScalarType::Float}, {"device", c10::Device(c10::kCPU)}});
  g->output(fx::Argument::tuple({dbl, sum, last, corner, masked, picked, lifted, rsub, rdiv, to, zeros, flat, permuted,
                                 g->call_function("operator.sub", {n, 1})}));
  return std::make_shared<fx::GraphModule>(std::make_shared<torch::nn::Module>(), g);
}

TEST(ExportTest, HandBuiltGraphWithEveryArgumentKind) {
  auto gm = every_argument_kind();
  at::Tensor x = at::randn({3, 6});
  expect_export_matches(*gm, {x, int64_t{4}}, "args.pt");
  // The exported forward keeps the input names and types.
  torch::jit::Module m = fx::to_torchscript(*gm);
  EXPECT_EQ(m.get_method("forward").function().getSchema().arguments()[2].type()->str(), "int");
  EXPECT_EQ(m.get_method("forward").function().getSchema().arguments()[1].name(), "x");
}

TEST(ExportTest, PythonNumberBuiltinsKeepPythonSemantics) {
  auto g = std::make_shared<fx::Graph>();
  fx::Node* a = g->placeholder("a");
  a->set_type("int");
  fx::Node* b = g->placeholder("b");
  b->set_type("int");
  fx::Node* f = g->placeholder("f");
  f->set_type("float");
  fx::Node* sizes = g->placeholder("sizes");
  sizes->set_type("List[int]");
  auto call = [&](const char* op, fx::ArgList args) { return g->call_function(op, std::move(args)); };
  g->output(fx::Argument::tuple({
      call("operator.floordiv", {a, b}), call("operator.mod", {a, b}), call("operator.truediv", {a, b}),
      call("operator.pow", {b, 3}), call("operator.neg", {a}), call("operator.abs", {a}),
      call("operator.lt", {a, b}), call("operator.not_", {call("operator.eq", {a, b})}),
      call("operator.mul", {f, a}), call("operator.sub", {f, 0.25}), call("operator.pos", {f}),
      call("operator.getitem", {sizes, fx::Argument::slice(1, nullptr, nullptr)}),
      call("operator.getitem", {sizes, -1}), call("operator.contains", {sizes, b}),
      call("operator.add", {sizes, fx::Argument::list({7})}), call("operator.and_", {a, b}),
      call("operator.lshift", {b, 2}), call("operator.truth", {a})}));
  fx::GraphModule gm(std::make_shared<torch::nn::Module>(), g);
  for (int64_t sign : {1, -1}) {
    std::vector<c10::IValue> inputs = {int64_t{-7} * sign, int64_t{3}, 1.5, c10::List<int64_t>({4, 5, 3})};
    expect_export_matches(gm, inputs, "numbers.pt");
  }
}

TEST(ExportTest, DictOutput) {
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* y = g->call_function("aten::sigmoid", {x});
  g->output(fx::Argument::dict({{"logits", x}, {"probs", y}}));
  fx::GraphModule gm(std::make_shared<torch::nn::Module>(), g);
  at::Tensor in = at::randn({2, 2});
  c10::Dict<c10::IValue, c10::IValue> got = export_and_load(gm, "dict.pt").forward({in}).toGenericDict();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(at::equal(got.at(std::string("logits")).toTensor(), in));
  EXPECT_TRUE(at::equal(got.at(std::string("probs")).toTensor(), at::sigmoid(in)));

  auto g2 = std::make_shared<fx::Graph>();
  fx::Node* z = g2->placeholder("z");
  g2->output(fx::Argument::dict({{"t", z}, {"n", 1}}));
  fx::GraphModule mixed(std::make_shared<torch::nn::Module>(), g2);
  EXPECT_EQ(export_error(mixed, temp_path("mixed.pt")),
            "cannot export node 'output' (output[target=output]): a list or dict whose items have no common "
            "TorchScript type");
}

TEST(ExportTest, AssertBecomesARaise) {
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* dim0 = g->call_method("size", {x, 0});
  g->call_function("torch._assert", {g->call_function("operator.eq", {dim0, 2}), "batch must be 2"});
  g->output(g->call_function("aten::relu", {x}));
  auto gm = std::make_shared<fx::GraphModule>(std::make_shared<torch::nn::Module>(), g);
  at::Tensor good = at::randn({2, 3});
  expect_export_matches(*gm, {good}, "assert.pt");
  torch::jit::Module m = export_and_load(*gm, "assert2.pt");
  try {
    m.forward({at::randn({3, 3})});
    FAIL() << "no exception";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("batch must be 2"), std::string::npos) << e.what();
  }
}

TEST(ExportTest, SplitModuleSubmodulesAreExportedRecursively) {
  torch::manual_seed(0);
  fx::examples::ResidualNet model;
  model->eval();
  auto gm = fx::symbolic_trace(model, {at::randn({1, 3, 8, 8})});
  int64_t part = 0;
  auto split = fx::split_module(gm, model.ptr(), [&](fx::Node* n) {
    if (n->op() == fx::Opcode::CallModule && n->target() == "block.conv1") part = 1;
    if (n->op() == fx::Opcode::CallModule && n->target() == "fc") part = 2;
    return part;
  });
  torch::jit::Module m = fx::to_torchscript(*split);
  EXPECT_TRUE(m.attr("submod_1").toModule().find_method("forward").has_value());
  at::Tensor x = at::randn({1, 3, 8, 8});
  expect_export_matches(*split, {x}, "split.pt");
  EXPECT_TRUE(at::equal(m.forward({x}).toTensor(), gm->forward({x}).toTensor()));
}

/// A TorchScript model as Python would save it: torch.nn leaves (Conv2d,
/// Dropout) inside a scripted parent.
std::string save_scripted_model(const std::string& name) {
  torch::manual_seed(0);
  torch::jit::Module conv("__torch__.torch.nn.modules.conv.Conv2d");
  conv.register_attribute("training", c10::BoolType::get(), false);
  conv.register_parameter("weight", at::randn({4, 3, 3, 3}), false);
  conv.register_parameter("bias", at::randn({4}), false);
  conv.define(R"(
def forward(self, x):
    return torch.conv2d(x, self.weight, self.bias, [1, 1], [1, 1])
)");
  torch::jit::Module drop("__torch__.torch.nn.modules.dropout.Dropout");
  drop.register_attribute("training", c10::BoolType::get(), false);
  drop.define(R"(
def forward(self, x):
    return torch.dropout(x, 0.5, self.training)
)");
  torch::jit::Module root("__torch__.Net");
  root.register_attribute("training", c10::BoolType::get(), false);
  root.register_module("conv", conv);
  root.register_module("drop", drop);
  root.register_buffer("shift", at::randn({4, 1, 1}));
  root.define(R"(
def forward(self, x):
    y = self.drop.forward(self.conv.forward(x))
    n = y.size(0) * 2
    return torch.relu(y + self.shift).reshape([n, -1]), n
)");
  std::string path = temp_path(name);
  root.save(path);
  return path;
}

TEST(ExportTest, ImportedModelRewrittenByAPassExportsTheRewrite) {
  std::string path = save_scripted_model("scripted.pt");
  auto gm = fx::import_torchscript(path);
  ASSERT_TRUE(fx::remove_dropout(gm).modified);
  torch::jit::Module m = export_and_load(*gm, "rewritten.pt");
  at::Tensor x = at::randn({2, 3, 5, 5});
  expect_same(m.forward({x}), gm->forward({x}));
  // The leaf stays a TorchScript submodule; the dropout is gone.
  EXPECT_TRUE(m.attr("conv").toModule().find_method("forward").has_value());
  EXPECT_FALSE(m.hasattr("drop"));
  std::string code = m.get_method("forward").graph()->toString();
  EXPECT_EQ(code.find("dropout"), std::string::npos) << code;
  EXPECT_NE(code.find("prim::CallMethod[name=\"forward\"]"), std::string::npos) << code;
  // Same outputs as the original file (dropout is the identity in eval mode).
  torch::jit::Module original = torch::jit::load(path);
  expect_same(m.forward({x}), original.forward({x}));
}

TEST(ExportTest, RandomGraphsRewrittenByPassesExportExactly) {
  // The passes' random graphs (tests/passes/random_graph.h): attributes,
  // duplicates, dead nodes, tuples of outputs; CSE, DCE and constant folding
  // (whose folded values become new attributes) rewrite them first.
  for (uint64_t seed = 0; seed < 12; ++seed) {
    fx_test::RandomGraph r = fx_test::make_random_graph(seed);
    c10::IValue original = r.gm->forward(r.inputs);
    fx::CSEPass().call(r.gm);
    fx::split_const_subgraphs(r.gm, nullptr);
    fx::eliminate_dead_code(r.gm);
    c10::IValue want = r.gm->forward(r.inputs);
    expect_same(want, original, "seed " + std::to_string(seed) + " rewrite");
    torch::jit::Module m = export_and_load(*r.gm, "random.pt");
    expect_same(m.forward(r.inputs), want, "seed " + std::to_string(seed));
  }
}

// ---- what cannot be exported -------------------------------------------------

/// The ExportError text of exporting gm to `path`; also checks no file appeared.
std::string export_error(fx::GraphModule& gm, const std::string& path) {
  try {
    fx::export_torchscript(gm, path);
  } catch (const fx::ExportError& e) {
    return e.what();
  }
  return "no error";
}

TEST(ExportTest, RegisteredCppFunctionIsNotExportable) {
  fx::register_function("mylib::scale", [](std::vector<c10::IValue>& a, fx::ValueKwargs&) -> c10::IValue {
    return a[0].toTensor() * 2;
  });
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  g->output(g->call_function("mylib::scale", {g->call_function("aten::relu", {x})}));
  fx::GraphModule gm(std::make_shared<torch::nn::Module>(), g);
  std::string path = temp_path("keep/scale.pt");
  EXPECT_EQ(export_error(gm, path),
            "cannot export node 'scale' (call_function[target=mylib::scale]): 'mylib::scale' is not a TorchScript "
            "operator (functions registered with fx::register_function cannot be exported)");
  EXPECT_FALSE(fs::exists(path));
  // An existing file is left as it was.
  { std::ofstream(path) << "keep"; }
  EXPECT_NE(export_error(gm, path), "no error");
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "keep");
  EXPECT_EQ(std::distance(fs::directory_iterator(fs::path(path).parent_path()), fs::directory_iterator()), 1);
}

TEST(ExportTest, CppModuleWithoutTorchScriptFormIsNotExportable) {
  torch::nn::LSTM lstm(torch::nn::LSTMOptions(3, 4));
  auto root = std::make_shared<torch::nn::Module>();
  root->register_module("rnn", lstm);
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  g->output(g->call_module("rnn", {x}));
  fx::GraphModule gm(root, g);
  EXPECT_EQ(export_error(gm, temp_path("lstm.pt")),
            "cannot export node 'rnn' (call_module[target=rnn]): the C++ module torch::nn::LSTM has no TorchScript "
            "form (exported leaves: Linear, Conv1d/2d/3d, ConvTranspose1d/2d/3d, BatchNorm1d/2d/3d, LayerNorm, "
            "GroupNorm, Embedding, TorchScript leaves, GraphModules)");
}

/// The ExportError text for one call_module of `module` on `nargs` inputs.
std::string leaf_error(std::shared_ptr<torch::nn::Module> module, size_t nargs = 1) {
  auto root = std::make_shared<torch::nn::Module>();
  root->register_module("m", std::move(module));
  auto g = std::make_shared<fx::Graph>();
  fx::ArgList args;
  for (size_t i = 0; i < nargs; ++i) args.emplace_back(g->placeholder("x" + std::to_string(i)));
  g->output(g->call_module("m", args));
  fx::GraphModule gm(root, g);
  return export_error(gm, temp_path("leaf.pt"));
}

TEST(ExportTest, LeafOptionsWithoutOneOperatorAreNotExportable) {
  const std::string node = "cannot export node 'm' (call_module[target=m]): ";
  auto bn = torch::nn::BatchNorm2d(torch::nn::BatchNorm2dOptions(3).momentum(c10::nullopt));
  bn->train();
  EXPECT_EQ(leaf_error(bn.ptr()),
            node + "a BatchNorm in training mode with momentum=None (a cumulative average) is not exported");
  bn->eval();
  EXPECT_EQ(leaf_error(bn.ptr()), "no error");
  EXPECT_EQ(leaf_error(torch::nn::Embedding(torch::nn::EmbeddingOptions(4, 2).max_norm(1.0)).ptr()),
            node + "an Embedding with max_norm (which renormalizes its weight in place) is not exported");
  EXPECT_EQ(leaf_error(torch::nn::ConvTranspose2d(torch::nn::ConvTranspose2dOptions(2, 2, 3)).ptr(), 2),
            node + "ConvTranspose2d with an output_size argument is not exported");
  EXPECT_EQ(leaf_error(torch::nn::Conv2d(torch::nn::Conv2dOptions(2, 2, 3).padding_mode(torch::kReflect)).ptr()),
            node + "Conv2d with a padding_mode other than zeros is not exported");
  EXPECT_EQ(leaf_error(torch::nn::Linear(2, 2).ptr(), 2),
            node + "the leaf module takes 1 input(s), the node passes 2");
}

TEST(ExportTest, UnsupportedArgumentsNameTheNode) {
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* mask = g->call_function("aten::gt", {x, 0});
  g->output(g->call_function("operator.getitem", {x, fx::Argument::tuple({fx::Argument::ellipsis(), mask})}));
  fx::GraphModule gm(std::make_shared<torch::nn::Module>(), g);
  EXPECT_EQ(export_error(gm, temp_path("mask.pt")),
            "cannot export node 'getitem' (call_function[target=operator.getitem]): tensor index gt is not "
            "exported (ints, slices, None, Ellipsis and tensors before any Ellipsis are)");

  auto g2 = std::make_shared<fx::Graph>();
  fx::Node* y = g2->placeholder("y");
  y->set_type("Frobnicator");
  g2->output(y);
  fx::GraphModule gm2(std::make_shared<torch::nn::Module>(), g2);
  EXPECT_EQ(export_error(gm2, temp_path("type.pt")),
            "cannot export node 'y' (placeholder[target=y]): the type annotation 'Frobnicator' is not a "
            "TorchScript type");

  auto g3 = std::make_shared<fx::Graph>();
  fx::Node* z = g3->placeholder("z");
  g3->output(g3->call_function("aten::add", {z, "text"}));
  fx::GraphModule gm3(std::make_shared<torch::nn::Module>(), g3);
  std::string msg = export_error(gm3, temp_path("add.pt"));
  EXPECT_EQ(msg.rfind("cannot export node 'add' (call_function[target=aten::add]): the arguments match no schema of "
                      "aten::add",
                      0),
            0u)
      << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

TEST(ExportTest, UnwritablePathIsOneLine) {
  auto g = std::make_shared<fx::Graph>();
  g->output(g->placeholder("x"));
  fx::GraphModule gm(std::make_shared<torch::nn::Module>(), g);
  EXPECT_EQ(export_error(gm, "/nonexistent_fx_dir/out.pt"),
            "cannot write /nonexistent_fx_dir/out.pt: No such file or directory");
}

}  // namespace
