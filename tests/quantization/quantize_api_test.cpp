// fx::quantization::quantize (one call) and load_calibration / calibration_batches:
// the per-node report, skip names, and every bad input's exact error, the
// input module unchanged.
#include "quant_test_util.h"

#include <fx/error.h>
#include <fx/quantization/quantize.h>
#include <fx/tensor_file.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>

namespace {

namespace q = fx::quantization;

std::vector<q::CalibrationBatch> small_batches(int n = 3) {
  std::vector<q::CalibrationBatch> b;
  for (int i = 0; i < n; ++i) b.push_back({quant_test::small_input(10 + i, 4)});
  return b;
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const fx::Error& e) {
    return e.what();
  }
  return "(no error)";
}

q::QuantizeOptions reference_only() {
  q::QuantizeOptions o;
  o.lower = false;
  return o;
}

TEST(Quantize, OneCallIsPrepareCalibrateConvert) {
  auto gm = quant_test::small_net();
  const at::Tensor x = quant_test::small_input(1);
  const at::Tensor before = gm->forward(x);
  q::QuantizeReport report;
  auto int8 = q::quantize(gm, {x}, small_batches(), reference_only(), &report);
  // The same as the three steps by hand.
  auto prepared = q::prepare(gm, q::get_default_qconfig_mapping("onednn"), {x});
  {
    at::NoGradGuard no_grad;
    for (const auto& b : small_batches()) prepared->forward(b);
  }
  auto by_hand = q::convert(prepared);
  EXPECT_TRUE(at::equal(int8->forward(x), by_hand->forward(x)));
  EXPECT_TRUE(at::equal(gm->forward(x), before));
  EXPECT_FALSE(report.lowered);
  EXPECT_EQ(report.calibration_batches, 3u);
  EXPECT_EQ(report.calibration_samples, 12);
  EXPECT_EQ(report.convert.quantized_weights, 3u);
  ASSERT_EQ(report.nodes.size(), report.convert.nodes.size());
  const std::string text = report.str();
  EXPECT_NE(text.find("conv1  conv1  quantized  ConvReLU2d: weight qint8 torch.per_channel_symmetric\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\n" + report.summary() + "\n"), std::string::npos);
  EXPECT_EQ(report.summary().substr(report.summary().find(" int8 kernels")),
            " int8 kernels (not lowered: reference graph), 3 calibration batches (12 samples)");
}

TEST(Quantize, SkipKeepsAModuleFloat) {
  auto gm = quant_test::small_net();
  const at::Tensor x = quant_test::small_input(1);
  q::QuantizeOptions o = reference_only();
  o.skip = {"fc"};
  q::QuantizeReport report;
  q::quantize(gm, {x}, small_batches(), o, &report);
  EXPECT_EQ(report.convert.quantized_weights, 2u);
  size_t seen = 0;
  for (const q::NodeQuantization& n : report.nodes) {
    if (n.node != "fc") continue;
    EXPECT_EQ(q::format_report({n}), "fc  fc  float  qconfig is None\n");
    ++seen;
  }
  EXPECT_EQ(seen, 1u);
}

