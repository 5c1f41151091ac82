// fx::FusedSGD: libtorch SGD's update in one pass per parameter, equal to
// torch::optim::SGD step after step, its state and checkpoints SGD's.
#include <fx/fused_sgd.h>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <sstream>

namespace {

/// Convolution (weight channels-last when asked), batch norm and linear layer.
torch::nn::Sequential fused_sgd_net(bool channels_last) {
  torch::manual_seed(3);
  torch::nn::Sequential net(torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 8, 3).padding(1)),
                            torch::nn::BatchNorm2d(8), torch::nn::ReLU(), torch::nn::Flatten(),
                            torch::nn::Linear(8 * 5 * 5, 7));
  if (channels_last) {
    torch::NoGradGuard no_grad;
    for (auto& p : net->parameters())
      if (p.dim() == 4) p.set_data(p.contiguous(c10::MemoryFormat::ChannelsLast));
  }
  return net;
}

/// One step's gradients, the same for any optimizer: the loss of batch `k`.
void fused_sgd_backward(torch::nn::Sequential& net, int k) {
  torch::manual_seed(100 + k);
  at::Tensor x = torch::randn({4, 3, 5, 5});
  net->forward(x).pow(2).mean().backward();
}

void expect_same_tensors(const std::vector<at::Tensor>& want, const std::vector<at::Tensor>& got, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_TRUE(torch::allclose(want[i], got[i], 1e-6, 1e-7))
        << what << " " << i << ": max difference " << (want[i] - got[i]).abs().max().item<double>();
}

std::vector<at::Tensor> buffers_of(const torch::optim::Optimizer& opt, const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& p : params)
    out.push_back(static_cast<const torch::optim::SGDParamState&>(
                      *opt.state().at(c10::guts::to_string(p.unsafeGetTensorImpl())))
                      .momentum_buffer());
  return out;
}

/// Three steps of FusedSGD and of torch::optim::SGD from the same weights
/// and batches: the same parameters and momentum buffers after each.
void expect_like_sgd(const torch::optim::SGDOptions& options, bool channels_last, bool double_precision = false) {
  auto a = fused_sgd_net(channels_last), b = fused_sgd_net(channels_last);
  if (double_precision) {
    a->to(torch::kDouble);
    b->to(torch::kDouble);
  }
  torch::optim::SGD sgd(a->parameters(), options);
  fx::FusedSGD fused(b->parameters(), options);
  for (int k = 0; k < 3; ++k) {
    sgd.zero_grad();
    fused.zero_grad();
    if (double_precision) {
      torch::manual_seed(100 + k);
      at::Tensor x = torch::randn({4, 3, 5, 5}, torch::kDouble);
      a->forward(x).pow(2).mean().backward();
      b->forward(x).pow(2).mean().backward();
    } else {
      fused_sgd_backward(a, k);
      fused_sgd_backward(b, k);
    }
    sgd.step();
    fused.step();
    EXPECT_EQ(fused.fused_updates(), b->parameters().size());
    EXPECT_EQ(fused.unfused_updates(), 0u);
    expect_same_tensors(a->parameters(), b->parameters(), "parameter after step " + std::to_string(k));
    if (options.momentum() != 0)
      expect_same_tensors(buffers_of(sgd, a->parameters()), buffers_of(fused, b->parameters()),
                          "momentum buffer after step " + std::to_string(k));
    else
      EXPECT_TRUE(fused.state().empty());
  }
}

TEST(FusedSGD, PlainMatchesSGD) { expect_like_sgd(torch::optim::SGDOptions(0.1), false); }

TEST(FusedSGD, MomentumMatchesSGD) { expect_like_sgd(torch::optim::SGDOptions(0.1).momentum(0.9), false); }

TEST(FusedSGD, DampeningAndWeightDecayMatchSGD) {
  expect_like_sgd(torch::optim::SGDOptions(0.05).momentum(0.8).dampening(0.25).weight_decay(1e-2), false);
}

TEST(FusedSGD, NesterovMatchesSGD) {
  expect_like_sgd(torch::optim::SGDOptions(0.05).momentum(0.9).nesterov(true).weight_decay(5e-4), false);
}

