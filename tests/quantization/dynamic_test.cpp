// fx::quantization::quantize_dynamic: linear layers → libtorch's
// quantized::linear_dynamic. Differential against Python 1.13's
// torch.ao.quantization.quantize_dynamic (python/goldens/dynamic_goldens.py;
// tests/quantization/dynamic.cmake exports the traced models first, the plain
// test program skips those tests when the files are missing), and the
// behaviour of the result: report, printing, Interpreter, fx::save, errors.
#include "fx_paths.h"
#include "../serialize/serialize_test_util.h"

#include <fx/error.h>
#include <fx/export.h>
#include <fx/import.h>
#include <fx/interpreter.h>
#include <fx/module_attributes.h>
#include <fx/quantization/quantize_dynamic.h>
#include <fx/serialize.h>
#include <fx/tensor_file.h>
#include <fx/trace.h>
#include <torch/nn/modules/transformercoder.h>

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>
#include <torch/script.h>

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <optional>
#include <set>

namespace {

using namespace fx::quantization;

const std::string kDir = std::string(FX_BINARY_DIR) + "/models/dyn/";

/// torch.nn layers are leaves, the containers and the transformer blocks are
/// inlined (so that attention and feed-forward are graph nodes).
bool leaf(const torch::jit::Module& m, const std::string& type, const std::string& name) {
  static const std::set<std::string> inlined{"__torch__.torch.nn.modules.transformer.TransformerEncoder",
                                             "__torch__.torch.nn.modules.transformer.TransformerEncoderLayer",
                                             "__torch__.torch.nn.modules.activation.MultiheadAttention"};
  return !inlined.count(type) && fx::is_torch_nn_leaf(m, type, name);
}

std::shared_ptr<fx::GraphModule> import_model(const std::string& name) {
  fx::ImportOptions o;
  o.is_leaf_module = leaf;
  auto gm = fx::import_torchscript(kDir + name + ".dyn.pt", o);
  gm->eval();
  return gm;
}

size_t count_target(const fx::GraphModule& gm, const std::string& target) {
  size_t n = 0;
  for (const fx::Node* node : gm.graph().nodes()) n += node->target() == target;
  return n;
}

double rel(const at::Tensor& a, const at::Tensor& b) { return ((a - b).norm() / b.norm()).item<double>(); }

std::vector<std::string> quantized_nodes(const DynamicQuantReport& r) {
  std::vector<std::string> out;
  for (const auto& n : r.nodes)
    if (n.quantized) out.push_back(n.node);
  return out;
}

struct Goldens {
  at::Tensor x, y_float, y_dynamic;
};

std::optional<Goldens> goldens(const std::string& name) {
  if (!std::ifstream(kDir + name + ".io.pt")) return std::nullopt;
  auto t = fx::load_value(kDir + name + ".io.pt").toTupleRef().elements();
  return Goldens{t[0].toTensor(), t[1].toTensor(), t[2].toTensor()};
}

at::Tensor run(fx::GraphModule& gm, const at::Tensor& x) {
  at::NoGradGuard no_grad;
  return gm.forward({x}).toTensor();
}

// Python quantizes the modules only: linear1 / linear2 of both layers and the
// head (attention's in_proj / out_proj are tensors read by
// F.multi_head_attention_forward). functional = false makes the same choice,
// and the same libtorch kernel on the same int8 weights gives Python's output
// to float rounding.
TEST(QuantizeDynamicPython, EncoderMatchesPython) {
  auto g = goldens("encoder");
  if (!g) GTEST_SKIP() << kDir << "encoder.io.pt is missing (dynamic_goldens.py --export)";
  auto gm = import_model("encoder");
  EXPECT_LT((run(*gm, g->x) - g->y_float).abs().max().item<double>(), 1e-5);
  DynamicQuantOptions o;
  o.functional = false;
  DynamicQuantReport r;
  auto q = quantize_dynamic(gm, o, &r);
  EXPECT_EQ(quantized_nodes(r), (std::vector<std::string>{"encoder_layers_0_linear1", "encoder_layers_0_linear2",
                                                          "encoder_layers_1_linear1", "encoder_layers_1_linear2",
                                                          "head"}));
  EXPECT_EQ(r.quantized_layers, 5u);
  EXPECT_EQ(count_target(*q, "quantized::linear_dynamic"), 5u);
  EXPECT_EQ(count_target(*q, "aten::linear"), 4u);  // in_proj, out_proj of both layers stay float
  for (const auto& n : r.nodes) {
    if (n.node == "linear_1") {
      EXPECT_EQ(n.reason, "aten::linear: options.functional is false");
    }
  }
  const at::Tensor y = run(*q, g->x);
  const double vs_python = (y - g->y_dynamic).abs().max().item<double>();
  const double vs_float = rel(y, g->y_float);
  std::cout << "encoder: |fxcpp int8 - python int8| max " << vs_python << ", int8 vs fp32 relative error "
            << vs_float << " (python: " << rel(g->y_dynamic, g->y_float) << ")\n";
  EXPECT_LT(vs_python, 1e-5);  // 0 on the machines measured: the same kernels on the same int8 weights
  EXPECT_LT(vs_float, 0.02);
  // The input module is unchanged: float, and its Linear modules still there.
  EXPECT_EQ(count_target(*gm, "quantized::linear_dynamic"), 0u);
  EXPECT_TRUE(at::allclose(run(*gm, g->x), g->y_float, 1e-5, 1e-5));
  EXPECT_NO_THROW(gm->get_submodule("encoder.layers.0.linear1"));
  EXPECT_THROW(q->get_submodule("encoder.layers.0.linear1"), fx::Error);
}

// By default the attention projections (aten::linear on get_attr weights) are
// int8 too: 9 layers, still within 2% of float.
TEST(QuantizeDynamicPython, EncoderWithAttentionProjections) {
  auto g = goldens("encoder");
  if (!g) GTEST_SKIP() << kDir << "encoder.io.pt is missing (dynamic_goldens.py --export)";
  auto gm = import_model("encoder");
  DynamicQuantReport r;
  auto q = quantize_dynamic(gm, {}, &r);
  EXPECT_EQ(r.quantized_layers, 9u);
  EXPECT_EQ(count_target(*q, "aten::linear"), 0u);
  // The float in_proj / out_proj weights are no longer read, nor held.
  EXPECT_THROW(q->fetch_attr("encoder.layers.0.self_attn.in_proj_weight"), fx::Error);
  const at::Tensor y = run(*q, g->x);
  std::cout << "encoder, 9 layers int8: relative error vs fp32 " << rel(y, g->y_float) << "\n";
  EXPECT_LT(rel(y, g->y_float), 0.02);
  // Skipping them by weight name gives Python's choice again.
  DynamicQuantOptions o;
  o.skip = {"encoder.layers.0.self_attn", "encoder.layers.1.self_attn"};
  DynamicQuantReport r2;
  auto q2 = quantize_dynamic(gm, o, &r2);
  EXPECT_EQ(r2.quantized_layers, 5u);
  EXPECT_LT((run(*q2, g->x) - g->y_dynamic).abs().max().item<double>(), 1e-5);
}

TEST(QuantizeDynamicPython, MlpMatchesPython) {
  auto g = goldens("mlp");
  if (!g) GTEST_SKIP() << kDir << "mlp.io.pt is missing (dynamic_goldens.py --export)";
  auto gm = import_model("mlp");
  DynamicQuantReport r;
  auto q = quantize_dynamic(gm, {}, &r);
  EXPECT_EQ(quantized_nodes(r), (std::vector<std::string>{"_0", "_2", "_4"}));
  const at::Tensor y = run(*q, g->x);
  std::cout << "mlp: |fxcpp int8 - python int8| max " << (y - g->y_dynamic).abs().max().item<double>()
            << ", int8 vs fp32 relative error " << rel(y, g->y_float) << "\n";
  EXPECT_LT((y - g->y_dynamic).abs().max().item<double>(), 1e-5);
  EXPECT_LT(rel(y, g->y_float), 0.02);
}

// ---- without Python: a C++ MLP ----------------------------------------------

/// x → fc1 (Linear) → relu → fc2 (Linear) → aten::linear(·, proj_weight, proj_bias) → output, eval mode.
std::shared_ptr<fx::GraphModule> mlp() {
  namespace nn = torch::nn;
  torch::manual_seed(3);
  auto root = std::make_shared<nn::Module>();
  root->register_module("fc1", nn::Linear(16, 32).ptr());
  root->register_module("fc2", nn::Linear(32, 32).ptr());
  root->register_parameter("proj_weight", torch::randn({8, 32}) * 0.2);
  root->register_parameter("proj_bias", torch::randn({8}) * 0.1);
  root->eval();
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* h = g->call_function("aten::relu", {g->call_module("fc1", {x})});
  fx::Node* f2 = g->call_module("fc2", {h});
  g->output(g->call_function("aten::linear", {f2, g->get_attr("proj_weight"), g->get_attr("proj_bias")}));
  auto gm = std::make_shared<fx::GraphModule>(root, g);
  gm->eval();
  return gm;
}

at::Tensor mlp_input() {
  torch::manual_seed(11);
  return torch::randn({4, 16});
}

TEST(QuantizeDynamic, QuantizesModulesAndFunctionalLinear) {
  auto gm = mlp();
  const std::string before = gm->code();
  DynamicQuantReport r;
  auto q = quantize_dynamic(gm, {}, &r);
  EXPECT_EQ(r.str(),
            "fc1  fc1  quantized  Linear(16 → 32): weight qint8 torch.per_tensor_symmetric, activations quint8 per "
            "call (reduce_range)\n"
            "relu  aten::relu  float  not a linear layer\n"
            "fc2  fc2  quantized  Linear(32 → 32): weight qint8 torch.per_tensor_symmetric, activations quint8 per "
            "call (reduce_range)\n"
            "linear  aten::linear  quantized  aten::linear(32 → 8): weight qint8 torch.per_tensor_symmetric, "
            "activations quint8 per call (reduce_range)\n");
  // Node names kept; the input untouched.
  std::vector<std::string> names;
  for (const fx::Node* n : q->graph().nodes()) names.push_back(n->name());
  EXPECT_EQ(names, (std::vector<std::string>{"x", "fc1", "relu", "fc2", "linear", "output"}));
  EXPECT_EQ(gm->code(), before);
  // Each layer computes what libtorch's kernel gives on the per-tensor int8 weight.
  const at::Tensor x = mlp_input();
  at::Tensor expected;
  {
    at::NoGradGuard no_grad;
    auto layer = [](const at::Tensor& in, const at::Tensor& w, const at::Tensor& b) {
      const double scale = std::max(w.abs().max().item<double>() / 127.5, double(std::numeric_limits<float>::epsilon()));
      at::Tensor qw = at::quantize_per_tensor(w, scale, 0, c10::kQInt8);
      return at::linear(in, qw.dequantize(), b);
    };
    auto fc1 = gm->get_submodule("fc1")->as<torch::nn::Linear>();
    auto fc2 = gm->get_submodule("fc2")->as<torch::nn::Linear>();
    expected = layer(at::relu(layer(x, fc1->weight, fc1->bias)), fc2->weight, fc2->bias);
    expected = layer(expected, gm->fetch_attr("proj_weight"), gm->fetch_attr("proj_bias"));
  }
  const at::Tensor y = run(*q, x);
  // Activations quantized to 7 bits per call: close to the float-activation result, not equal.
  EXPECT_LT(rel(y, expected), 0.03);
  EXPECT_LT(rel(y, run(*gm, x)), 0.03);
  EXPECT_GT((y - run(*gm, x)).abs().max().item<double>(), 0.0);
}

TEST(QuantizeDynamic, PrintReadableShowsTheQuantizedNodes) {
  auto q = quantize_dynamic(mlp());
  const std::string code = q->print_readable();
  EXPECT_NE(code.find("fc1 = torch.ops.quantized.linear_dynamic(x, DynamicQuantizedLinear(in_features=16, "
                      "out_features=32, dtype=torch.qint8, qscheme=torch.per_tensor_affine), True)"),
            std::string::npos)
      << code;
  EXPECT_NE(code.find("linear = torch.ops.quantized.linear_dynamic(fc2, DynamicQuantizedLinear(in_features=32, "
                      "out_features=8, dtype=torch.qint8, qscheme=torch.per_tensor_affine), True)"),
            std::string::npos)
      << code;
  EXPECT_EQ(code.find("proj_weight"), std::string::npos) << code;
  // Per channel: the packed weight says so.
  DynamicQuantOptions o;
  o.per_channel = true;
  const std::string pc = quantize_dynamic(mlp(), o)->code();
  EXPECT_NE(pc.find("qscheme=torch.per_channel_affine"), std::string::npos) << pc;
}

TEST(QuantizeDynamic, RunsUnderTheInterpreter) {
  auto q = quantize_dynamic(mlp());
  const at::Tensor x = mlp_input();
  at::NoGradGuard no_grad;
  const at::Tensor a = fx::Interpreter(q).run({x}).toTensor();
  EXPECT_TRUE(at::equal(a, q->forward({x}).toTensor()));
  // Another batch: activation scales are per call.
  const at::Tensor x2 = mlp_input() * 10;
  EXPECT_TRUE(at::equal(fx::Interpreter(q).run({x2}).toTensor(), q->forward({x2}).toTensor()));
  EXPECT_LT(rel(q->forward({x2}).toTensor(), mlp()->forward({x2}).toTensor()), 0.03);
}

TEST(QuantizeDynamic, PerChannelWeights) {
  DynamicQuantOptions o;
  o.per_channel = true;
  DynamicQuantReport r;
  auto gm = mlp();
  auto q = quantize_dynamic(gm, o, &r);
  EXPECT_NE(r.nodes[0].reason.find("torch.per_channel_symmetric"), std::string::npos);
  const at::Tensor x = mlp_input();
  EXPECT_LT(rel(run(*q, x), run(*gm, x)), 0.03);
}

TEST(QuantizeDynamic, NamesAndSkip) {
  auto gm = mlp();
  DynamicQuantOptions o;
  o.names = {"fc2", "proj_weight"};
  o.skip = {"linear"};
  DynamicQuantReport r;
  auto q = quantize_dynamic(gm, o, &r);
  EXPECT_EQ(quantized_nodes(r), std::vector<std::string>{"fc2"});
  EXPECT_EQ(r.nodes[0].reason, "Linear: not in options.names");
  EXPECT_EQ(r.nodes[3].reason, "aten::linear: in options.skip");
  EXPECT_EQ(count_target(*q, "aten::linear"), 1u);
  // A float layer keeps its module, shared with the input.
  EXPECT_EQ(q->get_submodule("fc1").get(), gm->get_submodule("fc1").get());
  o = {};
  o.module_types = {};
  EXPECT_EQ(quantized_nodes([&] {
              DynamicQuantReport r2;
              quantize_dynamic(gm, o, &r2);
              return r2;
            }()),
            std::vector<std::string>{"linear"});
}

// A C++ torch::nn::TransformerEncoder traced by fx::symbolic_trace: out_proj,
// linear1 and linear2 are Linear modules; the input projection of libtorch's C++
// MultiheadAttention is matmul(x, in_proj_weight.t()) + in_proj_bias, quantized
// as one layer (the bias add computed by the kernel).
TEST(QuantizeDynamic, TracedCppTransformerEncoder) {
  torch::manual_seed(5);
  auto net = torch::nn::TransformerEncoder(torch::nn::TransformerEncoderOptions(
      torch::nn::TransformerEncoderLayerOptions(32, 4).dim_feedforward(64).dropout(0.0), 2));
  net->eval();
  const at::Tensor x = torch::randn({8, 2, 32});
  auto gm = fx::symbolic_trace(net, {x});
  gm->eval();
  DynamicQuantReport r;
  auto q = quantize_dynamic(gm, {}, &r);
  EXPECT_EQ(r.quantized_layers, 8u);
  for (const auto& n : r.nodes) {
    if (n.node == "matmul") {
      EXPECT_EQ(n.reason,
                "aten::matmul(x, W.t()) + b (32 → 96): weight qint8 torch.per_tensor_symmetric, activations quint8 "
                "per call (reduce_range)");
    }
    if (n.node == "add_") {
      EXPECT_TRUE(n.quantized);
      EXPECT_EQ(n.reason, "bias of matmul");
    }
  }
  EXPECT_EQ(count_target(*q, "quantized::linear_dynamic"), 8u);
  EXPECT_EQ(count_target(*q, "aten::t"), 0u);
  EXPECT_EQ(count_target(*q, "aten::matmul"), count_target(*gm, "aten::matmul") - 2);
  at::Tensor eager;
  {
    at::NoGradGuard no_grad;
    eager = net->forward(x);
  }
  EXPECT_LT(rel(run(*gm, x), eager), 1e-5);
  const double err = rel(run(*q, x), eager);
  std::cout << "traced C++ encoder, 8 layers int8: relative error vs eager fp32 " << err << "\n";
  EXPECT_LT(err, 0.02);
  EXPECT_GT(err, 0.0);
}

TEST(QuantizeDynamic, SaveLoadRoundTrip) {
  for (bool per_channel : {false, true}) {
    DynamicQuantOptions o;
    o.per_channel = per_channel;
    auto q = quantize_dynamic(mlp(), o);
    const std::string bytes = fx::save_to_string(*q);
    auto loaded = fx::load_from_string(bytes);
    EXPECT_EQ(loaded->code(), q->code());
    EXPECT_EQ(count_target(*loaded, "quantized::linear_dynamic"), 3u);
    const at::Tensor x = mlp_input();
    EXPECT_TRUE(at::equal(run(*loaded, x), run(*q, x))) << "per_channel " << per_channel;
    // The same bytes again: the packed layers are saved as what they are made of.
    EXPECT_EQ(fx::save_to_string(*loaded), bytes);
  }
}

/// The "dynamic_linear" constants of a document, in node order.
std::vector<nlohmann::json*> dynamic_linear_constants(nlohmann::json& j) {
  std::vector<nlohmann::json*> out;
  if (j.is_object()) {
    if (j.size() == 1 && j.contains("dynamic_linear")) out.push_back(&j["dynamic_linear"]);
    for (auto& [k, v] : j.items()) {
      (void)k;
      for (auto* p : dynamic_linear_constants(v)) out.push_back(p);
    }
  } else if (j.is_array()) {
    for (auto& v : j)
      for (auto* p : dynamic_linear_constants(v)) out.push_back(p);
  }
  return out;
}

TEST(QuantizeDynamic, LoadRefusesBadPackedLayers) {
  const std::string good = fx::save_to_string(*quantize_dynamic(mlp()));
  const nlohmann::json doc = fx::serialize_test::document_of(good);
  auto error_with = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json d = doc;
    auto layers = dynamic_linear_constants(d);
    EXPECT_EQ(layers.size(), 3u);
    edit(*layers.at(0));
    return fx_test::error_of(
        [&] { fx::load_from_string(fx::serialize_test::with_document(good, d.dump()), "dyn.fx"); });
  };
  EXPECT_NO_THROW(fx::load_from_string(good, "dyn.fx"));
  EXPECT_EQ(error_with([](nlohmann::json& p) { p["axis"] = 1; }),
            "dyn.fx: node 'fc1': dynamic linear layer: unknown attribute 'axis'");
  EXPECT_EQ(error_with([](nlohmann::json& p) { p.erase("scales"); }),
            "dyn.fx: node 'fc1': dynamic linear layer: missing key 'scales'");
  EXPECT_EQ(error_with([](nlohmann::json& p) { p["weight"] = p["bias"]; }),
            "dyn.fx: node 'fc1': dynamic linear layer: weight must be a 2-d int8 tensor, got CPUFloatType of 1 "
            "dimensions");
  EXPECT_EQ(error_with([](nlohmann::json& p) { p["scales"] = p["zero_points"]; }),
            "dyn.fx: node 'fc1': dynamic linear layer: scales must be a float64 tensor of 1 elements");
  EXPECT_EQ(error_with([](nlohmann::json& p) { p["per_channel"] = true; }),
            "dyn.fx: node 'fc1': dynamic linear layer: scales must be a float64 tensor of 32 elements");
}

