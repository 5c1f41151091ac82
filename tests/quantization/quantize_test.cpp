// fuse / prepare / convert on a small network built as a graph: structure,
// values, the reference graph's pattern, reports, save round trip, errors.
#include "quant_test_util.h"

#include "../common/error_of.h"

#include <fx/error.h>
#include <fx/quantization/convert.h>
#include <fx/quantization/fuse.h>
#include <fx/quantization/prepare.h>
#include <fx/interpreter.h>
#include <fx/serialize.h>

#include <gtest/gtest.h>

namespace {

using namespace fx::quantization;

std::string structure(const fx::GraphModule& gm) {
  std::string s;
  for (const fx::Node* n : gm.graph().nodes()) s += n->name() + " " + n->target() + "\n";
  return s;
}

using fx_test::error_of;

std::shared_ptr<fx::GraphModule> calibrated(const QConfigMapping& mapping, PrepareReport* report = nullptr) {
  auto gm = quant_test::small_net();
  auto prepared = prepare(gm, mapping, {quant_test::small_input(1)}, report);
  for (int i = 0; i < 3; ++i) prepared->forward({quant_test::small_input(10 + i)});
  return prepared;
}

TEST(Fuse, ConvBnReluAndLinear) {
  auto gm = quant_test::small_net();
  const std::string before = structure(*gm);
  const at::Tensor w1 = gm->get_submodule("conv1")->named_parameters()["weight"].clone();
  FuseReport report;
  auto fused = fuse(gm, &report);
  EXPECT_EQ(structure(*gm), before);  // the input is untouched
  EXPECT_TRUE(at::equal(gm->get_submodule("conv1")->named_parameters()["weight"], w1));
  EXPECT_EQ(structure(*fused),
            "x x\nconv1 conv1\npool aten::max_pool2d\nconv2 conv2\nadd aten::add\nrelu2 relu2\nflatten aten::flatten\n"
            "fc fc\noutput output\n");
  ASSERT_EQ(report.fused.size(), 3u);
  EXPECT_EQ(report.fused[0], "conv1: Conv2d + BatchNorm2d + ReLU -> ConvReLU2d");
  EXPECT_EQ(report.fused[1], "conv2: Conv2d + BatchNorm2d -> Conv2d");
  EXPECT_EQ(report.fused[2], "fc: Linear + ReLU -> LinearReLU");
  auto* conv1 = dynamic_cast<FusedModule*>(fused->get_submodule("conv1").get());
  ASSERT_NE(conv1, nullptr);
  EXPECT_EQ(conv1->type(), "ConvReLU2d");
  // fuse_conv_bn_weights, as Python computes it in float32.
  auto bn = gm->get_submodule("bn1");
  at::Tensor rsq = at::rsqrt(bn->named_buffers()["running_var"] + 1e-5);
  at::Tensor expected = w1 * (bn->named_parameters()["weight"] * rsq).reshape({-1, 1, 1, 1});
  EXPECT_TRUE(at::equal(conv1->first()->named_parameters()["weight"], expected));
  at::Tensor x = quant_test::small_input(3);
  EXPECT_TRUE(at::allclose(fused->forward(x), gm->forward(x), 1e-5, 1e-5));
}

TEST(Prepare, ObserverPlacementAndSharing) {
  PrepareReport report;
  auto prepared = calibrated(get_default_qconfig_mapping("onednn"), &report);
  EXPECT_EQ(structure(*prepared),
            "x x\nactivation_post_process_0 activation_post_process_0\nconv1 conv1\n"
            "activation_post_process_1 activation_post_process_1\npool aten::max_pool2d\n"
            "activation_post_process_2 activation_post_process_2\nconv2 conv2\n"
            "activation_post_process_3 activation_post_process_3\nadd aten::add\nrelu2 relu2\n"
            "activation_post_process_4 activation_post_process_4\nflatten aten::flatten\n"
            "activation_post_process_5 activation_post_process_5\nfc fc\n"
            "activation_post_process_6 activation_post_process_6\noutput output\n");
  // pool and flatten keep their input's scale: the same observer module.
  EXPECT_EQ(prepared->get_submodule("activation_post_process_2"), prepared->get_submodule("activation_post_process_1"));
  EXPECT_EQ(prepared->get_submodule("activation_post_process_5"), prepared->get_submodule("activation_post_process_4"));
  EXPECT_NE(prepared->get_submodule("activation_post_process_3"), prepared->get_submodule("activation_post_process_1"));
  EXPECT_EQ(report.observer_nodes, 7u);
  EXPECT_EQ(report.observer_modules, 5u);
  EXPECT_EQ(report.fuse.fused.size(), 3u);
  EXPECT_NE(report.str().find("add  aten::add  quantized  aten::add + ReLU"), std::string::npos) << report.str();
  EXPECT_NE(report.str().find("pool  aten::max_pool2d  quantized  shares its input's observer (aten::max_pool2d)"), std::string::npos);
}

TEST(Prepare, FloatNodesAndIntegers) {
  // qconfig None for fc, an op without a pattern (aten::exp) and integer values.
  namespace nn = torch::nn;
  auto root = std::make_shared<nn::Module>();
  root->register_module("fc", nn::Linear(6, 6).ptr());
  root->register_module("fc2", nn::Linear(6, 3).ptr());
  root->eval();
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* size = g->call_function("aten::size.int", {x, 0});
  fx::Node* view = g->call_function("aten::view", {x, fx::Argument::list({size, -1})});
  fx::Node* fc = g->call_module("fc", {view});
  fx::Node* e = g->call_function("aten::exp", {fc});
  fx::Node* fc2 = g->call_module("fc2", {e});
  g->output(fc2);
  auto gm = std::make_shared<fx::GraphModule>(root, g);
  QConfigMapping m = get_default_qconfig_mapping("onednn");
  m.set_module_name("fc", nullptr);
  PrepareReport report;
  auto prepared = prepare(gm, m, {at::randn({2, 3, 2})}, &report);
  EXPECT_EQ(structure(*prepared),
            "x x\nactivation_post_process_0 activation_post_process_0\nsize aten::size.int\nview aten::view\n"
            "activation_post_process_1 activation_post_process_1\nfc fc\nexp aten::exp\n"
            "activation_post_process_2 activation_post_process_2\nfc2 fc2\n"
            "activation_post_process_3 activation_post_process_3\noutput output\n");
  // view keeps its input's scale: its output observer is x's.
  EXPECT_EQ(prepared->get_submodule("activation_post_process_1"), prepared->get_submodule("activation_post_process_0"));
  const std::string r = report.str();
  EXPECT_NE(r.find("size  aten::size.int  float  output is not a floating-point tensor"), std::string::npos) << r;
  EXPECT_NE(r.find("fc  fc  float  qconfig is None"), std::string::npos) << r;
  EXPECT_NE(r.find("exp  aten::exp  float  no quantization pattern for aten::exp"), std::string::npos) << r;
  EXPECT_NE(r.find("fc2  fc2  quantized  Linear"), std::string::npos) << r;
  EXPECT_NE(r.find("view  aten::view  quantized  shares its input's observer (aten::view)"), std::string::npos) << r;
}

TEST(Convert, ReferenceGraph) {
  auto prepared = calibrated(get_default_qconfig_mapping("onednn"));
  const std::string before = structure(*prepared);
  ConvertReport report;
  auto ref = convert(prepared, &report);
  EXPECT_EQ(structure(*prepared), before);
  EXPECT_EQ(report.quantized_weights, 3u);
  EXPECT_EQ(report.activation_quantize_nodes, 7u);
  // dq → conv → q: the pattern a lowering pass matches.
  fx::Node* conv = nullptr;
  for (fx::Node* n : ref->graph().nodes())
    if (n->name() == "conv1") conv = n;
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->target(), "aten::conv2d");
  fx::Node* dqx = conv->args()[0].to_node();
  EXPECT_EQ(dqx->target(), "dequantize");
  EXPECT_EQ(dqx->args()[0].to_node()->target(), "aten::quantize_per_tensor.tensor_qparams");
  fx::Node* dqw = conv->args()[1].to_node();
  EXPECT_EQ(dqw->target(), "dequantize");
  EXPECT_EQ(dqw->args()[0].to_node()->target(), "aten::quantize_per_channel");
  EXPECT_EQ(conv->args()[2].to_node()->target(), "conv1.bias");
  fx::Node* relu = *conv->users().begin();
  EXPECT_EQ(relu->target(), "aten::relu");
  EXPECT_EQ((*relu->users().begin())->target(), "aten::quantize_per_tensor.tensor_qparams");
  EXPECT_EQ(ref->fetch_attr("conv1.weight_scale").numel(), 4);
  EXPECT_EQ(ref->fetch_attr("x_scale_0").dim(), 0);
  EXPECT_NE(report.str().find("conv1  conv1  quantized  ConvReLU2d: weight qint8 torch.per_channel_symmetric"),
            std::string::npos)
      << report.str();
  // Runs, close to float (a few quanta of the output), and readable.
  at::Tensor x = quant_test::small_input(20);
  at::Tensor y = ref->forward(x);
  at::Tensor expected = quant_test::small_net()->forward(x);
  const double out_scale = ref->fetch_attr("fc_scale_0").item<double>();
  std::cout << "small net: |reference - float| = " << (y - expected).abs().max().item<double>() / out_scale
            << " quanta of the output, max |float| = " << expected.abs().max().item<double>() / out_scale << "\n";
  EXPECT_LE((y - expected).abs().max().item<double>(), 0.1 * expected.abs().max().item<double>());
  const std::string code = ref->print_readable();
  EXPECT_NE(code.find("torch.ops.aten.quantize_per_channel"), std::string::npos) << code;
  EXPECT_NE(code.find(".dequantize()"), std::string::npos) << code;
  // fx::save round trip: the same bytes again and the same output bit for bit.
  const std::string bytes = fx::save_to_string(*ref);
  auto loaded = fx::load_from_string(bytes);
  EXPECT_TRUE(at::equal(loaded->forward(x), y));
  const std::string again = fx::save_to_string(*loaded);
  EXPECT_TRUE(again == bytes);
}

