// Differential against Python 1.13's prepare_qat_fx on torchvision resnet18 and
// mobilenet_v2 (python/goldens/qat_goldens.py; tests/quantization/qat.cmake exports
// the scripted models, the data and this machine's goldens first): the same fused
// QAT layers and fake-quantizer placement (names, opcodes, targets, classes); after
// the same SGD steps on the same data, the same losses, every fake quantizer's
// scale and zero point (1e-5 relative), the same eval-mode output (1e-4), and the
// reference model's weight qparams and output.
#include <fx/error.h>
#include <fx/import.h>
#include <fx/module_attributes.h>
#include <fx/quantization/convert.h>
#include <fx/quantization/qat.h>
#include <fx/tensor_file.h>

#include "quant_test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>

#include <cstdlib>
#include <fstream>

namespace qat_models {

using namespace fx::quantization;

const std::string kQatDir = std::string(FX_BINARY_DIR) + "/models/qat/";

double max_relative(const at::Tensor& a, const at::Tensor& b) {
  return ((a - b).abs() / b.abs().clamp_min(1e-12)).max().item<double>();
}

void check_qat_model(const std::string& model) {
  if (!std::getenv("FX_QAT_MODELS")) GTEST_SKIP() << "run by ctest's quantization_qat_models (FX_QAT_MODELS=1)";
  const std::string base = kQatDir + model;
  if (!std::ifstream(base + ".qat.pt")) GTEST_SKIP() << base << ".qat.pt is missing (qat_goldens.py --export)";
  std::ifstream in(kQatDir + "qat.json");
  const nlohmann::json g = nlohmann::json::parse(in)[model];
  auto data = fx::load_value(kQatDir + "qat_data.pt").toTuple()->elements();
  const at::Tensor inputs = data[0].toTensor(), labels = data[1].toTensor(), test = data[2].toTensor();

  auto gm = fx::import_torchscript(base + ".qat.pt");
  gm->train();
  PrepareReport report;
  auto qat = prepare_qat(gm, get_default_qat_qconfig_mapping("onednn"), {test}, &report);
  // Structure: nodes, and the class of every call_module.
  std::vector<std::vector<std::string>> mine;
  for (const fx::Node* n : qat->graph().nodes()) mine.push_back(quant_test::spelled_as_python(n));
  const auto expected = g["prepared"].get<std::vector<std::vector<std::string>>>();
  ASSERT_EQ(mine.size(), expected.size());
  for (size_t i = 0; i < mine.size(); ++i) EXPECT_EQ(mine[i], expected[i]) << "node " << i;
  for (const fx::Node* n : qat->graph().nodes()) {
    if (n->op() == fx::Opcode::CallModule) {
      EXPECT_EQ(quant_test::python_class(*qat, n),
                g["module_types"][quant_test::spelled_as_python(n)[0]].get<std::string>())
          << n->name();
    }
  }

  // The same SGD steps.
  torch::optim::SGD opt(qat->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  const auto losses = g["losses"].get<std::vector<double>>();
  for (int64_t step = 0; step < inputs.size(0); ++step) {
    opt.zero_grad();
    at::Tensor loss = torch::nn::functional::cross_entropy(qat->forward({inputs[step]}).toTensor(), labels[step]);
    loss.backward();
    opt.step();
    EXPECT_NEAR(loss.item<double>(), losses[step], 1e-5 * std::abs(losses[step])) << "step " << step;
  }
  // Every fake quantizer's state.
  size_t checked = 0;
  for (const auto& [name, want] : g["fake_quants"].items()) {
    auto* fq = as_fake_quantize(*qat->get_submodule(name));
    ASSERT_NE(fq, nullptr) << name;
    EXPECT_EQ(fq->type_name(), want["type"].get<std::string>()) << name;
    const at::Tensor scale = at::tensor(want["scale"].get<std::vector<float>>());
    const at::Tensor zp = at::tensor(want["zero_point"].get<std::vector<int64_t>>());
    ASSERT_EQ(fq->scale().numel(), scale.numel()) << name;
    EXPECT_LE(max_relative(fq->scale().reshape(-1), scale), 1e-5) << name;
    EXPECT_TRUE(at::equal(fq->zero_point().reshape(-1).to(at::kLong), zp)) << name;
    auto [s, z] = fq->calculate_qparams();
    EXPECT_LE(max_relative(s.reshape(-1), at::tensor(want["qparams_scale"].get<std::vector<float>>())), 1e-5) << name;
    EXPECT_TRUE(at::equal(z.reshape(-1).to(at::kLong), at::tensor(want["qparams_zero_point"].get<std::vector<int64_t>>())))
        << name;
    ++checked;
  }
  EXPECT_GT(checked, 20u);
  // Eval-mode output of the trained QAT model.
  qat->eval();
  at::Tensor y;
  {
    at::NoGradGuard no_grad;
    y = qat->forward({test}).toTensor().reshape(-1);
  }
  const at::Tensor py_y = at::tensor(g["output"].get<std::vector<float>>());
  const double scale = py_y.abs().max().item<double>();
  EXPECT_LE((y - py_y).abs().max().item<double>(), 1e-4 * scale);
  // The reference model: weight qparams from the trained fake quantizers, and its output.
  auto ref = convert(qat);
  for (const auto& [name, w] : g["weights"].items()) {
    std::string target = name;  // Python's fused reference ConvReLU2d holds the conv as child "0"
    if (target.size() > 2 && target.compare(target.size() - 2, 2, ".0") == 0) {
      try {
        ref->fetch_attr(target + ".weight_scale");
      } catch (const fx::Error&) {
        target.resize(target.size() - 2);
      }
    }
    at::Tensor s = ref->fetch_attr(target + ".weight_scale").reshape(-1).to(at::kFloat);
    EXPECT_LE(max_relative(s, at::tensor(w["scale"].get<std::vector<float>>())), 1e-5) << target;
    EXPECT_TRUE(at::equal(ref->fetch_attr(target + ".weight_zero_point").reshape(-1).to(at::kLong),
                          at::tensor(w["zero_point"].get<std::vector<int64_t>>())))
        << target;
  }
  at::Tensor r;
  {
    at::NoGradGuard no_grad;
    r = ref->forward({test}).toTensor().reshape(-1);
  }
  const at::Tensor py_r = at::tensor(g["reference_output"].get<std::vector<float>>());
  std::cout << model << ": |qat - python| " << (y - py_y).abs().max().item<double>() << ", |reference - python| "
            << (r - py_r).abs().max().item<double>() << " (output scale " << scale << ")\n";
  EXPECT_LE((r - py_r).abs().max().item<double>(), 1e-3 * scale);
}

TEST(QatModels, resnet18) { check_qat_model("resnet18"); }
TEST(QatModels, mobilenet_v2) { check_qat_model("mobilenet_v2"); }

}  // namespace qat_models
