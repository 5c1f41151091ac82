// ShapeProp (torch.fx.passes.shape_prop): real and meta propagation,
// differential against Python torch.fx 1.13 (tests/passes/goldens/
// shape_prop.json, written by python/goldens/shape_prop_goldens.py), meta
// mode against real mode on hand-built graphs, a traced C++ model and
// imported torchvision models, and every C++ shape function against the CPU
// kernel it stands for.
#include "fx_paths.h"

#include <fx/examples/residual_net.h>
#include <fx/import.h>
#include <fx/passes/pass_manager.h>
#include <fx/passes/shape_prop.h>
#include <fx/trace.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/padding.h>

#include <fstream>
#include <functional>
#include <sstream>

namespace {

using fx::Argument;
using fx::Node;

// ---- helpers -------------------------------------------------------------------

std::string meta_str(const std::any& m) {
  if (!m.has_value()) return "none";
  if (const auto* t = std::any_cast<fx::TensorMetadata>(&m)) return t->str();
  const auto& v = std::any_cast<const std::vector<fx::TensorMetadata>&>(m);
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i].str();
  return s + "]";
}

std::string node_meta(const Node* n) {
  auto it = n->meta().find("tensor_meta");
  return it == n->meta().end() ? "none" : meta_str(it->second);
}

std::string node_type(const Node* n) {
  auto it = n->meta().find("type");
  return it == n->meta().end() ? "?" : std::any_cast<std::string>(it->second);
}

/// The golden line format: "<opcode> <target> <tensor_meta> type=<type>".
std::string node_line(const Node* n) {
  return std::string(fx::to_string(n->op())) + " " + n->target() + " " + node_meta(n) + " type=" + node_type(n);
}

std::vector<std::string> graph_lines(const fx::GraphModule& gm) {
  std::vector<std::string> out;
  for (Node* n : gm.graph().nodes()) out.push_back(node_line(n));
  return out;
}

std::vector<std::string> graph_metas(const fx::GraphModule& gm) {
  std::vector<std::string> out;
  for (Node* n : gm.graph().nodes()) out.push_back(n->name() + ": " + node_meta(n));
  return out;
}

/// The string array `key` of the golden file (a JSON object of string arrays).
std::vector<std::string> golden(const std::string& key) {
  std::ifstream in(std::string(FX_SOURCE_DIR) + "/tests/passes/goldens/shape_prop.json");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string s = ss.str();
  size_t pos = s.find("\"" + key + "\": [");
  if (pos == std::string::npos) return {};
  pos = s.find('[', pos) + 1;
  std::vector<std::string> out;
  while (true) {
    size_t q = s.find_first_of("\"]", pos);
    if (q == std::string::npos || s[q] == ']') break;
    std::string item;
    for (pos = q + 1; s[pos] != '"'; ++pos) item += s[pos] == '\\' ? s[++pos] : s[pos];
    out.push_back(item);
    ++pos;
  }
  return out;
}

std::shared_ptr<fx::GraphModule> make_gm(std::shared_ptr<fx::Graph> g,
                                         std::shared_ptr<torch::nn::Module> root = nullptr) {
  if (!root) root = std::make_shared<torch::nn::Module>();
  return std::make_shared<fx::GraphModule>(root, std::move(g));
}

at::Tensor cl(const at::Tensor& t) { return t.contiguous(at::MemoryFormat::ChannelsLast); }

// ---- the graphs of python/goldens/shape_prop_goldens.py --------------------------

struct Case {
  std::shared_ptr<fx::GraphModule> gm;
  std::vector<c10::IValue> inputs;
};

Case tuple_list() {
  auto g = std::make_shared<fx::Graph>();
  Node* x = g->placeholder("x");
  Node* mx = g->call_function("aten::max", {x, 1});
  Node* v = g->call_function("operator.getitem", {mx, 0});
  Node* i = g->call_function("operator.getitem", {mx, 1});
  Node* sp = g->call_function("aten::split.Tensor", {x, 2, 2});
  Node* s1 = g->call_function("operator.getitem", {sp, 1});
  Node* n = g->call_method("size", {x, 0});
  Node* r = g->call_function("aten::reshape", {v, Argument::list({n, -1})});
  g->output(Argument::tuple({r, i, s1, n}));
  return {make_gm(g), {at::randn({2, 3, 4})}};
}