TEST(Prepare, SaveLoadAndInterpreterCalibration) {
  // A prepared, calibrated module saves (observers, fused layers, each
  // node's qconfig) and converts after loading to the same reference graph.
  auto prepared = calibrated(get_default_qconfig_mapping("onednn"));
  auto loaded = fx::load_from_string(fx::save_to_string(*prepared));
  ASSERT_NE(dynamic_cast<HistogramObserver*>(loaded->get_submodule("activation_post_process_1").get()), nullptr);
  // Shared observers stay one module.
  EXPECT_EQ(loaded->get_submodule("activation_post_process_2"), loaded->get_submodule("activation_post_process_1"));
  at::Tensor x = quant_test::small_input(30);
  EXPECT_TRUE(at::equal(convert(loaded)->forward(x), convert(prepared)->forward(x)));
  // An Interpreter run calibrates as forward() does.
  auto a = prepare(quant_test::small_net(), get_default_qconfig_mapping("onednn"), {x});
  auto b = prepare(quant_test::small_net(), get_default_qconfig_mapping("onednn"), {x});
  a->forward({x});
  fx::Interpreter(b).run({x});
  auto* ha = dynamic_cast<HistogramObserver*>(a->get_submodule("activation_post_process_3").get());
  auto* hb = dynamic_cast<HistogramObserver*>(b->get_submodule("activation_post_process_3").get());
  EXPECT_TRUE(at::equal(ha->histogram(), hb->histogram()));
  EXPECT_GT(hb->histogram().sum().item<float>(), 0);
}

