// Real training through fx::aot_module: sklearn's digits (python3-sklearn,
// written by python/digits_fixture.py with plain torch.save), a small CNN
// trained in C++ with torch::optim::SGD, once eagerly and once compiled:
// the same loss at every step and the same held-out accuracy.
#include <fx/aot.h>
#include <fx/import.h>
#include <fx/tensor_file.h>
#include <fx_paths.h>

#include <gtest/gtest.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/torch.h>

#include <filesystem>
#include <map>

namespace {

const std::string kDigits = std::string(FX_BINARY_DIR) + "/models/digits/";

/// python/digits_fixture.py's DigitsNet, in C++.
struct DigitsNetImpl : torch::nn::Module {
  DigitsNetImpl()
      : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 16, 3).padding(1)))),
        bn1(register_module("bn1", torch::nn::BatchNorm2d(16))),
        conv2(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 3).padding(1)))),
        bn2(register_module("bn2", torch::nn::BatchNorm2d(32))),
        fc(register_module("fc", torch::nn::Linear(32 * 4 * 4, 10))) {}
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = torch::relu(bn1(conv1(x)));
    y = torch::max_pool2d(torch::relu(bn2(conv2(y))), 2);
    return fc(torch::flatten(y, 1));
  }
  torch::nn::Conv2d conv1;
  torch::nn::BatchNorm2d bn1;
  torch::nn::Conv2d conv2;
  torch::nn::BatchNorm2d bn2;
  torch::nn::Linear fc;
};
TORCH_MODULE(DigitsNet);

std::pair<at::Tensor, at::Tensor> split(const std::string& file) {
  auto t = fx::load_value(kDigits + file).toTuple();
  return {t->elements()[0].toTensor(), t->elements()[1].toTensor()};
}

double accuracy(DigitsNet& m, const at::Tensor& x, const at::Tensor& y) {
  torch::NoGradGuard no_grad;
  m->eval();
  return m->forward(x).argmax(1).eq(y).to(torch::kDouble).mean().item<double>();
}

TEST(AotDigits, TrainsLikeEager) {
  if (!std::filesystem::exists(kDigits + "digits.train_data.pt"))
    GTEST_SKIP() << "no digits data: run ctest -R aot_digits (python/digits_fixture.py writes it)";
  auto [xtr, ytr] = split("digits.train_data.pt");
  auto [xte, yte] = split("digits.test.pt");
  ASSERT_EQ(xtr.sizes(), (std::vector<int64_t>{1297, 1, 8, 8}));
  torch::manual_seed(0);
  DigitsNet eager;
  torch::manual_seed(0);
  DigitsNet compiled;
  fx::AotOptions options;
  options.partition_fn = fx::min_cut_rematerialization_partition;
  auto aot = fx::aot_module(compiled.ptr(), options);
  torch::optim::SGD opt_e(eager->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  torch::optim::SGD opt_c(compiled->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  const double before = accuracy(eager, xte, yte);
  const int64_t batch = 32;
  int steps = 0;
  for (int epoch = 0; epoch < 2; ++epoch) {
    eager->train();
    compiled->train();
    at::Tensor perm = torch::randperm(xtr.size(0), torch::TensorOptions().dtype(torch::kLong));
    for (int64_t i = 0; i + batch <= xtr.size(0); i += batch, ++steps) {
      at::Tensor idx = perm.slice(0, i, i + batch);
      at::Tensor x = xtr.index_select(0, idx), y = ytr.index_select(0, idx);
      opt_e.zero_grad();
      at::Tensor le = torch::nn::functional::cross_entropy(eager->forward(x), y);
      le.backward();
      opt_e.step();
      opt_c.zero_grad();
      at::Tensor lc = torch::nn::functional::cross_entropy(aot->forward(x), y);
      lc.backward();
      opt_c.step();
      ASSERT_LE(std::abs(lc.item<double>() - le.item<double>()), 1e-4 * le.item<double>()) << "step " << steps;
    }
  }
  EXPECT_EQ(steps, 80);
  const double acc_e = accuracy(eager, xte, yte), acc_c = accuracy(compiled, xte, yte);
  EXPECT_EQ(acc_c, acc_e);
  EXPECT_GT(acc_e, 0.9) << "trained from " << before;
  // One trace for training (the eval passes above ran the module itself).
  EXPECT_EQ(aot->num_traces(), 1u);
}

}  // namespace

namespace {

// The path Python users take: a model exported with torch.jit.script (in
// training mode, digits.train.pt) or torch.jit.trace (digits.trace.pt),
// imported, compiled for training; one step against the TorchScript module
// itself run by libtorch's autograd: the same loss, gradients and buffers.
void expect_imported_trains_like_torchscript(const std::string& file) {
  if (!std::filesystem::exists(kDigits + file)) GTEST_SKIP() << "no " << file << ": run ctest -R aot_digits";
  // Held-out images: the exported model was trained on the others, whose loss
  // (1e-3) leaves gradients of rounding size.
  auto [xte, yte] = split("digits.test.pt");
  at::Tensor x = xte.slice(0, 0, 64), y = yte.slice(0, 0, 64);
  torch::jit::Module eager = torch::jit::load(kDigits + file);
  eager.train();
  auto gm = fx::import_torchscript(kDigits + file);
  gm->train();
  auto aot = fx::aot_module(gm, fx::AotOptions{fx::min_cut_partition()});
  at::Tensor le = torch::nn::functional::cross_entropy(eager.forward({x}).toTensor(), y);
  le.backward();
  at::Tensor lc = torch::nn::functional::cross_entropy(aot->forward(x), y);
  lc.backward();
  EXPECT_LE(std::abs(lc.item<double>() - le.item<double>()), 1e-5 * le.item<double>()) << file;
  EXPECT_GT(le.item<double>(), 1e-3) << file << ": held-out data the model does not fit exactly (7e-3 here)";
  std::map<std::string, at::Tensor> compiled;
  for (const auto& p : gm->named_parameters()) compiled[p.key()] = p.value();
  size_t compared = 0;
  for (const auto& p : eager.named_parameters()) {
    auto it = compiled.find(p.name);
    ASSERT_NE(it, compiled.end()) << file << ": " << p.name;
    ASSERT_TRUE(it->second.grad().defined()) << file << ": " << p.name;
    const double scale = p.value.grad().abs().max().item<double>();
    EXPECT_LE((it->second.grad() - p.value.grad()).abs().max().item<double>(), 1e-4 * scale) << file << ": " << p.name;
    ++compared;
  }
  EXPECT_EQ(compared, 10u) << file;  // conv1, bn1, conv2, bn2, fc: weight and bias each
  std::map<std::string, at::Tensor> buffers;
  for (const auto& b : gm->named_buffers()) buffers[b.key()] = b.value();
  for (const auto& b : eager.named_buffers()) {
    auto it = buffers.find(b.name);
    ASSERT_NE(it, buffers.end()) << file << ": " << b.name;
    EXPECT_TRUE(it->second.to(torch::kDouble).allclose(b.value.to(torch::kDouble), 1e-5, 1e-7)) << file << ": " << b.name;
  }
}

TEST(AotDigits, ScriptedExportTrainsLikeTorchScript) { expect_imported_trains_like_torchscript("digits.train.pt"); }

TEST(AotDigits, TracedExportTrainsLikeTorchScript) { expect_imported_trains_like_torchscript("digits.trace.pt"); }

}  // namespace