TEST(FusedSGD, ChannelsLastWeightsMatchSGD) {
  expect_like_sgd(torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(1e-3), true);
}

TEST(FusedSGD, DoubleMatchesSGD) { expect_like_sgd(torch::optim::SGDOptions(0.1).momentum(0.9), false, true); }

TEST(FusedSGD, GradientInAnotherLayoutTakesSGDsOperations) {
  at::Tensor w0 = torch::randn({6, 4});
  at::Tensor pa = w0.clone().requires_grad_(), pb = w0.clone().requires_grad_();
  torch::optim::SGD sgd({pa}, torch::optim::SGDOptions(0.1).momentum(0.9));
  fx::FusedSGD fused({pb}, torch::optim::SGDOptions(0.1).momentum(0.9));
  for (int k = 0; k < 2; ++k) {
    at::Tensor g = torch::randn({4, 6}).t();  // [6, 4] with transposed strides
    pa.mutable_grad() = g.clone();
    pb.mutable_grad() = g;
    sgd.step();
    fused.step();
    EXPECT_EQ(fused.fused_updates(), 0u);
    EXPECT_EQ(fused.unfused_updates(), 1u);
    EXPECT_TRUE(torch::allclose(pa, pb, 0, 0)) << "step " << k;
  }
}

TEST(FusedSGD, ZeroGradSetsToNoneOrZeroes) {
  auto net = fused_sgd_net(false);
  fx::FusedSGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  fused_sgd_backward(net, 0);
  opt.zero_grad(false);
  for (const at::Tensor& p : net->parameters()) {
    ASSERT_TRUE(p.grad().defined());
    EXPECT_EQ(p.grad().abs().sum().item<float>(), 0.0f);
  }
  opt.zero_grad();
  for (const at::Tensor& p : net->parameters()) EXPECT_FALSE(p.grad().defined());
  opt.step();  // nothing to update
  EXPECT_EQ(opt.fused_updates() + opt.unfused_updates(), 0u);
}

TEST(FusedSGD, CheckpointLoadsIntoSGDAndBack) {
  const auto options = torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(1e-3);
  auto a = fused_sgd_net(false), b = fused_sgd_net(false);
  torch::optim::SGD sgd(a->parameters(), options);
  fx::FusedSGD fused(b->parameters(), options);
  for (int k = 0; k < 2; ++k) {
    sgd.zero_grad();
    fused.zero_grad();
    fused_sgd_backward(a, k);
    fused_sgd_backward(b, k);
    sgd.step();
    fused.step();
  }
  // FusedSGD's checkpoint read by torch::optim::SGD, and SGD's by FusedSGD.
  std::stringstream fused_file, sgd_file;
  torch::save(fused, fused_file);
  torch::save(sgd, sgd_file);
  torch::optim::SGD sgd_from_fused(b->parameters(), options);
  fx::FusedSGD fused_from_sgd(a->parameters(), options);
  torch::load(sgd_from_fused, fused_file);
  torch::load(fused_from_sgd, sgd_file);
  sgd_from_fused.zero_grad();
  fused_from_sgd.zero_grad();
  fused_sgd_backward(a, 2);
  fused_sgd_backward(b, 2);
  fused_from_sgd.step();
  sgd_from_fused.step();
  EXPECT_EQ(fused_from_sgd.fused_updates(), a->parameters().size());
  expect_same_tensors(a->parameters(), b->parameters(), "parameter after the resumed step");
}

TEST(FusedSGD, ClosureLossReturnedAndOptionsCheckedAsSGDs) {
  auto net = fused_sgd_net(false);
  fx::FusedSGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  at::Tensor loss = opt.step([&] {
    opt.zero_grad();
    at::Tensor l = net->forward(torch::ones({2, 3, 5, 5})).pow(2).mean();
    l.backward();
    return l;
  });
  ASSERT_TRUE(loss.defined());
  EXPECT_TRUE(loss.requires_grad());
  EXPECT_EQ(opt.fused_updates(), net->parameters().size());
  try {
    fx::FusedSGD bad(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9).dampening(0.1).nesterov(true));
    FAIL() << "nesterov with dampening accepted";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("Nesterov momentum requires a momentum and zero dampening"), std::string::npos);
  }
}

}  // namespace
