// fx::aot_module / aot_function: joint graphs, partitions, and training
// steps equal to eager libtorch.
#include <fx/aot.h>

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace {

torch::nn::Sequential small_convnet() {
  return torch::nn::Sequential(torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3).bias(false)),
                               torch::nn::BatchNorm2d(4), torch::nn::ReLU(), torch::nn::Flatten(),
                               torch::nn::Linear(4 * 6 * 6, 5));
}

// A deep copy of `m` (parameters and buffers cloned).
torch::nn::Sequential copy_of(const torch::nn::Sequential& m) {
  return std::dynamic_pointer_cast<torch::nn::SequentialImpl>(m->clone());
}

void expect_close(const at::Tensor& a, const at::Tensor& b, double rtol, const std::string& what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  const double err = (a - b).abs().max().item<double>();
  const double scale = b.abs().max().item<double>();
  EXPECT_LE(err, rtol * std::max(scale, 1e-6)) << what << ": max error " << err << " scale " << scale;
}

TEST(AotModule, TrainingStepEqualsEager) {
  torch::manual_seed(0);
  auto eager = small_convnet();
  auto compiled_net = copy_of(eager);
  auto aot = fx::aot_module(compiled_net.ptr());
  at::Tensor x = torch::randn({2, 3, 8, 8});

  at::Tensor ye = eager->forward(x);
  ye.pow(2).sum().backward();
  at::Tensor yc = aot->forward(x);
  yc.pow(2).sum().backward();

  expect_close(yc, ye, 1e-5, "output");
  auto pe = eager->named_parameters(), pc = compiled_net->named_parameters();
  for (const auto& p : pe) {
    ASSERT_TRUE(pc[p.key()].grad().defined()) << p.key();
    expect_close(pc[p.key()].grad(), p.value().grad(), 1e-4, "grad of " + p.key());
  }
  auto be = eager->named_buffers(), bc = compiled_net->named_buffers();
  for (const auto& b : be) expect_close(bc[b.key()], b.value(), 1e-5, "buffer " + b.key());
  // functorch 1.13's default_partition saves 11 values of this network too.
  EXPECT_EQ(aot->graphs().partitioned.saved.size(), 11u);
}

}  // namespace