// fx::to_torchscript keeps libtorch's op and its packed weights (a TorchScript
// constant; torch.jit.load in Python runs the file too): same output, before
// and after torch::jit::save / load.
TEST(QuantizeDynamic, ExportsToTorchScript) {
  auto q = quantize_dynamic(mlp());
  const at::Tensor x = mlp_input();
  torch::jit::Module m = fx::to_torchscript(*q);
  at::NoGradGuard no_grad;
  EXPECT_TRUE(at::equal(m.forward({x}).toTensor(), run(*q, x)));
  std::stringstream file;
  m.save(file);
  torch::jit::Module loaded = torch::jit::load(file);
  EXPECT_TRUE(at::equal(loaded.forward({x}).toTensor(), run(*q, x)));
}

// The encoder, saved and loaded, still gives Python's output.
TEST(QuantizeDynamicPython, EncoderSaveLoad) {
  auto g = goldens("encoder");
  if (!g) GTEST_SKIP() << kDir << "encoder.io.pt is missing (dynamic_goldens.py --export)";
  DynamicQuantOptions o;
  o.functional = false;
  auto loaded = fx::load_from_string(fx::save_to_string(*quantize_dynamic(import_model("encoder"), o)));
  EXPECT_LT((run(*loaded, g->x) - g->y_dynamic).abs().max().item<double>(), 1e-5);
}