Case views() {
  auto g = std::make_shared<fx::Graph>();
  Node* x = g->placeholder("x");
  Node* t = g->call_function("aten::t", {x});
  Node* sl = g->call_function("aten::slice.Tensor", {x, 1, 1, 5, 2});
  Node* u = g->call_function("aten::unsqueeze", {x, 0});
  Node* e = g->call_method("expand", {u, Argument::list({3, 4, 6})});
  Node* c = g->call_method("contiguous", {t});
  Node* a = g->call_function("aten::add", {t, t});
  Node* p = g->call_function("aten::permute", {e, Argument::list({2, 0, 1})});
  Node* cat = g->call_function("aten::cat", {Argument::list({sl, sl}), 1});
  g->output(Argument::tuple({t, sl, e, c, a, p, cat}));
  return {make_gm(g), {at::randn({4, 6})}};
}

Case channels_last() {
  auto root = std::make_shared<torch::nn::Module>();
  root->register_parameter("weight", at::randn({4, 3, 3, 3}));
  root->register_parameter("bias", at::randn({4}));
  root->register_buffer("running_mean", at::zeros({4}));
  root->register_buffer("running_var", at::ones({4}));
  auto g = std::make_shared<fx::Graph>();
  Node* x = g->placeholder("x");
  Node* w = g->get_attr("weight");
  Node* b = g->get_attr("bias");
  Node* rm = g->get_attr("running_mean");
  Node* rv = g->get_attr("running_var");
  Node* conv = g->call_function("aten::conv2d", {x, w, b, Argument::list({1, 1}), Argument::list({1, 1})});
  Node* bn = g->call_function("aten::batch_norm", {conv, nullptr, nullptr, rm, rv, false, 0.1, 1e-5, false});
  Node* r = g->call_function("aten::relu", {bn});
  Node* a = g->call_function("aten::add", {r, r});
  Node* pool = g->call_function("aten::adaptive_avg_pool2d", {a, Argument::list({1, 1})});
  Node* f = g->call_function("aten::flatten", {pool, 1});
  g->output(f);
  return {make_gm(g, root), {at::randn({2, 3, 8, 8}).contiguous(at::MemoryFormat::ChannelsLast)}};
}

Case mlp() {
  auto root = std::make_shared<torch::nn::Module>();
  root->register_parameter("weight", at::randn({4, 8}));
  root->register_parameter("bias", at::randn({4}));
  auto g = std::make_shared<fx::Graph>();
  Node* x = g->placeholder("x");
  Node* w = g->get_attr("weight");
  Node* b = g->get_attr("bias");
  Node* lin = g->call_function("aten::linear", {x, w, b});
  Node* sm = g->call_function("aten::softmax", {lin, 1});
  Node* top = g->call_function("aten::topk", {sm, 2});
  Node* idx = g->call_function("operator.getitem", {top, 1});
  Node* m = g->call_function("aten::mean", {sm});
  g->output(Argument::tuple({m, idx, top}));
  return {make_gm(g, root), {at::randn({5, 8})}};
}

const std::vector<std::pair<std::string, std::function<Case()>>>& golden_cases() {
  static const std::vector<std::pair<std::string, std::function<Case()>>> cases = {
      {"tuple_list", tuple_list}, {"views", views}, {"channels_last", channels_last}, {"mlp", mlp}};
  return cases;
}

// ---- differential against Python torch.fx ---------------------------------------------

TEST(ShapeProp, MatchesPythonTorchFx) {
  for (const auto& [name, build] : golden_cases()) {
    SCOPED_TRACE(name);
    const std::vector<std::string> expected = golden(name);
    ASSERT_FALSE(expected.empty()) << "no golden for " << name;
    Case c = build();
    const uint64_t version = c.gm->graph().version();
    fx::ShapeProp(c.gm).propagate(c.inputs);
    EXPECT_EQ(graph_lines(*c.gm), expected);
    EXPECT_EQ(c.gm->graph().version(), version);  // only meta changed: the graph is the same
    c.gm->graph().lint();
  }
}

// Meta mode gives what torch.fx gives on real data, computing nothing.
TEST(ShapeProp, MetaModeMatchesPythonTorchFx) {
  for (const auto& [name, build] : golden_cases()) {
    SCOPED_TRACE(name);
    Case c = build();
    fx::ShapeProp prop(c.gm);
    c10::IValue out = prop.propagate_meta(c.inputs);
    EXPECT_EQ(graph_lines(*c.gm), golden(name));
    EXPECT_TRUE(prop.fallback_nodes().empty());
    auto m = fx::tensor_meta_of(out);
    ASSERT_TRUE(m.has_value());
    // The result holds meta tensors only.
    std::function<void(const c10::IValue&)> all_meta = [&](const c10::IValue& v) {
      if (v.isTensor()) {
        EXPECT_TRUE(v.toTensor().is_meta());
      }
      if (v.isTuple())
        for (const auto& e : v.toTupleRef().elements()) all_meta(e);
    };
    all_meta(out);
  }
}

