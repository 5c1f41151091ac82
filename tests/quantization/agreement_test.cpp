// fxcpp's int8 against fp32 on random-weight torchvision models (issue 22),
// held to Python's int8 of the same models on the same calibration data
// (python/quantization_agreement.py; tests/quantization/agreement.cmake
// exports them first, the plain test_quantization program skips when the
// files are missing): over 64 inputs, the relative error ||int8 - fp32|| /
// ||fp32|| no worse than Python's + 10%, and top-1 agreement with fp32 at
// least Python's. Batch-norm statistics come from a train-mode pass over
// random data (otherwise activations shrink to 1e-9 and calibration measures
// nothing).
#include "fx_paths.h"

#include <fx/import.h>
#include <fx/quantization/quantize.h>
#include <fx/tensor_file.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace {

namespace q = fx::quantization;

const std::string kDir = std::string(FX_BINARY_DIR) + "/models/quant_agree/";

void check_agreement(const std::string& model, bool lower) {
  const std::string base = kDir + model;
  if (!std::ifstream(base + ".agree.json")) GTEST_SKIP() << base << ".agree.json is missing (quantization_agreement.py)";
  std::ifstream in(base + ".agree.json");
  const nlohmann::json python = nlohmann::json::parse(in);
  auto gm = fx::import_torchscript(base + ".agree.pt");
  const at::Tensor images = fx::load_value(base + ".agree_inputs.pt").toTupleRef().elements()[0].toTensor();
  const auto calibration = q::load_calibration(base + ".agree_calib.pt");
  q::QuantizeOptions options;
  options.lower = lower;
  q::QuantizeReport report;
  auto int8 = q::quantize(gm, {images.narrow(0, 0, 1)}, calibration, options, &report);
  at::NoGradGuard no_grad;
  const at::Tensor fp32 = gm->forward({images}).toTensor();
  const at::Tensor out = int8->forward({images}).toTensor();
  ASSERT_EQ(out.sizes(), fp32.sizes());
  const double rel = ((out - fp32).norm() / fp32.norm()).item<double>();
  const double agree = out.argmax(1).eq(fp32.argmax(1)).to(at::kDouble).mean().item<double>();
  const double py_rel = python["relative_error"].get<double>();
  const double py_agree = python["top1_agreement"].get<double>();
  std::cout << model << (lower ? " lowered" : " reference") << ": relative error " << rel << " (Python " << py_rel
            << "), top-1 agreement " << agree << " (Python " << py_agree << "); " << report.summary() << "\n";
  EXPECT_LE(rel, py_rel * 1.1);
  EXPECT_GE(agree, py_agree - 1e-9);
  if (lower) {
    EXPECT_GT(report.lower.int8_kernels, 0u);
  }
}

TEST(QuantizationAgreement, resnet18_reference) { check_agreement("resnet18", false); }
TEST(QuantizationAgreement, resnet18_lowered) { check_agreement("resnet18", true); }
TEST(QuantizationAgreement, mobilenet_v2_reference) { check_agreement("mobilenet_v2", false); }
TEST(QuantizationAgreement, mobilenet_v2_lowered) { check_agreement("mobilenet_v2", true); }

}  // namespace
