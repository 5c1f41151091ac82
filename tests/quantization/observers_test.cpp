// Observers against torch.ao.quantization 1.13 on the same data
// (python/goldens/quantization_goldens.py), and QConfigMapping's lookup.
#include "quant_test_util.h"

#include <fx/error.h>
#include <fx/quantization/observers.h>
#include <fx/quantization/qconfig.h>

#include <gtest/gtest.h>

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