// In meta mode every value a node computes is a meta tensor: attributes
// included (their data is never read), inputs converted on entry.
TEST(ShapeProp, MetaModeValuesAreMetaTensors) {
  struct Spy : fx::ShapeProp {
    using fx::ShapeProp::ShapeProp;
    c10::IValue run_node(Node* n) override {
      c10::IValue v = fx::ShapeProp::run_node(n);
      if (v.isTensor()) seen.emplace_back(n->name(), v.toTensor().is_meta());
      return v;
    }
    std::vector<std::pair<std::string, bool>> seen;
  };
  Case c = channels_last();
  Spy spy(c.gm);
  spy.propagate_meta(c.inputs);
  ASSERT_EQ(spy.seen.size(), 12u);
  for (const auto& [name, is_meta] : spy.seen) EXPECT_TRUE(is_meta) << name;
  EXPECT_FALSE(c.inputs[0].toTensor().is_meta());  // the caller's tensor is untouched
  spy.seen.clear();
  spy.propagate(c.inputs);
  for (const auto& [name, is_meta] : spy.seen) EXPECT_FALSE(is_meta) << name;
}

TEST(ShapeProp, ReturnsTheGraphsResult) {
  Case c = mlp();
  at::Tensor x = c.inputs[0].toTensor();
  c10::IValue out = fx::ShapeProp(c.gm).propagate(c.inputs);
  at::Tensor expected = at::softmax(at::linear(x, c.gm->fetch_attr("weight"), c.gm->fetch_attr("bias")), 1).mean();
  EXPECT_TRUE(at::allclose(out.toTupleRef().elements()[0].toTensor(), expected));
}

// ---- non-tensor values, stale metadata, errors ----------------------------------------

TEST(ShapeProp, NonTensorValuesLeaveNoTensorMeta) {
  auto g = std::make_shared<fx::Graph>();
  Node* x = g->placeholder("x");
  Node* d = g->call_method("dim", {x});
  Node* n = g->call_method("size", {x});
  Node* none = g->call_function("operator.getitem", {Argument::list({nullptr, x}), 0});
  g->output(Argument::tuple({d, n, none}));
  auto gm = make_gm(g);
  d->meta()["tensor_meta"] = fx::TensorMetadata::from_tensor(at::zeros({1}));  // stale, from an earlier run
  fx::ShapeProp(gm).propagate({at::zeros({2, 3})});
  EXPECT_EQ(d->meta().count("tensor_meta"), 0u);  // better than torch.fx, which keeps the stale entry
  EXPECT_EQ(node_type(d), "int");
  EXPECT_EQ(n->meta().count("tensor_meta"), 0u);
  EXPECT_EQ(node_type(n), "list");
  EXPECT_EQ(none->meta().count("tensor_meta"), 0u);
  EXPECT_EQ(node_type(none), "NoneType");
  EXPECT_EQ(node_meta(g->output_node()), "none");
  EXPECT_EQ(node_type(g->output_node()), "tuple");
}

TEST(ShapeProp, FailureNamesTheNodeAndChangesNoMeta) {
  auto g = std::make_shared<fx::Graph>();
  Node* x = g->placeholder("x");
  Node* y = g->placeholder("y");
  Node* r = g->call_function("aten::relu", {x});
  Node* add = g->call_function("aten::add", {r, y});
  g->output(add);
  auto gm = make_gm(g);
  fx::ShapeProp prop(gm);
  prop.propagate({at::zeros({2, 3}), at::zeros({2, 3})});
  const std::vector<std::string> before = graph_metas(*gm);
  for (bool meta : {false, true}) {
    SCOPED_TRACE(meta ? "meta" : "real");
    try {
      if (meta) {
        prop.propagate_meta({at::zeros({2, 3}), at::zeros({2, 4})});
      } else {
        prop.propagate({at::zeros({2, 3}), at::zeros({2, 4})});
      }
      FAIL() << "expected fx::Error";
    } catch (const fx::Error& e) {
      const std::string node = "%add : [#users=1] = call_function[target=aten::add](args = (%relu, %y), kwargs = {})";
      const std::string tm23 = fx::TensorMetadata::from_tensor(at::zeros({2, 3})).str();
      EXPECT_EQ(std::string(e.what()),
                "ShapeProp error for: node=" + node + " with meta={'tensor_meta': " + tm23 +
                    ", 'type': <class 'torch.Tensor'>}\n"
                    "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1"
                    "\n\nWhile executing " + node);
    }
    // All or nothing: relu ran, but nothing was written (torch.fx would have).
    EXPECT_EQ(graph_metas(*gm), before);
  }
}