TEST(Quantize, BadInputsAreClearErrors) {
  auto gm = quant_test::small_net();
  const at::Tensor x = quant_test::small_input(1);
  const at::Tensor before = gm->forward(x);
  EXPECT_EQ(error_of([&] { q::quantize(gm, {x}, {}, reference_only()); }),
            "quantize: no calibration batches: int8 scales are measured on sample data");
  q::QuantizeOptions o = reference_only();
  o.skip = {"conv9"};
  EXPECT_EQ(error_of([&] { q::quantize(gm, {x}, small_batches(), o); }),
            "quantize: skip 'conv9' names no module or node of the model");
  o.skip = {"pool"};
  EXPECT_EQ(error_of([&] { q::quantize(gm, {x}, small_batches(), o); }),
            "quantize: skip 'pool': node 'pool' is a call_function (aten::max_pool2d), not a module; only modules "
            "can be kept float by name");
  std::vector<q::CalibrationBatch> wrong = small_batches(2);
  wrong.push_back({at::randn({2, 5, 8, 8})});
  const std::string e = error_of([&] { q::quantize(gm, {x}, wrong, reference_only()); });
  EXPECT_EQ(e.rfind("quantize: calibration batch 2 of 3 does not run: ", 0), 0u) << e;
  EXPECT_NE(e.find("(at node conv1)"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  gm->train();
  EXPECT_EQ(error_of([&] { q::quantize(gm, {x}, small_batches(), reference_only()); }).rfind(
                "prepare: module '", 0),
            0u);
  gm->eval();
  EXPECT_TRUE(at::equal(gm->forward(x), before));
}

TEST(Quantize, RefusesPreparedAndQuantizedModulesUnchanged) {
  auto gm = quant_test::small_net();
  const at::Tensor x = quant_test::small_input(1);
  auto prepared = q::prepare(gm, q::get_default_qconfig_mapping("onednn"), {x});
  {
    at::NoGradGuard no_grad;
    prepared->forward({x});
  }
  const at::Tensor before = q::convert(prepared)->forward(x);
  EXPECT_EQ(error_of([&] { q::quantize(prepared, {x}, small_batches(), reference_only()); }),
            "prepare: the module is already prepared (it has observer 'activation_post_process_0')");
  // Its observers saw nothing more: the same qparams, the same converted output.
  EXPECT_TRUE(at::equal(q::convert(prepared)->forward(x), before));
  auto reference = q::quantize(gm, {x}, small_batches(), reference_only());
  EXPECT_EQ(error_of([&] { q::quantize(reference, {x}, small_batches(), reference_only()); }),
            "quantize: the model is already quantized (node 'quantize_per_tensor' calls "
            "aten::quantize_per_tensor.tensor_qparams)");
}

TEST(LoadCalibration, TupleOrListOfTuples) {
  const at::Tensor a = at::randn({6, 3}), b = at::randn({6, 2});
  auto one = q::calibration_batches(c10::ivalue::Tuple::create({a, b}), "d.pt");
  ASSERT_EQ(one.size(), 1u);
  ASSERT_EQ(one[0].size(), 2u);
  EXPECT_TRUE(at::equal(one[0][1].toTensor(), b));
  c10::impl::GenericList list(c10::AnyType::get());
  list.push_back(c10::ivalue::Tuple::create({a}));
  list.push_back(c10::ivalue::Tuple::create({a.narrow(0, 0, 2)}));
  auto two = q::calibration_batches(list, "d.pt");
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[1][0].toTensor().size(0), 2);
  // Cut into batches of at most 4 samples; a non-tensor argument repeated.
  auto cut = q::calibration_batches(c10::ivalue::Tuple::create({a, c10::IValue(true)}), "d.pt", 4);
  ASSERT_EQ(cut.size(), 2u);
  EXPECT_EQ(cut[0][0].toTensor().size(0), 4);
  EXPECT_EQ(cut[1][0].toTensor().size(0), 2);
  EXPECT_TRUE(cut[1][1].toBool());
  // Through a file written by save_value (what torch.save writes).
  const std::string path = ::testing::TempDir() + "calib_list.pt";
  fx::save_value(path, list);
  EXPECT_EQ(q::load_calibration(path).size(), 2u);
}

TEST(LoadCalibration, AnythingElseNamesTheElement) {
  auto err = [](const c10::IValue& v) { return error_of([&] { q::calibration_batches(v, "d.pt"); }); };
  EXPECT_EQ(err(at::randn({2, 3})),
            "d.pt: a tensor, not calibration data (torch.save((x, ...), path): a tuple of forward arguments whose "
            "tensors hold samples along dim 0, or a list of such tuples)");
  c10::impl::GenericList list(c10::AnyType::get());
  list.push_back(c10::ivalue::Tuple::create({at::randn({2, 3})}));
  list.push_back(at::randn({2, 3}));
  EXPECT_EQ(err(list), "d.pt: element 1 is a tensor, not a tuple of forward arguments");
  list.set(1, c10::ivalue::Tuple::create({at::randn({2, 3}), at::randn({2, 3})}));
  EXPECT_EQ(err(list), "d.pt: element 1 has 2 arguments, element 0 has 1");
  EXPECT_EQ(err(c10::ivalue::Tuple::create({at::randn({2, 3}), at::randn({3, 3})})),
            "d.pt, argument 1: 3 samples along dim 0, argument 0 has 2");
  EXPECT_EQ(err(c10::ivalue::Tuple::create({at::scalar_tensor(1.0)})),
            "d.pt, argument 0: a 0-dim tensor (calibration samples go along dim 0)");
  EXPECT_EQ(err(c10::ivalue::Tuple::create(std::vector<c10::IValue>{})),
            "d.pt is an empty tuple: it must hold the forward arguments");
  EXPECT_EQ(err(c10::impl::GenericList(c10::AnyType::get())), "d.pt: an empty list: no calibration batches");
  const std::string missing = ::testing::TempDir() + "no_such_calibration.pt";
  std::filesystem::remove(missing);
  EXPECT_NE(error_of([&] { q::load_calibration(missing); }).find("no_such_calibration.pt"), std::string::npos);
}

}  // namespace
