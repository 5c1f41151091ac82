// Observers against torch.ao.quantization 1.13 on the same data
// (python/goldens/quantization_goldens.py), and QConfigMapping's lookup.
#include "quant_test_util.h"

#include <fx/error.h>
#include <fx/onednn_int8.h>
#include <fx/quantization/observers.h>
#include <fx/quantization/qconfig.h>

#include <ATen/ops/quantize_per_channel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

namespace {

using namespace fx::quantization;

std::vector<at::Tensor> golden_inputs() {
  std::vector<at::Tensor> xs;
  for (const auto& item : quant_test::goldens()["observers"]["inputs"]) {
    std::vector<float> values = item[0].get<std::vector<float>>();
    std::vector<int64_t> shape = item[1].get<std::vector<int64_t>>();
    xs.push_back(at::tensor(values).reshape(shape));
  }
  return xs;
}

void check(const std::string& name, ObserverBase& obs, double rel = 0) {
  SCOPED_TRACE(name);
  for (const at::Tensor& x : golden_inputs()) obs.forward(x);
  const auto& g = quant_test::goldens()["observers"][name];
  auto [scale, zp] = obs.calculate_qparams();
  const auto scales = g["scale"].get<std::vector<float>>();
  const auto zps = g["zero_point"].get<std::vector<int64_t>>();
  ASSERT_EQ(scale.numel(), static_cast<int64_t>(scales.size()));
  for (size_t i = 0; i < scales.size(); ++i) {
    if (rel == 0) EXPECT_EQ(scale[i].item<float>(), scales[i]) << i;
    else EXPECT_NEAR(scale[i].item<float>(), scales[i], rel * scales[i]) << i;
    EXPECT_EQ(zp[i].item<int64_t>(), zps[i]) << i;
  }
}

ObserverOptions qint8_symmetric(QScheme q) {
  ObserverOptions o;
  o.dtype = c10::kQInt8;
  o.qscheme = q;
  return o;
}

TEST(Observers, MinMaxMatchesPython) {
  MinMaxObserver a;
  check("MinMaxObserver", a);
  MinMaxObserver b(qint8_symmetric(QScheme::PerTensorSymmetric));
  check("MinMaxObserver_symmetric_qint8", b);
}

TEST(Observers, MovingAverageMatchesPython) {
  MovingAverageMinMaxObserver a;
  check("MovingAverageMinMaxObserver", a);
}

TEST(Observers, PerChannelMatchesPython) {
  PerChannelMinMaxObserver a(qint8_symmetric(QScheme::PerChannelSymmetric));
  check("PerChannelMinMaxObserver", a);
  ObserverOptions o;
  o.qscheme = QScheme::PerChannelAffine;
  o.ch_axis = 1;
  PerChannelMinMaxObserver b(o);
  check("PerChannelMinMaxObserver_affine", b);
}

TEST(Observers, HistogramMatchesPython) {
  HistogramObserver a;
  check("HistogramObserver", a);
  const auto& g = quant_test::goldens()["observers"]["HistogramObserver"];
  EXPECT_EQ(a.min_val().item<float>(), g["min_val"].get<float>());
  EXPECT_EQ(a.max_val().item<float>(), g["max_val"].get<float>());
  EXPECT_EQ(a.histogram().sum().item<float>(), g["histogram_sum"].get<float>());
  ObserverOptions o;
  o.reduce_range = true;
  HistogramObserver b(o);
  check("HistogramObserver_reduce_range", b);
}

TEST(Observers, UnseenAndEmpty) {
  HistogramObserver h;
  MinMaxObserver m;
  EXPECT_FALSE(h.has_observed());
  EXPECT_FALSE(m.has_observed());
  m.forward(at::empty({0}));
  EXPECT_FALSE(m.has_observed());
  auto [s, z] = m.calculate_qparams();
  EXPECT_EQ(s.item<float>(), 1.0f);
  EXPECT_EQ(z.item<int64_t>(), 0);
  m.forward(at::tensor({-1.0f, 3.0f}));
  EXPECT_TRUE(m.has_observed());
}

TEST(Observers, BadOptions) {
  ObserverOptions o;
  o.qscheme = QScheme::PerChannelAffine;
  EXPECT_THROW(MinMaxObserver{o}, fx::Error);
  EXPECT_THROW(HistogramObserver{o}, fx::Error);
  ObserverOptions p;
  p.quant_min = 0;
  EXPECT_THROW(MinMaxObserver{p}, fx::Error);
  try {
    ObserverFactory{"NoSuchObserver", {}, ""}();
    FAIL();
  } catch (const fx::Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown observer type 'NoSuchObserver'"), std::string::npos);
  }
}

TEST(QConfigMapping, Precedence) {
  auto a = per_tensor_minmax_qconfig();
  auto b = per_tensor_minmax_qconfig(true);
  auto c = get_default_qconfig("onednn");
  QConfigMapping m;
  m.set_global(c).set_object_type("Conv2d", a).set_module_name("layer1", b).set_module_name("layer1.0.conv2", nullptr);
  EXPECT_EQ(m.for_module("conv1", "Conv2d"), a);
  EXPECT_EQ(m.for_module("conv1", "ConvReLU2d"), a);      // a fused layer finds its conv's entry
  EXPECT_EQ(m.for_module("layer1.0.conv1", "Conv2d"), a);  // object type before the parent's name
  EXPECT_EQ(m.for_module("layer1.0.relu", "ReLU"), b);     // inherited from layer1
  EXPECT_EQ(m.for_module("layer1.0.conv2", "Conv2d"), nullptr);
  EXPECT_EQ(m.for_module("fc", "Linear"), c);
  m.set_object_type("aten::add", nullptr);
  EXPECT_EQ(m.for_function("aten::add_.Tensor"), nullptr);
  EXPECT_EQ(m.for_function("aten::add.Tensor"), nullptr);
  EXPECT_EQ(m.for_function("aten::mul"), c);
  EXPECT_EQ(canonical_function("aten::relu_"), "aten::relu");
  EXPECT_EQ(canonical_function("aten::__and__.Tensor"), "aten::__and__");
}

// with_weight_range(-64, 63): 7-bit weights, as torch.ao's PerChannelMinMaxObserver.with_args(
// quant_min=-64, quant_max=63): scale max|w| / 63.5 per channel, zero point 0, activations as they were.
TEST(QConfigMapping, WithWeightRange) {
  QConfigMapping m = get_default_qconfig_mapping("onednn");
  m.set_module_name("fc", nullptr).set_object_type("Linear", per_tensor_minmax_qconfig());
  const QConfigMapping seven = m.with_weight_range(-64, 63);
  const QConfigPtr g = seven.global();
  ASSERT_TRUE(g);
  EXPECT_EQ(g->weight.type, "PerChannelMinMaxObserver");
  EXPECT_EQ(g->weight.options.quant_min, -64);
  EXPECT_EQ(g->weight.options.quant_max, 63);
  EXPECT_EQ(factory_to_json(g->activation), factory_to_json(m.global()->activation));
  EXPECT_FALSE(m.global()->weight.options.quant_min.has_value()) << "the mapping given is not changed";
  EXPECT_EQ(seven.for_module("fc", "Linear"), nullptr);
  EXPECT_EQ(seven.for_module("head", "Linear")->weight.type, "MinMaxObserver");
  EXPECT_EQ(seven.for_module("head", "Linear")->weight.options.quant_max, 63);
  EXPECT_TRUE(seven.for_function("aten::reshape")->reuse_input);
  EXPECT_EQ(seven.for_function("aten::sigmoid")->activation.type, "FixedQParamsObserver");

  auto observer = g->weight();
  at::Tensor w = torch::tensor({{0.5f, -1.27f, 0.2f}, {0.03f, 0.01f, -0.02f}});
  observer->forward(w);
  auto [scale, zero_point] = observer->calculate_qparams();
  EXPECT_TRUE(torch::allclose(scale, torch::tensor({1.27f / 63.5f, 0.03f / 63.5f}))) << scale;
  EXPECT_TRUE(torch::equal(zero_point, torch::zeros({2}, torch::kLong))) << zero_point;
  at::Tensor qw = at::quantize_per_channel(w, scale, zero_point, 0, c10::kQInt8).int_repr();
  // The largest weight is 63.5 steps: 63 or 64 as float32 rounds it, within kMaxWeightFor16BitSums.
  EXPECT_GE(qw.abs().max().item<int>(), 63);
  EXPECT_LE(qw.abs().max().item<int>(), 64);

  for (auto [lo, hi] : {std::pair<int64_t, int64_t>{-129, 127}, {0, 127}, {-64, 0}, {-64, 128}}) {
    try {
      m.with_weight_range(lo, hi);
      ADD_FAILURE() << lo << ", " << hi;
    } catch (const fx::Error& e) {
      EXPECT_EQ(std::string(e.what()), "with_weight_range: qint8 weights need -128 <= quant_min < 0 < quant_max <= "
                                       "127, got [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
  }
  EXPECT_EQ(with_weight_range(nullptr, -64, 63), nullptr);
}

TEST(QConfigMapping, WithWeightBits) {
  QConfigMapping m = get_default_qconfig_mapping("onednn");
  m.set_object_type("Linear", per_tensor_minmax_qconfig());
  const QConfigMapping eight = m.with_weight_bits(8);
  EXPECT_EQ(eight.global(), m.global()) << "8 bits: the mapping as it is";
  EXPECT_FALSE(eight.for_module("fc", "Linear")->weight.options.quant_min.has_value());
  const QConfigMapping seven = m.with_weight_bits(7);
  EXPECT_EQ(seven.global()->weight.options.quant_min, kMin7BitWeight);
  EXPECT_EQ(seven.global()->weight.options.quant_max, kMax7BitWeight);
  EXPECT_EQ(seven.for_module("fc", "Linear")->weight.options.quant_min, -64);
  EXPECT_EQ(seven.for_module("fc", "Linear")->weight.options.quant_max, 63);
  EXPECT_EQ(kMax7BitWeight + 1, fx::onednn::kMaxWeightFor16BitSums) << "7-bit weights keep the 16-bit sums exact";
  for (int bits : {0, 4, 6, 9, 16}) {
    try {
      m.with_weight_bits(bits);
      ADD_FAILURE() << bits;
    } catch (const fx::Error& e) {
      EXPECT_EQ(std::string(e.what()), "with_weight_bits: weights take 7 or 8 bits, got " + std::to_string(bits));
    }
  }
}

TEST(QConfigMapping, DefaultOnednn) {
  QConfigMapping m = get_default_qconfig_mapping("onednn");
  const QConfigPtr g = m.global();
  ASSERT_TRUE(g);
  EXPECT_EQ(g->activation.type, "HistogramObserver");
  EXPECT_FALSE(g->activation.options.reduce_range);
  EXPECT_EQ(g->activation.options.dtype, c10::kQUInt8);
  EXPECT_EQ(g->weight.type, "PerChannelMinMaxObserver");
  EXPECT_EQ(g->weight.options.qscheme, QScheme::PerChannelSymmetric);
  EXPECT_EQ(g->weight.options.dtype, c10::kQInt8);
  EXPECT_EQ(m.for_function("aten::sigmoid")->activation.type, "FixedQParamsObserver");
  EXPECT_EQ(m.for_module("act", "Tanh")->activation.options.zero_point, 128);
  EXPECT_TRUE(m.for_function("aten::reshape")->reuse_input);
  EXPECT_TRUE(get_default_qconfig("x86")->activation.options.reduce_range);
  try {
    get_default_qconfig("tpu");
    FAIL();
  } catch (const fx::Error& e) {
    EXPECT_STREQ(e.what(), "backend 'tpu' not supported (known: onednn, fbgemm, x86, qnnpack)");
  }
}

}  // namespace