// ---- meta mode == real mode -------------------------------------------------------------

void expect_meta_equals_real(const std::shared_ptr<fx::GraphModule>& gm, const std::vector<c10::IValue>& inputs,
                             bool expect_no_fallback = true) {
  fx::ShapeProp real(gm);
  real.propagate(inputs);
  const std::vector<std::string> expected = graph_lines(*gm);
  fx::ShapeProp meta(gm);
  meta.propagate_meta(inputs);
  EXPECT_EQ(graph_lines(*gm), expected);
  if (expect_no_fallback) {
    std::string names;
    for (Node* n : meta.fallback_nodes()) names += n->name() + " ";
    EXPECT_TRUE(meta.fallback_nodes().empty()) << "fell back: " << names;
  }
}

TEST(ShapePropMeta, TracedCppModel) {
  torch::manual_seed(0);
  auto model = fx::examples::ResidualNet();
  at::Tensor x = at::randn({2, 3, 16, 16});
  auto gm = fx::symbolic_trace(model, {x});
  // symbolic_trace's tensor_meta is what ShapeProp finds on real data.
  std::vector<std::string> traced;
  for (Node* n : gm->graph().nodes())
    if (n->op() != fx::Opcode::Output) traced.push_back(n->name() + ": " + node_meta(n));
  fx::ShapeProp(gm).propagate({x});
  std::vector<std::string> propagated = graph_metas(*gm);
  propagated.pop_back();  // the output node (symbolic_trace sets none)
  EXPECT_EQ(propagated, traced);
  ASSERT_FALSE(gm->graph().find_nodes(fx::Opcode::CallModule).empty());
  expect_meta_equals_real(gm, {x});
  expect_meta_equals_real(gm, {x.contiguous(at::MemoryFormat::ChannelsLast)});
  model->train();
  expect_meta_equals_real(gm, {x});
}

/// The call_module and output lines of `gm` (what the model goldens hold).
std::vector<std::string> module_lines(const fx::GraphModule& gm) {
  std::vector<std::string> out;
  for (Node* n : gm.graph().nodes())
    if (n->op() == fx::Opcode::CallModule || n->op() == fx::Opcode::Output) out.push_back(node_line(n));
  return out;
}

// An imported torchvision model: meta == real on every node, nothing falls
// back, and the leaves' and output's tensor_meta are Python torch.fx's
// (ShapeProp on torch.fx.symbolic_trace of the same model), with a
// contiguous and a channels_last input.
void check_model(const std::string& name) {
  const std::string path = std::string(FX_BINARY_DIR) + "/models/" + name + ".pt";
  if (!std::ifstream(path)) GTEST_SKIP() << path << " missing (the ctest entry shape_prop_models exports it)";
  auto gm = fx::import_torchscript(path);
  at::Tensor x = at::randn({1, 3, 64, 64});
  for (bool channels_last : {false, true}) {
    SCOPED_TRACE(channels_last ? "channels_last" : "contiguous");
    at::Tensor in = channels_last ? cl(x) : x;
    const std::vector<std::string> expected = golden(name + (channels_last ? "_channels_last" : ""));
    ASSERT_FALSE(expected.empty());
    fx::ShapeProp(gm).propagate({in});
    EXPECT_EQ(module_lines(*gm), expected);
    expect_meta_equals_real(gm, {in});
    EXPECT_EQ(module_lines(*gm), expected);
  }
  size_t with_meta = 0;
  for (Node* n : gm->graph().nodes()) with_meta += n->meta().count("tensor_meta");
  EXPECT_GE(with_meta, gm->graph().nodes().size() - 2);  // all but a few int-valued nodes
}

TEST(ShapePropModels, Resnet18) { check_model("resnet18"); }
TEST(ShapePropModels, MobilenetV2) { check_model("mobilenet_v2"); }