TEST(Prepare, FixedQParamsNeedsItsObserver) {
  // sigmoid under a MinMax global qconfig: Python refuses; fxcpp keeps it float and says why.
  namespace nn = torch::nn;
  auto root = std::make_shared<nn::Module>();
  root->register_module("fc", nn::Linear(4, 4).ptr());
  root->eval();
  auto g = std::make_shared<fx::Graph>();
  g->output(g->call_function("aten::sigmoid", {g->call_module("fc", {g->placeholder("x")})}));
  auto gm = std::make_shared<fx::GraphModule>(root, g);
  QConfigMapping m;
  m.set_global(per_tensor_minmax_qconfig());
  PrepareReport report;
  prepare(gm, m, {at::randn({2, 4})}, &report);
  EXPECT_NE(report.str().find("sigmoid  aten::sigmoid  float  fixed-qparams op: its qconfig's activation must be a "
                              "FixedQParamsObserver, not MinMaxObserver"),
            std::string::npos)
      << report.str();
  PrepareReport def;
  auto p = prepare(gm, get_default_qconfig_mapping("onednn"), {at::randn({2, 4})}, &def);
  EXPECT_NE(def.str().find("sigmoid  aten::sigmoid  quantized  aten::sigmoid"), std::string::npos) << def.str();
  EXPECT_EQ(as_observer(*p->get_submodule("activation_post_process_2"))->type_name(), "FixedQParamsObserver");
}

