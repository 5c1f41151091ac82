// Training through aot_module equals eager libtorch: losses, gradients and
// buffer updates, step after step, on the C++ models people write.
#include "aot_models.h"

#include <fx/aot.h>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>

namespace {

using fx::aot_test::call_targets;

double relative_error(const at::Tensor& got, const at::Tensor& want) {
  const double err = (got - want).abs().max().item<double>();
  return err / std::max(want.abs().max().item<double>(), 1e-12);
}

/// Trains two copies of a model (same seed) for `steps` SGD steps, one
/// eagerly, one through aot_module, drawing the same random numbers, and
/// compares every loss, gradient and buffer.
template <class M>
void expect_trains_like_eager(const std::function<M()>& make, const std::function<at::Tensor()>& input,
                              const fx::PartitionFn& partition, int steps = 2) {
  torch::manual_seed(7);
  M eager = make();
  torch::manual_seed(7);
  M compiled = make();
  fx::AotOptions options;
  options.partition_fn = partition;
  auto aot = fx::aot_module(compiled.ptr(), options);
  torch::optim::SGD opt_e(eager->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  torch::optim::SGD opt_c(compiled->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  for (int step = 0; step < steps; ++step) {
    torch::manual_seed(100 + step);
    at::Tensor x = input();
    auto gen_state = at::Generator(at::detail::getDefaultCPUGenerator()).get_state();
    opt_e.zero_grad();
    at::Tensor le = eager->forward(x).pow(2).mean();
    le.backward();
    at::Generator(at::detail::getDefaultCPUGenerator()).set_state(gen_state);
    opt_c.zero_grad();
    at::Tensor lc = aot->forward(x).pow(2).mean();
    lc.backward();
    // Activations of order 1: the loss is neither vanishing nor exploding.
    EXPECT_GT(le.item<double>(), 1e-3);
    EXPECT_LT(le.item<double>(), 1e3);
    EXPECT_LE(relative_error(lc, le), 1e-4) << "loss of step " << step;
    auto pe = eager->named_parameters(), pc = compiled->named_parameters();
    for (const auto& p : pe) {
      ASSERT_TRUE(pc[p.key()].grad().defined()) << p.key();
      EXPECT_LE(relative_error(pc[p.key()].grad(), p.value().grad()), 1e-4) << "grad of " << p.key() << ", step " << step;
    }
    auto be = eager->named_buffers(), bc = compiled->named_buffers();
    for (const auto& b : be)
      EXPECT_LE(relative_error(bc[b.key()].to(torch::kDouble), b.value().to(torch::kDouble)), 1e-5)
          << "buffer " << b.key() << ", step " << step;
    opt_e.step();
    opt_c.step();
  }
  EXPECT_EQ(aot->num_traces(), 1u);
}

at::Tensor images() { return torch::randn({2, 3, 32, 32}); }

TEST(AotTraining, Resnet18DefaultPartition) {
  expect_trains_like_eager<fx::trace_test::ResNet>(
      [] { return fx::trace_test::ResNet(false, std::vector<int64_t>{2, 2, 2, 2}, 10); }, images, fx::default_partition);
}

TEST(AotTraining, Resnet18MinCut) {
  expect_trains_like_eager<fx::trace_test::ResNet>(
      [] { return fx::trace_test::ResNet(false, std::vector<int64_t>{2, 2, 2, 2}, 10); }, images,
      fx::min_cut_rematerialization_partition);
}

// Dropout in train mode: the compiled forward draws the same masks as eager.
TEST(AotTraining, MobilenetV2WithDropoutMinCut) {
  expect_trains_like_eager<fx::aot_test::MobileNetV2>([] { return fx::aot_test::MobileNetV2(10); }, images,
                                                       fx::min_cut_rematerialization_partition);
}

TEST(AotTraining, TransformerEncoderLayer) {
  expect_trains_like_eager<torch::nn::TransformerEncoderLayer>(
      [] { return torch::nn::TransformerEncoderLayer(torch::nn::TransformerEncoderLayerOptions(64, 4).dim_feedforward(128)); },
      [] { return torch::randn({8, 2, 64}); }, fx::min_cut_rematerialization_partition);
}

TEST(AotTraining, LstmClassifier) {
  expect_trains_like_eager<fx::aot_test::LstmClassifier>([] { return fx::aot_test::LstmClassifier(); },
                                                          [] { return torch::randn({2, 5, 8}); }, fx::default_partition);
}

}  // namespace