// Every other exported torchvision model: meta == real on every node, with
// no fallback. alexnet, mobilenet_v3_small, squeezenet1_0 and fx_resnet18
// come with the same export fixtures; the rest are checked when present.
TEST(ShapePropModels, OtherModels) {
  const std::string dir = std::string(FX_BINARY_DIR) + "/models/";
  if (!std::ifstream(dir + "alexnet.pt")) GTEST_SKIP() << dir << "alexnet.pt missing";
  for (const std::string name : {"alexnet", "mobilenet_v3_small", "squeezenet1_0", "fx_resnet18", "densenet121",
                                 "efficientnet_b0", "shufflenet_v2_x1_0"}) {
    if (!std::ifstream(dir + name + ".pt")) continue;
    SCOPED_TRACE(name);
    expect_meta_equals_real(fx::import_torchscript(dir + name + ".pt"), {at::randn({1, 3, 64, 64})});
  }
}

// ---- fallback -----------------------------------------------------------------------------

TEST(ShapePropMeta, FallsBackWithoutMetaKernelAndUsesRealAttributes) {
  auto root = std::make_shared<torch::nn::Module>();
  root->register_buffer("repeats", at::tensor({1, 2, 3}, at::kLong));
  auto g = std::make_shared<fx::Graph>();
  Node* x = g->placeholder("x");
  Node* rep = g->get_attr("repeats");
  Node* pad = g->call_function("aten::reflection_pad2d", {x, Argument::list({1, 1, 2, 2})});
  Node* r = g->call_function("aten::relu", {pad});
  Node* v = g->call_function("aten::arange", {3});
  Node* ri = g->call_function("aten::repeat_interleave", {v, rep});  // shape depends on the repeats' values
  g->output(Argument::tuple({r, ri}));
  auto gm = make_gm(g, root);
  expect_meta_equals_real(gm, {at::randn({1, 2, 4, 4})}, false);
  fx::ShapeProp prop(gm);
  prop.propagate_meta({at::randn({1, 2, 4, 4})});
  EXPECT_EQ(prop.fallback_nodes(), (std::vector<Node*>{pad, ri}));
  EXPECT_EQ(std::any_cast<fx::TensorMetadata>(ri->meta().at("tensor_meta")).shape, std::vector<int64_t>{6});
  EXPECT_EQ(std::any_cast<fx::TensorMetadata>(pad->meta().at("tensor_meta")).shape,
            (std::vector<int64_t>{1, 2, 8, 6}));
}

// A leaf module whose forward reaches an operator without a Meta kernel
// falls back as a whole: its forward runs again on zeros.
TEST(ShapePropMeta, LeafModuleFallsBack) {
  auto root = std::make_shared<torch::nn::Module>();
  root->register_module("pad", torch::nn::ReflectionPad2d(torch::nn::ReflectionPad2dOptions({1, 2, 0, 1})));
  root->register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(2, 4, 3)));
  auto g = std::make_shared<fx::Graph>();
  Node* x = g->placeholder("x");
  Node* pad = g->call_module("pad", {x});
  Node* conv = g->call_module("conv", {pad});
  g->output(conv);
  auto gm = make_gm(g, root);
  expect_meta_equals_real(gm, {at::randn({1, 2, 5, 5})}, false);
  fx::ShapeProp prop(gm);
  prop.propagate_meta({at::randn({1, 2, 5, 5})});
  EXPECT_EQ(prop.fallback_nodes(), std::vector<Node*>{pad});
  EXPECT_EQ(node_meta(conv), fx::TensorMetadata::from_tensor(at::zeros({1, 4, 4, 6}), true).str());
}

// ---- the C++ shape functions against the CPU kernels ----------------------------------------

using OpFn = std::function<c10::IValue(const std::vector<at::Tensor>&)>;

void check_op(const std::string& what, const std::vector<at::Tensor>& inputs, const OpFn& f) {
  fx::register_meta_shape_functions();
  const std::string real = meta_str(fx::tensor_meta_of(f(inputs)));
  std::vector<at::Tensor> metas;
  for (const auto& t : inputs) metas.push_back(fx::to_meta_tensor(t));
  const c10::IValue out = f(metas);
  EXPECT_EQ(meta_str(fx::tensor_meta_of(out)), real) << what;
}