TEST(Convert, FunctionalLinearWeights) {
  // aten::linear on get_attr weights: the weight gets the qconfig's weight
  // observer in prepare (Python's placement), quantize_per_channel in convert.
  auto root = std::make_shared<torch::nn::Module>();
  root->register_buffer("w", at::randn({3, 4}));
  root->register_buffer("b", at::randn({3}));
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  g->output(g->call_function("aten::linear", {x, g->get_attr("w"), g->get_attr("b")}));
  auto gm = std::make_shared<fx::GraphModule>(root, g);
  // MinMax activations (a histogram clips the outliers of so few values), per-channel weights.
  auto q = std::make_shared<QConfig>(*get_default_qconfig("onednn"));
  q->activation = ObserverFactory{"MinMaxObserver", {}, ""};
  auto prepared = prepare(gm, QConfigMapping().set_global(q), {at::randn({2, 4})});
  EXPECT_EQ(structure(*prepared),
            "x x\nactivation_post_process_0 activation_post_process_0\nw w\n"
            "activation_post_process_1 activation_post_process_1\nb b\nlinear aten::linear\n"
            "activation_post_process_2 activation_post_process_2\noutput output\n");
  EXPECT_EQ(as_observer(*prepared->get_submodule("activation_post_process_1"))->type_name(), "PerChannelMinMaxObserver");
  torch::manual_seed(3);
  const at::Tensor calibration = at::randn({8, 4});
  prepared->forward({calibration});
  auto ref = convert(prepared);
  std::string targets;
  for (const fx::Node* n : ref->graph().nodes())
    if (n->op() == fx::Opcode::CallFunction) targets += n->target() + " ";
  EXPECT_EQ(targets,
            "aten::quantize_per_tensor.tensor_qparams aten::quantize_per_channel aten::linear "
            "aten::quantize_per_tensor.tensor_qparams ");
  EXPECT_EQ(ref->fetch_attr("w_scale_0").numel(), 3);
  const at::Tensor expected = gm->forward(calibration);
  EXPECT_LE((ref->forward(calibration) - expected).abs().max().item<double>(), 0.05 * expected.abs().max().item<double>());
}

TEST(Convert, MinMaxPerTensor) {
  QConfigMapping m;
  m.set_global(per_tensor_minmax_qconfig());
  auto ref = convert(calibrated(m));
  EXPECT_EQ(ref->fetch_attr("conv1.weight_scale").dim(), 0);
  at::Tensor x = quant_test::small_input(21);
  const double out_scale = ref->fetch_attr("fc_scale_0").item<double>();
  const at::Tensor expected = quant_test::small_net()->forward(x);
  EXPECT_LE((ref->forward(x) - expected).abs().max().item<double>(), 0.1 * expected.abs().max().item<double>())
      << out_scale;
}

TEST(QuantizationErrors, TrainingPreparedTwiceUncalibrated) {
  auto gm = quant_test::small_net();
  const std::string before = structure(*gm);
  gm->get_submodule("bn1")->train();
  EXPECT_EQ(error_of([&] { prepare(gm, get_default_qconfig_mapping(), {quant_test::small_input(1)}); }),
            "prepare: module 'bn1' is in training mode; call eval() first: post-training quantization needs "
            "inference batch norm and dropout");
  gm->get_submodule("bn1")->eval();
  EXPECT_EQ(structure(*gm), before);
  auto prepared = prepare(gm, get_default_qconfig_mapping(), {quant_test::small_input(1)});
  const std::string prepared_before = structure(*prepared);
  EXPECT_EQ(error_of([&] { prepare(prepared, get_default_qconfig_mapping(), {quant_test::small_input(1)}); }),
            "prepare: the module is already prepared (it has observer 'activation_post_process_0')");
  EXPECT_EQ(error_of([&] { convert(prepared); }),
            "convert: observer 'activation_post_process_0' (observing 'x') saw no data: calibrate the prepared "
            "module (call forward on sample inputs) before convert");
  EXPECT_EQ(structure(*prepared), prepared_before);
  EXPECT_EQ(error_of([&] { convert(gm); }), "convert: the module has no observers: prepare() it first");
  EXPECT_EQ(structure(*gm), before);
  EXPECT_NE(error_of([&] { prepare(gm, get_default_qconfig_mapping(), {at::randn({1, 5, 8, 8})}); })
                .find("prepare: the example inputs do not run the model: "),
            std::string::npos);
}

}  // namespace
