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

namespace {

using Args = std::vector<c10::IValue>;

// An in-place write of an input becomes a functional operator and one copy_
// back at the end; the caller's tensor is not written while tracing.
TEST(MakeFx, InPlaceWriteOfAnInputIsCopiedBackAtTheEnd) {
  auto fn = [](Args a) -> c10::IValue {
    at::Tensor x = a[0].toTensor();
    x.add_(1);
    x.mul_(2);
    return x * 3;
  };
  at::Tensor x = torch::ones({2, 2});
  auto gm = fx::make_fx(fn, {x});
  EXPECT_TRUE(x.equal(torch::ones({2, 2}))) << "tracing wrote the caller's tensor";
  EXPECT_EQ(call_targets(*gm), (std::vector<std::string>{"aten::add.Scalar", "aten::mul.Scalar", "aten::mul.Scalar",
                                                         "aten::copy_"}));
  // Every node but the copy_ is free of side effects.
  for (fx::Node* n : gm->graph().nodes()) {
    if (n->op() == fx::Opcode::CallFunction) {
      EXPECT_EQ(n->is_impure(), n->target() == "aten::copy_") << n->name();
    }
  }
  at::Tensor y = torch::ones({2, 2});
  at::Tensor out = gm->forward({y}).toTensor();
  EXPECT_TRUE(out.equal(torch::full({2, 2}, 12.0)));
  EXPECT_TRUE(y.equal(torch::full({2, 2}, 4.0))) << "the input's write is replayed";
}

// A write through a view of a live value is recorded in place, as eager runs it.
TEST(MakeFx, WriteThroughAViewIsRecordedInPlace) {
  auto fn = [](Args a) -> c10::IValue {
    at::Tensor x = a[0].toTensor() * 1;
    at::Tensor row = x.select(0, 0);
    row.add_(10);
    return x;
  };
  at::Tensor x = torch::arange(6, torch::kFloat).reshape({2, 3});
  auto gm = fx::make_fx(fn, {x});
  EXPECT_TRUE(gm->forward({x}).toTensor().equal(fn({x}).toTensor()));
  const std::vector<std::string> targets = call_targets(*gm);
  EXPECT_NE(std::find(targets.begin(), targets.end(), "aten::add_.Scalar"), targets.end()) << ::testing::PrintToString(targets);
}

TEST(MakeFx, FactoriesAreRecorded) {
  auto fn = [](Args a) -> c10::IValue { return a[0].toTensor() + torch::arange(3, torch::kFloat); };
  auto gm = fx::make_fx(fn, {torch::zeros({3})});
  EXPECT_EQ(call_targets(*gm), (std::vector<std::string>{"aten::arange", "aten::add.Tensor"}));
  EXPECT_TRUE(gm->forward({torch::ones({3})}).toTensor().equal(torch::tensor({1.f, 2.f, 3.f})));
}

TEST(MakeFx, ReadingATracedValueIsAnError) {
  auto fn = [](Args a) -> c10::IValue {
    at::Tensor x = a[0].toTensor();
    return x.sum().item<float>() > 0 ? x : -x;
  };
  try {
    fx::make_fx(fn, {torch::ones({2})});
    FAIL() << "no error";
  } catch (const fx::TraceError& e) {
    EXPECT_EQ(std::string(e.what()),
              "make_fx: aten::_local_scalar_dense reads the value of a traced tensor (data-dependent control flow or "
              "item() cannot be captured in a graph)");
  }
}

TEST(MakeFx, NonTensorInputsAndOutputsAreErrors) {
  try {
    fx::make_fx([](Args a) -> c10::IValue { return a[0]; }, {c10::IValue(int64_t{3})});
    FAIL() << "no error";
  } catch (const fx::TraceError& e) {
    EXPECT_EQ(std::string(e.what()), "make_fx: example input 0 is a Int: the inputs of a traced function are tensors");
  }
  try {
    fx::make_fx([](Args) -> c10::IValue { return std::string("x"); }, {torch::ones({1})});
    FAIL() << "no error";
  } catch (const fx::TraceError& e) {
    EXPECT_EQ(std::string(e.what()),
              "make_fx: the traced function returned a String at output: outputs are tensors, None, and tuples or "
              "lists of them");
  }
}

TEST(MakeFx, RandomOpsLeaveTheGeneratorAsItWas) {
  auto fn = [](Args a) -> c10::IValue { return torch::dropout(a[0].toTensor(), 0.5, true); };
  torch::manual_seed(3);
  at::Tensor x = torch::ones({64});
  auto state = at::Generator(at::detail::getDefaultCPUGenerator()).get_state();
  auto gm = fx::make_fx(fn, {x});
  at::Generator(at::detail::getDefaultCPUGenerator()).set_state(state);
  at::Tensor eager = fn({x}).toTensor();
  at::Generator(at::detail::getDefaultCPUGenerator()).set_state(state);
  EXPECT_TRUE(gm->forward({x}).toTensor().equal(eager)) << "the graph draws the same mask as eager";
}

}  // namespace