TEST(ShapePropMeta, ConvolutionMatchesCpu) {
  for (auto dtype : {at::kFloat, at::kDouble}) {
    for (int layout = 0; layout < 3; ++layout) {  // contiguous, channels_last input, channels_last weight
      auto opts = at::TensorOptions().dtype(dtype);
      auto in = [&](std::vector<int64_t> s) { auto t = at::randn(s, opts); return layout == 1 && s.size() == 4 ? cl(t) : t; };
      auto wt = [&](std::vector<int64_t> s) { auto t = at::randn(s, opts); return layout == 2 && s.size() == 4 ? cl(t) : t; };
      const std::string tag = std::string(c10::toString(dtype)) + " layout " + std::to_string(layout) + ": ";
      auto conv = [](std::vector<int64_t> st, std::vector<int64_t> pad, std::vector<int64_t> dil, int64_t groups) {
        return [=](const std::vector<at::Tensor>& t) -> c10::IValue {
          return at::convolution(t[0], t[1], t[2], st, pad, dil, false, {0}, groups);
        };
      };
      check_op(tag + "3x3", {in({2, 4, 9, 9}), wt({8, 4, 3, 3}), at::randn({8}, opts)}, conv({1, 1}, {1, 1}, {1, 1}, 1));
      check_op(tag + "strided", {in({1, 4, 9, 9}), wt({8, 4, 3, 3}), at::randn({8}, opts)}, conv({2, 2}, {0, 1}, {1, 1}, 1));
      check_op(tag + "dilated", {in({1, 4, 9, 9}), wt({8, 4, 3, 3}), at::randn({8}, opts)}, conv({1, 1}, {2, 2}, {2, 2}, 1));
      check_op(tag + "groups", {in({1, 4, 9, 9}), wt({8, 2, 3, 3}), at::randn({8}, opts)}, conv({1, 1}, {1, 1}, {1, 1}, 2));
      check_op(tag + "depthwise", {in({1, 4, 9, 9}), wt({4, 1, 3, 3}), at::randn({4}, opts)}, conv({1, 1}, {1, 1}, {1, 1}, 4));
      check_op(tag + "1x1", {in({1, 4, 5, 5}), wt({8, 4, 1, 1}), at::randn({8}, opts)}, conv({1, 1}, {0, 0}, {1, 1}, 1));
      check_op(tag + "transposed", {in({1, 4, 5, 5}), wt({4, 3, 3, 3}), at::randn({3}, opts)},
               [](const std::vector<at::Tensor>& t) -> c10::IValue {
                 return at::convolution(t[0], t[1], t[2], {2, 2}, {1, 1}, {1, 1}, true, {1, 1}, 1);
               });
      check_op(tag + "conv1d", {at::randn({2, 4, 9}, opts), at::randn({8, 4, 3}, opts)},
               [](const std::vector<at::Tensor>& t) -> c10::IValue { return at::conv1d(t[0], t[1], {}, 2, 1); });
      check_op(tag + "conv1d transposed input", {at::randn({2, 9, 4}, opts).transpose(1, 2), at::randn({8, 4, 3}, opts)},
               [](const std::vector<at::Tensor>& t) -> c10::IValue { return at::conv1d(t[0], t[1]); });
      check_op(tag + "conv3d", {at::randn({1, 2, 5, 5, 5}, opts), at::randn({4, 2, 3, 3, 3}, opts)},
               [](const std::vector<at::Tensor>& t) -> c10::IValue { return at::conv3d(t[0], t[1], {}, 1, 1); });
      check_op(tag + "conv_transpose1d", {at::randn({1, 4, 7}, opts), at::randn({4, 2, 3}, opts)},
               [](const std::vector<at::Tensor>& t) -> c10::IValue { return at::conv_transpose1d(t[0], t[1], {}, 2); });
    }
  }
}