TEST(QuantizeDynamic, Errors) {
  auto gm = mlp();
  gm->get_submodule("fc2")->train();
  const std::string before = gm->code();
  try {
    quantize_dynamic(gm);
    FAIL();
  } catch (const fx::Error& e) {
    EXPECT_STREQ(e.what(), "quantize_dynamic: module 'fc2' is in training mode; call eval() first");
  }
  EXPECT_EQ(gm->code(), before);
  EXPECT_TRUE(gm->get_submodule("fc2")->is_training());
  DynamicQuantOptions o;
  o.module_types = {"Conv2d"};
  try {
    quantize_dynamic(mlp(), o);
    FAIL();
  } catch (const fx::Error& e) {
    EXPECT_STREQ(e.what(),
                 "quantize_dynamic: module type 'Conv2d' cannot be quantized dynamically (only Linear and "
                 "NonDynamicallyQuantizableLinear)");
  }
  EXPECT_THROW(describe_packed_linear_params(c10::IValue(3)), fx::Error);
}

TEST(QuantizeDynamic, KeepsTheEngine) {
  const at::QEngine before = at::globalContext().qEngine();
  auto q = quantize_dynamic(mlp());
  EXPECT_EQ(at::globalContext().qEngine(), before);
  // The packed weights run whatever the engine.
  const auto& engines = at::globalContext().supportedQEngines();
  if (std::find(engines.begin(), engines.end(), at::QEngine::QNNPACK) != engines.end()) {
    at::globalContext().setQEngine(at::QEngine::QNNPACK);
    EXPECT_LT(rel(run(*q, mlp_input()), run(*mlp(), mlp_input())), 0.03);
    at::globalContext().setQEngine(before);
  }
}

}  // namespace