namespace {

// Traced on meta values (as torch.fx's make_fx takes fake / meta tensors):
// nothing is computed, the graph is the one real values give, and its
// tensor_meta has the real shapes.
TEST(MakeFx, MetaInputsGiveTheGraphRealInputsGive) {
  auto fn = [](std::vector<c10::IValue> a) -> c10::IValue {
    at::Tensor x = a[0].toTensor(), w = a[1].toTensor();
    at::Tensor y = torch::gelu(torch::mm(x, w)).sum();
    return torch::autograd::grad({y}, {w})[0];
  };
  at::Tensor x = torch::randn({3, 4}), w = torch::randn({4, 5}).requires_grad_();
  auto real = fx::make_fx(fn, {x, w});
  auto meta = fx::make_fx(fn, {x.to(at::kMeta), w.detach().to(at::kMeta).requires_grad_()});
  EXPECT_EQ(call_targets(*meta), call_targets(*real));
  EXPECT_EQ(meta->code(), real->code());
  EXPECT_TRUE(torch::allclose(meta->forward({x, w}).toTensor(), fn({x, w}).toTensor(), 1e-5, 1e-6));
}

}  // namespace

namespace {

TEST(MakeFx, MetaInputsThroughConvolutionAndBatchNormBackward) {
  auto fn = [](std::vector<c10::IValue> a) -> c10::IValue {
    at::Tensor x = a[0].toTensor(), w = a[1].toTensor(), g = a[2].toTensor(), b = a[3].toTensor();
    at::Tensor y = at::conv2d(x, w, {}, 1, 1);
    y = at::relu(at::batch_norm(y, g, b, {}, {}, true, 0.1, 1e-5, false));
    auto grads = torch::autograd::grad({y.sum()}, {w, g, b});
    return c10::ivalue::Tuple::create({grads[0], grads[1], grads[2]});
  };
  torch::manual_seed(0);
  std::vector<c10::IValue> real{torch::randn({2, 3, 8, 8}), torch::randn({4, 3, 3, 3}).requires_grad_(),
                                torch::rand({4}).requires_grad_(), torch::randn({4}).requires_grad_()};
  std::vector<c10::IValue> meta;
  for (const auto& v : real)
    meta.push_back(v.toTensor().detach().to(at::kMeta).requires_grad_(v.toTensor().requires_grad()));
  auto from_real = fx::make_fx(fn, real);
  auto from_meta = fx::make_fx(fn, meta);
  EXPECT_EQ(call_targets(*from_meta), call_targets(*from_real));
  auto want = fn(real).toTupleRef().elements();
  auto got = from_meta->forward(real).toTupleRef().elements();
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_TRUE(torch::allclose(got[i].toTensor(), want[i].toTensor(), 1e-4, 1e-5)) << i;
}

}  // namespace

namespace {

// A small CNN's training step written functionally (conv, batch norm, relu6,
// max pool, residual add, adaptive average pool, linear, cross-entropy), traced
// on meta values: no arithmetic and no memory for activations, the very ATen
// operators (forward and backward) a trace on real values records.
TEST(MakeFx, MetaTrainingStepOfACnn) {
  auto step = [](std::vector<c10::IValue> a) -> c10::IValue {
    at::Tensor x = a[0].toTensor(), labels = a[1].toTensor();
    at::Tensor w1 = a[2].toTensor(), g1 = a[3].toTensor(), b1 = a[4].toTensor(), w2 = a[5].toTensor(),
               fc = a[6].toTensor();
    at::Tensor y = at::hardtanh(at::batch_norm(at::conv2d(x, w1, {}, 1, 1), g1, b1, {}, {}, true, 0.1, 1e-5, false),
                                0, 6);
    y = at::max_pool2d(y, {2, 2});
    y = at::relu(at::conv2d(y, w2, {}, 1, 1) + y);
    y = at::flatten(at::adaptive_avg_pool2d(y, {1, 1}), 1);
    at::Tensor loss = torch::nn::functional::cross_entropy(at::linear(y, fc), labels);
    auto grads = torch::autograd::grad({loss}, {w1, g1, b1, w2, fc});
    return c10::ivalue::Tuple::create(std::vector<c10::IValue>(grads.begin(), grads.end()));
  };
  torch::manual_seed(0);
  std::vector<c10::IValue> real{torch::randn({4, 3, 16, 16}),
                                torch::randint(0, 10, {4}),
                                (torch::randn({8, 3, 3, 3}) * 0.3).requires_grad_(),
                                torch::rand({8}).requires_grad_(),
                                torch::randn({8}).requires_grad_(),
                                (torch::randn({8, 8, 3, 3}) * 0.2).requires_grad_(),
                                (torch::randn({10, 8}) * 0.3).requires_grad_()};
  std::vector<c10::IValue> meta;
  for (const auto& v : real)
    meta.push_back(v.toTensor().detach().to(at::kMeta).requires_grad_(v.toTensor().requires_grad()));
  auto from_real = fx::make_fx(step, real);
  auto from_meta = fx::make_fx(step, meta);
  EXPECT_GT(call_targets(*from_real).size(), 30u);
  EXPECT_EQ(call_targets(*from_meta), call_targets(*from_real));
  auto want = step(real).toTupleRef().elements();
  auto got = from_meta->forward(real).toTupleRef().elements();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_TRUE(torch::allclose(got[i].toTensor(), want[i].toTensor(), 1e-4, 1e-5)) << i;
}

}  // namespace