TEST(ShapePropMeta, NormalizationMatchesCpu) {
  for (bool train : {false, true}) {
    for (int layout = 0; layout < 3; ++layout) {  // contiguous, channels_last, transposed
      at::Tensor x = at::randn({2, 3, 4, 5});
      if (layout == 1) x = cl(x);
      if (layout == 2) x = at::randn({2, 3, 5, 4}).transpose(2, 3);
      const std::string tag = std::string(train ? "train" : "eval") + " layout " + std::to_string(layout) + ": ";
      check_op(tag + "native_batch_norm", {x, at::randn({3}), at::randn({3}), at::zeros({3}), at::ones({3})},
               [train](const std::vector<at::Tensor>& t) -> c10::IValue {
                 return at::native_batch_norm(t[0], t[1], t[2], t[3], t[4], train, 0.1, 1e-5);
               });
      check_op(tag + "batch_norm no stats", {x}, [train](const std::vector<at::Tensor>& t) -> c10::IValue {
        return at::native_batch_norm(t[0], {}, {}, {}, {}, true, 0.1, 1e-5);
      });
      check_op(tag + "layer_norm", {x, at::randn({5})}, [](const std::vector<at::Tensor>& t) -> c10::IValue {
        return at::native_layer_norm(t[0], {5}, t[1], {}, 1e-5);
      });
      // aten::group_norm makes a non-CPU input contiguous before its kernel
      // (a channels_last input gives a contiguous result on meta, a
      // channels_last one on the CPU): a known difference, documented in
      // shape_prop.h.
      if (layout != 1)
        check_op(tag + "group_norm", {x}, [](const std::vector<at::Tensor>& t) -> c10::IValue {
          return at::group_norm(t[0], 3);
        });
      check_op(tag + "instance_norm", {x}, [train](const std::vector<at::Tensor>& t) -> c10::IValue {
        return at::instance_norm(t[0], {}, {}, {}, {}, true, 0.1, 1e-5, false);
      });
    }
  }
  check_op("batch_norm 2d", {at::randn({4, 3}), at::zeros({3}), at::ones({3})},
           [](const std::vector<at::Tensor>& t) -> c10::IValue {
             return at::batch_norm(t[0], {}, {}, t[1], t[2], false, 0.1, 1e-5, false);
           });
}

TEST(ShapePropMeta, PoolingActivationsEmbeddingMatchCpu) {
  for (int layout = 0; layout < 3; ++layout) {
    at::Tensor x = at::randn({2, 4, 9, 9});
    if (layout == 1) x = cl(x);
    if (layout == 2) x = at::randn({2, 4, 9, 18}).slice(3, 0, 18, 2);
    const std::string tag = "layout " + std::to_string(layout) + ": ";
    check_op(tag + "adaptive_avg_pool2d", {x}, [](const std::vector<at::Tensor>& t) -> c10::IValue {
      return at::adaptive_avg_pool2d(t[0], {3, 2});
    });
    check_op(tag + "adaptive_avg_pool2d 3-d", {x[0]}, [](const std::vector<at::Tensor>& t) -> c10::IValue {
      return at::adaptive_avg_pool2d(t[0], {4, 4});
    });
    check_op(tag + "hardtanh", {x}, [](const std::vector<at::Tensor>& t) -> c10::IValue { return at::hardtanh(t[0], 0, 6); });
    check_op(tag + "relu6", {x}, [](const std::vector<at::Tensor>& t) -> c10::IValue { return at::relu6(t[0]); });
    check_op(tag + "hardswish", {x}, [](const std::vector<at::Tensor>& t) -> c10::IValue { return at::hardswish(t[0]); });
    check_op(tag + "channel_shuffle", {x}, [](const std::vector<at::Tensor>& t) -> c10::IValue {
      return at::channel_shuffle(t[0], 2);
    });
  }
  check_op("adaptive_avg_pool3d", {at::randn({1, 2, 6, 6, 6})},
           [](const std::vector<at::Tensor>& t) -> c10::IValue { return at::adaptive_avg_pool3d(t[0], {2, 3, 1}); });
  check_op("embedding", {at::randn({10, 4}), at::tensor({1, 5, 2}, at::kLong)},
           [](const std::vector<at::Tensor>& t) -> c10::IValue { return at::embedding(t[0], t[1]); });
  check_op("index_select", {at::randn({3, 5}).t(), at::tensor({0, 2}, at::kLong)},
           [](const std::vector<at::Tensor>& t) -> c10::IValue { return at::index_select(t[0], 1, t[1]); });
}

