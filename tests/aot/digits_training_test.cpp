// Real training through fx::aot_module: sklearn's digits (python3-sklearn,
// written by python/digits_fixture.py with plain torch.save), a small CNN
// trained in C++ with torch::optim::SGD, once eagerly and once compiled:
// the same loss at every step and the same held-out accuracy.
#include <fx/aot.h>
#include <fx/tensor_file.h>
#include <fx_paths.h>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>

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
