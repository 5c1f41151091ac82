// fx::make_fx: ATen-level capture below autograd, backward included.
#include "aot_models.h"

#include <fx/aot.h>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>

namespace {

using fx::aot_test::call_targets;

TEST(MakeFx, GradientOfAFunctionIsItsBackwardOps) {
  auto fn = [](std::vector<c10::IValue> a) -> c10::IValue {
    at::Tensor x = a[0].toTensor(), w = a[1].toTensor();
    at::Tensor y = torch::gelu(torch::mm(x, w)).sum();
    return torch::autograd::grad({y}, {w})[0];
  };
  torch::manual_seed(0);
  at::Tensor x = torch::randn({3, 4}), w = torch::randn({4, 5}).requires_grad_();
  auto gm = fx::make_fx(fn, {x, w});
  // Python 1.13: make_fx(f)(x, w) of the same function.
  EXPECT_EQ(call_targets(*gm), (std::vector<std::string>{"aten::mm", "aten::gelu", "aten::sum", "aten::ones_like",
                                                         "aten::expand", "aten::gelu_backward", "aten::t",
                                                         "aten::mm"}));
  at::Tensor expected = fn({x, w}).toTensor();
  at::Tensor got = gm->forward({x, w}).toTensor();
  EXPECT_TRUE(torch::allclose(got, expected, 1e-5, 1e-6));
}

// convolution_backward with an output mask returns undefined tensors in the
// masked-out places; the graph indexes the defined one.
TEST(MakeFx, MaskedOutResultsOfConvolutionBackward) {
  auto fn = [](std::vector<c10::IValue> a) -> c10::IValue {
    auto r = at::convolution_backward(a[0].toTensor(), a[1].toTensor(), a[2].toTensor(), c10::IntArrayRef{0},
                                      {1, 1}, {0, 0}, {1, 1}, false, {0, 0}, 1, {false, true, false});
    return std::get<1>(r);
  };
  torch::manual_seed(0);
  at::Tensor g = torch::randn({2, 4, 6, 6}), x = torch::randn({2, 3, 8, 8}), w = torch::randn({4, 3, 3, 3});
  auto gm = fx::make_fx(fn, {g, x, w});
  EXPECT_EQ(call_targets(*gm), (std::vector<std::string>{"aten::convolution_backward", "operator.getitem"}));
  EXPECT_TRUE(gm->forward({g, x, w}).toTensor().allclose(fn({g, x, w}).toTensor()));
}

}  // namespace