// The backward operators make_fx records on meta values (convolution_backward,
// native_batch_norm_backward, ...): the CPU kernels' sizes, strides and layouts.
TEST(ShapePropMeta, BackwardOperatorsMatchCpu) {
  for (int layout = 0; layout < 3; ++layout) {  // contiguous, channels_last, only the conv weight channels_last
    auto in = [&](std::vector<int64_t> sz) { auto t = at::randn(sz); return layout == 1 ? cl(t) : t; };
    auto wt = [&](std::vector<int64_t> sz) { auto t = at::randn(sz); return layout >= 1 ? cl(t) : t; };
    const std::string tag = "layout " + std::to_string(layout) + ": ";
    check_op(tag + "convolution_backward", {in({2, 8, 7, 7}), in({2, 4, 9, 9}), wt({8, 4, 3, 3})},
             [](const std::vector<at::Tensor>& t) -> c10::IValue {
               auto [gi, gw, gb] = at::convolution_backward(t[0], t[1], t[2], std::vector<int64_t>{8}, {1, 1}, {0, 0},
                                                            {1, 1}, false, {0, 0}, 1, {true, true, true});
               return c10::ivalue::Tuple::create({gi, gw, gb});
             });
    // (A [4, 1, 3, 3] weight's stride of its size-1 dimension is arbitrary: made contiguous here.)
    check_op(tag + "depthwise convolution_backward", {in({1, 4, 9, 9}), in({1, 4, 9, 9}), at::randn({4, 1, 3, 3})},
             [](const std::vector<at::Tensor>& t) -> c10::IValue {
               auto [gi, gw, gb] = at::convolution_backward(t[0], t[1], t[2], c10::nullopt, {1, 1}, {1, 1}, {1, 1},
                                                            false, {0, 0}, 4, {true, true, false});
               return c10::ivalue::Tuple::create({gi, gw});
             });
    check_op(tag + "grouped convolution_backward", {in({1, 8, 9, 9}), in({1, 4, 9, 9}), wt({8, 2, 3, 3})},
             [](const std::vector<at::Tensor>& t) -> c10::IValue {
               auto [gi, gw, gb] = at::convolution_backward(t[0], t[1], t[2], std::vector<int64_t>{8}, {1, 1}, {1, 1},
                                                            {1, 1}, false, {0, 0}, 2, {true, true, true});
               return c10::ivalue::Tuple::create({gi, gw, gb});
             });
    check_op(tag + "native_batch_norm_backward", {in({2, 4, 5, 5}), in({2, 4, 5, 5}), at::rand({4}) + 0.5},
             [](const std::vector<at::Tensor>& t) -> c10::IValue {
               auto [y, mean, invstd] = at::native_batch_norm(t[1], t[2], {}, {}, {}, true, 0.1, 1e-5);
               auto [gi, gw, gb] = at::native_batch_norm_backward(t[0], t[1], t[2], {}, {}, mean, invstd, true, 1e-5,
                                                                 {true, true, true});
               return c10::ivalue::Tuple::create({gi, gw, gb});
             });
    check_op(tag + "_adaptive_avg_pool2d_backward", {in({2, 4, 1, 1}), in({2, 4, 5, 5})},
             [](const std::vector<at::Tensor>& t) -> c10::IValue { return at::_adaptive_avg_pool2d_backward(t[0], t[1]); });
    check_op(tag + "hardtanh_backward", {in({2, 4, 5, 5}), in({2, 4, 5, 5})},
             [](const std::vector<at::Tensor>& t) -> c10::IValue { return at::hardtanh_backward(t[0], t[1], 0, 6); });
    check_op(tag + "hardswish_backward", {in({2, 4, 5, 5}), in({2, 4, 5, 5})},
             [](const std::vector<at::Tensor>& t) -> c10::IValue { return at::hardswish_backward(t[0], t[1]); });
  }
}

TEST(ShapePropMeta, RegistersOnlyMissingKernels) {
  const auto& first = fx::register_meta_shape_functions();
  const auto& again = fx::register_meta_shape_functions();
  EXPECT_EQ(&first, &again);
  for (const char* op : {"aten::convolution", "aten::native_batch_norm", "aten::_adaptive_avg_pool2d"})
    EXPECT_NE(std::find(first.begin(), first.end(), op), first.end()) << op;
  // hardswish_ (in place) has a Meta kernel of its own: never replaced.
  EXPECT_EQ(std::find(first.begin(), first.end(), "aten::hardswish_"), first.end());
}

// ---- as a pass -----------------------------------------------------------------------------

TEST(ShapeProp, RunsAsAPass) {
  Case c = views();
  // (PassManager itself is built in another worktree: call the pass directly.)
  fx::ShapePropPass pass(c.inputs, /*meta=*/true);
  EXPECT_EQ(pass.name(), "ShapeProp");
  fx::PassResult r = pass.call(c.gm);
  EXPECT_FALSE(r.modified);
  EXPECT_EQ(r.graph_module, c.gm);
  EXPECT_EQ(graph_lines(*c.gm), golden("views"));
}

}  // namespace
