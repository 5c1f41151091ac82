// Quantization-aware training: fake quantizers (the fused kernel against the
// op-by-op port), prepare_qat's structure (the placement prepare gives the same
// model), the QAT layers' arithmetic, the controls, the errors, convert and
// lowering of a trained model, and fx::save / fx::load in the middle of training.
#include "quant_test_util.h"

#include "../common/error_of.h"

#include <fx/aot.h>
#include <fx/error.h>
#include <fx/quantization/convert.h>
#include <fx/quantization/lower.h>
#include <fx/quantization/qat.h>
#include <fx/serialize.h>

#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>

namespace qat_test {

using namespace fx::quantization;
using fx_test::error_of;

ObserverFactory fake_quant(const std::string& type, const std::string& observer, bool per_channel) {
  ObserverFactory f = per_channel ? get_default_qat_qconfig("onednn")->weight : get_default_qat_qconfig("onednn")->activation;
  f.type = type;
  f.observer = observer;
  return f;
}

/// The fused kernel (at::fused_moving_avg_obs_fake_quant) and FakeQuantize's
/// op-by-op path (observer, calculate_qparams, fake_quantize_*) keep the same
/// moving min / max; per tensor they also agree on scale and output. Per
/// channel the kernel chooses its symmetric scale by its own rule (Python's
/// FusedMovingAvgObsFakeQuantize differs from its FakeQuantize by ~1e-4 there
/// too), so its output is checked against its own scale. The gradient is the
/// straight-through estimator: 1 where x quantizes inside the range, else 0.
void check_fused_against_plain(bool per_channel) {
  const std::string observer = per_channel ? "MovingAveragePerChannelMinMaxObserver" : "MovingAverageMinMaxObserver";
  FakeQuantize fused(fake_quant("FusedMovingAvgObsFakeQuantize", observer, per_channel));
  FakeQuantize plain(fake_quant("FakeQuantize", observer, per_channel));
  torch::manual_seed(3);
  for (int i = 0; i < 4; ++i) {
    at::Tensor x = (torch::randn({6, 3, 3, 3}) * (1 + i) + 0.2 * i).requires_grad_();
    at::Tensor a = fused.forward(x), b = plain.forward(x);
    for (const char* m : {"min_val", "max_val"})
      EXPECT_TRUE(at::allclose(fused.activation_post_process().named_buffers()[m],
                               plain.activation_post_process().named_buffers()[m], 1e-6, 1e-7))
          << m << " " << i;
    const at::Tensor shape_s = per_channel ? fused.scale().reshape({-1, 1, 1, 1}) : fused.scale();
    const at::Tensor shape_z = per_channel ? fused.zero_point().reshape({-1, 1, 1, 1}) : fused.zero_point();
    at::Tensor q = at::round(x.detach() / shape_s) + shape_z;
    at::Tensor want = (at::clamp(q, fused.quant_min(), fused.quant_max()) - shape_z) * shape_s;
    EXPECT_LE((a - want).abs().max().item<double>(), 1e-5 * x.abs().max().item<double>()) << i;
    if (!per_channel) {
      EXPECT_TRUE(at::allclose(fused.scale(), plain.scale(), 1e-6, 0)) << i;
      EXPECT_TRUE(at::equal(fused.zero_point(), plain.zero_point())) << i;
      EXPECT_LE((a - b).abs().max().item<double>(), 1e-6 * x.abs().max().item<double>()) << i;
    }
    at::Tensor g = torch::autograd::grad({a.sum()}, {x})[0];
    at::Tensor inside = ((q >= fused.quant_min()) & (q <= fused.quant_max())).to(at::kFloat);
    EXPECT_TRUE(at::equal(g, inside)) << i;
    EXPECT_GT(g.sum().item<double>(), 0.4 * x.numel());
  }
  EXPECT_EQ(fused.scale().numel(), per_channel ? 6 : 1);
}

TEST(FakeQuantize, FusedKernelAgreesWithTheObserverPath) { check_fused_against_plain(false); }
TEST(FakeQuantize, PerChannelFusedKernelAgreesWithTheObserverPath) { check_fused_against_plain(true); }

TEST(FakeQuantize, ObserverAndFakeQuantSwitches) {
  auto gm = quant_test::small_net();
  gm->train();
  auto qat = prepare_qat(gm, get_default_qat_qconfig_mapping("onednn"), {quant_test::small_input(1)});
  qat->forward({quant_test::small_input(2)});
  auto* fq = as_fake_quantize(*qat->get_submodule("activation_post_process_0"));
  ASSERT_NE(fq, nullptr);
  const at::Tensor before = fq->scale().clone();
  disable_observer(*qat);
  qat->forward({quant_test::small_input(3) * 5});
  EXPECT_TRUE(at::equal(fq->scale(), before));
  enable_observer(*qat);
  qat->forward({quant_test::small_input(3) * 5});
  EXPECT_FALSE(at::equal(fq->scale(), before));
  disable_fake_quant(*qat);
  const at::Tensor x = quant_test::small_input(4);
  EXPECT_TRUE(at::equal(fq->forward(x), x));
  enable_fake_quant(*qat);
  EXPECT_FALSE(at::equal(fq->forward(x), x));
}

// The fixed-qparams kind (sigmoid, tanh ...) has no running min / max: it saves
// and loads with its constant scale and zero point.
TEST(FakeQuantize, FixedQParamsKindSavesAndLoads) {
  const ObserverFactory f = get_default_qat_qconfig_mapping("onednn").for_function("aten::sigmoid")->activation;
  FakeQuantize q(f);
  EXPECT_EQ(q.type_name(), "FixedQParamsFakeQuantize");
  EXPECT_FALSE(q.running_min().defined());
  const nlohmann::json j = fake_quantize_to_json(q);
  EXPECT_EQ(j.at("min_max_size").get<int64_t>(), 0);
  auto back = fake_quantize_from_json(j);
  EXPECT_EQ(back->scale().item<float>(), 1.0f / 256.0f);
  EXPECT_EQ(back->zero_point().item<int>(), 0);
  const at::Tensor x = at::linspace(-1, 2, 7);
  EXPECT_TRUE(at::equal(back->forward(x), q.forward(x)));
}

TEST(PrepareQat, SamePlacementAsPrepareAndQatLayers) {
  auto eval_gm = quant_test::small_net();
  auto ptq = prepare(eval_gm, get_default_qconfig_mapping("onednn"), {quant_test::small_input(1)});
  auto gm = quant_test::small_net();
  gm->train();
  const size_t nodes_before = gm->graph().nodes().size();
  PrepareReport report;
  auto qat = prepare_qat(gm, get_default_qat_qconfig_mapping("onednn"), {quant_test::small_input(1)}, &report);
  EXPECT_EQ(gm->graph().nodes().size(), nodes_before);  // gm unchanged
  std::vector<std::string> a, b;
  for (const fx::Node* n : ptq->graph().nodes()) a.push_back(n->name() + " " + n->target());
  for (const fx::Node* n : qat->graph().nodes()) b.push_back(n->name() + " " + n->target());
  EXPECT_EQ(a, b);
  EXPECT_EQ(report.fuse.fused, (std::vector<std::string>{"conv1: Conv2d + BatchNorm2d + ReLU -> ConvBnReLU2d",
                                                          "conv2: Conv2d + BatchNorm2d -> ConvBn2d",
                                                          "fc: Linear + ReLU -> LinearReLU"}));
  for (const char* name : {"conv1", "conv2", "fc"}) {
    auto* l = dynamic_cast<QatLayer*>(qat->get_submodule(name).get());
    ASSERT_NE(l, nullptr) << name;
    EXPECT_EQ(l->weight_fake_quant().type_name(), "FusedMovingAvgObsFakeQuantize");
    EXPECT_TRUE(l->is_training());
  }
  EXPECT_EQ(as_fake_quantize(*qat->get_submodule("activation_post_process_0"))->type_name(),
            "FusedMovingAvgObsFakeQuantize");
  size_t observers = 0;
  for (const fx::Node* n : ptq->graph().nodes()) observers += n->target().rfind("activation_post_process_", 0) == 0;
  EXPECT_EQ(report.observer_nodes, observers);
  EXPECT_EQ(observers, 7u);
}

TEST(PrepareQat, ConvBnKeepsBatchNormLive) {
  auto gm = quant_test::small_net();
  gm->train();
  auto qat = prepare_qat(gm, get_default_qat_qconfig_mapping("onednn"), {quant_test::small_input(1)});
  auto* layer = dynamic_cast<QatLayer*>(qat->get_submodule("conv1").get());
  ASSERT_NE(layer, nullptr);
  auto conv = gm->get_submodule("conv1");
  auto bn = gm->get_submodule("bn1");
  const at::Tensor gm_mean = bn->named_buffers()["running_mean"].clone();
  // Without fake quantization the layer is conv → batch norm (batch statistics) → relu.
  disable_fake_quant(*qat);
  const at::Tensor x = quant_test::small_input(5, 4);
  const at::Tensor bn_mean = layer->bn()->named_buffers()["running_mean"].clone();
  at::Tensor y = layer->forward(x);
  at::Tensor c = at::conv2d(x, conv->named_parameters()["weight"], conv->named_parameters()["bias"], 1, 1);
  at::Tensor want = at::relu(at::batch_norm(c, bn->named_parameters()["weight"], bn->named_parameters()["bias"],
                                            bn_mean.clone(), bn->named_buffers()["running_var"].clone(), true, 0.1,
                                            1e-5, false));
  EXPECT_LE((y - want).abs().max().item<double>(), 1e-5);
  EXPECT_FALSE(at::equal(layer->bn()->named_buffers()["running_mean"], bn_mean));  // statistics updated
  EXPECT_EQ(layer->bn()->named_buffers()["num_batches_tracked"].item<int64_t>(),
            bn->named_buffers()["num_batches_tracked"].item<int64_t>() + 1);
  EXPECT_TRUE(at::equal(bn->named_buffers()["running_mean"], gm_mean));  // gm's layer untouched
  // freeze_bn_stats: running statistics used and kept, also after train().
  freeze_bn_stats(*qat);
  qat->train();
  EXPECT_FALSE(layer->bn()->is_training());
  const at::Tensor frozen = layer->bn()->named_buffers()["running_mean"].clone();
  layer->forward(x);
  EXPECT_TRUE(at::equal(layer->bn()->named_buffers()["running_mean"], frozen));
  update_bn_stats(*qat);
  EXPECT_TRUE(layer->bn()->is_training());
}

TEST(PrepareQat, RefusesWithOneLineAndLeavesTheModule) {
  const auto mapping = get_default_qat_qconfig_mapping("onednn");
  auto gm = quant_test::small_net();  // eval mode
  EXPECT_EQ(error_of([&] { prepare_qat(gm, mapping, {quant_test::small_input(1)}); }),
            "prepare_qat: the module is in eval mode; call train() first: quantization-aware training prepares a "
            "module for training (prepare() is for post-training quantization)");
  gm->train();
  auto qat = prepare_qat(gm, mapping, {quant_test::small_input(1)});
  EXPECT_EQ(error_of([&] { prepare_qat(qat, mapping, {quant_test::small_input(1)}); }),
            "prepare_qat: the module is already prepared (it has observer 'activation_post_process_0')");
  EXPECT_EQ(error_of([&] { prepare(qat, get_default_qconfig_mapping("onednn"), {quant_test::small_input(1)}); }),
            "prepare: the module is already prepared (it has observer 'activation_post_process_0')");
  qat->eval();
  EXPECT_EQ(error_of([&] { convert(qat); }),
            "convert: observer 'activation_post_process_0' (observing 'x') saw no data: calibrate the prepared "
            "module (call forward on sample inputs) before convert");
  auto eval_gm = quant_test::small_net();
  auto prepared = prepare(eval_gm, get_default_qconfig_mapping("onednn"), {quant_test::small_input(1)});
  prepared->forward({quant_test::small_input(2)});
  auto ref = convert(prepared);
  ref->train();
  const size_t nodes = ref->graph().nodes().size();
  EXPECT_EQ(error_of([&] { prepare_qat(ref, mapping, {quant_test::small_input(1)}); }),
            "prepare_qat: the model is already quantized (node 'quantize_per_tensor' calls aten::quantize_per_tensor.tensor_qparams)");
  EXPECT_EQ(ref->graph().nodes().size(), nodes);
  EXPECT_EQ(error_of([&] { prepare_qat(gm, mapping, {at::randn({2, 5, 8, 8})}); }).rfind(
                "prepare_qat: the example inputs do not run the model: ", 0),
            0u);
}

/// Two SGD steps of cross-entropy on seeded data.
void train_steps(fx::GraphModule& gm, int64_t first_seed, int steps) {
  torch::optim::SGD opt(gm.parameters(), torch::optim::SGDOptions(0.05));
  for (int s = 0; s < steps; ++s) {
    torch::manual_seed(first_seed + s);
    at::Tensor x = torch::randn({8, 3, 8, 8});
    at::Tensor y = torch::randint(0, 5, {8});
    opt.zero_grad();
    torch::nn::functional::cross_entropy(gm.forward({x}).toTensor(), y).backward();
    opt.step();
  }
}

TEST(PrepareQat, TrainConvertAndLower) {
  auto gm = quant_test::small_net();
  gm->train();
  auto qat = prepare_qat(gm, get_default_qat_qconfig_mapping("onednn"), {quant_test::small_input(1)});
  const at::Tensor w0 = qat->get_submodule("conv1")->named_parameters()["weight"].clone();
  train_steps(*qat, 10, 4);
  EXPECT_FALSE(at::equal(qat->get_submodule("conv1")->named_parameters()["weight"], w0));
  EXPECT_EQ(error_of([&] { convert(qat); }), "convert: module 'conv1' is in training mode; call eval() first");
  qat->eval();
  disable_observer(*qat);
  const at::Tensor x = quant_test::small_input(20, 4);
  at::Tensor fake;
  {
    at::NoGradGuard no_grad;
    fake = qat->forward({x}).toTensor();
  }
  ConvertReport report;
  auto ref = convert(qat, &report);
  EXPECT_EQ(report.quantized_weights, 3u);
  EXPECT_EQ(ref->fetch_attr("conv1.weight_scale").numel(), 4);  // per-channel, the batch norm folded in
  at::Tensor r, l;
  {
    at::NoGradGuard no_grad;
    r = ref->forward({x}).toTensor();
    auto lowered = lower_to_onednn_int8(ref);
    l = lowered->forward({x}).toTensor();
  }
  const double out_scale = as_fake_quantize(*qat->get_submodule(qat->graph().nodes().to_vector().end()[-2]->target()))
                               ->scale()
                               .item<double>();
  // The fake-quantized model simulates the reference int8 model: a few output quanta apart at most.
  EXPECT_LE((fake - r).abs().max().item<double>(), 3 * out_scale);
  // oneDNN's int8 kernels round where the reference graph rounds, but not always alike (models_test.cpp's bound).
  EXPECT_LE((l - r).norm().item<double>(), 0.05 * r.norm().item<double>());
}

TEST(PrepareQat, SavedMidTrainingResumesTheSame) {
  auto gm = quant_test::small_net();
  gm->train();
  auto qat = prepare_qat(gm, get_default_qat_qconfig_mapping("onednn"), {quant_test::small_input(1)});
  train_steps(*qat, 30, 2);
  freeze_bn_stats(*qat->get_submodule("conv2"));
  register_qat_modules();
  auto loaded = fx::load_from_string(fx::save_to_string(*qat));
  EXPECT_TRUE(loaded->is_training());
  auto* l2 = dynamic_cast<QatLayer*>(loaded->get_submodule("conv2").get());
  ASSERT_NE(l2, nullptr);
  EXPECT_TRUE(l2->freeze_bn());
  EXPECT_FALSE(l2->bn()->is_training());
  train_steps(*qat, 40, 2);
  train_steps(*loaded, 40, 2);
  auto a = qat->named_parameters(), b = loaded->named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (const auto& p : a) EXPECT_TRUE(at::equal(p.value(), b[p.key()])) << p.key();
  auto ab = qat->named_buffers(), bb = loaded->named_buffers();
  ASSERT_EQ(ab.size(), bb.size());
  for (const auto& p : ab) EXPECT_TRUE(at::equal(p.value(), bb[p.key()])) << p.key();
}

TEST(PrepareQat, CompiledForTrainingWithAotModule) {
  auto gm = quant_test::small_net();
  gm->train();
  auto qat = prepare_qat(gm, get_default_qat_qconfig_mapping("onednn"), {quant_test::small_input(1)});
  register_qat_modules();
  auto twin = fx::load_from_string(fx::save_to_string(*qat));
  auto compiled = fx::aot_module(twin);
  torch::optim::SGD a(qat->parameters(), torch::optim::SGDOptions(0.05)), b(twin->parameters(), torch::optim::SGDOptions(0.05));
  for (int s = 0; s < 3; ++s) {
    torch::manual_seed(50 + s);
    at::Tensor x = torch::randn({8, 3, 8, 8});
    at::Tensor y = torch::randint(0, 5, {8});
    a.zero_grad();
    b.zero_grad();
    at::Tensor la = torch::nn::functional::cross_entropy(qat->forward({x}).toTensor(), y);
    at::Tensor lb = torch::nn::functional::cross_entropy(compiled->forward(std::vector<c10::IValue>{x}).toTensor(), y);
    EXPECT_NEAR(la.item<double>(), lb.item<double>(), 1e-5 * std::abs(la.item<double>())) << s;
    la.backward();
    lb.backward();
    a.step();
    b.step();
  }
  // The fake quantizers are ATen operators of the captured graphs, their state written back.
  size_t fake_quant_nodes = 0, copies_back = 0;
  for (const fx::Node* n : compiled->forward_graph()->graph().nodes()) {
    fake_quant_nodes += n->target().find("fused_moving_avg_obs_fq_helper") != std::string::npos;
    copies_back += n->target().rfind("aten::copy_", 0) == 0;
  }
  EXPECT_EQ(fake_quant_nodes, 10u);  // 7 activation fake quantizers, 3 weight ones
  EXPECT_GE(copies_back, 10u * 4);   // running min / max, scale, zero point of each
  auto pb = twin->named_parameters();
  for (const auto& p : qat->named_parameters())
    EXPECT_LE((p.value() - pb[p.key()]).abs().max().item<double>(), 1e-5 * (1 + p.value().abs().max().item<double>()))
        << p.key();
  auto bb = twin->named_buffers();
  for (const auto& p : qat->named_buffers())
    EXPECT_LE((p.value().to(at::kDouble) - bb[p.key()].to(at::kDouble)).abs().max().item<double>(),
              1e-5 * (1 + p.value().to(at::kDouble).abs().max().item<double>()))
        << p.key();
}

}  // namespace qat_test
