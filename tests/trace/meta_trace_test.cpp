// Tracing on meta tensors (TraceOptions::real_values off): the graph and its
// tensor_meta are those of a trace on real values, the models compute what
// eager computes, and the operators without a meta kernel are listed.
#include <fx/examples/residual_net.h>
#include <fx/trace.h>

#include "../common/error_of.h"
#include "trace_models.h"
#include "trace_test_util.h"

#include <gtest/gtest.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/transformerlayer.h>

namespace fx {
namespace {

using trace_test::expect_same_as_eager;

TraceOptions values(bool real) {
  TraceOptions o;
  o.real_values = real;
  return o;
}

/// Traces `root` on meta and on real values: the same code and tensor_meta
/// on every node. Returns the operators the meta trace ran on zeros.
template <class M>
std::vector<std::string> same_as_real_trace(const M& root, const std::vector<c10::IValue>& inputs) {
  Tracer meta, real;
  meta.set_options(values(false));
  real.set_options(values(true));
  auto gm = to_graph_module(meta, meta.trace(root, inputs));
  auto gr = to_graph_module(real, real.trace(root, inputs));
  EXPECT_EQ(gm->code(), gr->code());
  std::vector<Node*> a(gm->graph().nodes().begin(), gm->graph().nodes().end());
  std::vector<Node*> b(gr->graph().nodes().begin(), gr->graph().nodes().end());
  EXPECT_EQ(a.size(), b.size());
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    auto ma = a[i]->meta().find("tensor_meta"), mb = b[i]->meta().find("tensor_meta");
    EXPECT_EQ(ma == a[i]->meta().end(), mb == b[i]->meta().end()) << a[i]->name();
    if (ma == a[i]->meta().end() || mb == b[i]->meta().end()) continue;
    if (auto* t = std::any_cast<TensorMetadata>(&ma->second)) {
      EXPECT_EQ(t->str(), std::any_cast<TensorMetadata>(mb->second).str()) << a[i]->name();
    } else {
      auto& la = std::any_cast<std::vector<TensorMetadata>&>(ma->second);
      auto& lb = std::any_cast<std::vector<TensorMetadata>&>(mb->second);
      EXPECT_EQ(la, lb) << a[i]->name();
    }
  }
  EXPECT_TRUE(real.meta_fallbacks().empty());
  return meta.meta_fallbacks();
}

TEST(MetaTrace, ResNet18MatchesTheRealTraceWithoutFallbacks) {
  torch::manual_seed(0);
  auto net = trace_test::ResNet(false, std::vector<int64_t>{2, 2, 2, 2}, 10);
  net->eval();
  EXPECT_EQ(same_as_real_trace(net.ptr(), {at::randn({1, 3, 64, 64})}), std::vector<std::string>{});
}

TEST(MetaTrace, ResNet50Bottlenecks) {
  torch::manual_seed(0);
  auto net = trace_test::ResNet(true, std::vector<int64_t>{3, 4, 6, 3}, 10);
  net->eval();
  EXPECT_EQ(same_as_real_trace(net.ptr(), {at::randn({1, 3, 64, 64})}), std::vector<std::string>{});
}

/// MobileNetV2's inverted residual: 1x1 expand, 3x3 depthwise, 1x1 project,
/// BatchNorm and ReLU6 between, the residual when the shape allows it.
struct InvertedResidualImpl : torch::nn::Module {
  InvertedResidualImpl(int64_t in, int64_t out, int64_t stride, int64_t expand) : residual(stride == 1 && in == out) {
    namespace nn = torch::nn;
    const int64_t hidden = in * expand;
    pw = register_module("pw", nn::Conv2d(nn::Conv2dOptions(in, hidden, 1).bias(false)));
    bn1 = register_module("bn1", nn::BatchNorm2d(hidden));
    dw = register_module("dw", nn::Conv2d(nn::Conv2dOptions(hidden, hidden, 3).stride(stride).padding(1).groups(hidden).bias(false)));
    bn2 = register_module("bn2", nn::BatchNorm2d(hidden));
    project = register_module("project", nn::Conv2d(nn::Conv2dOptions(hidden, out, 1).bias(false)));
    bn3 = register_module("bn3", nn::BatchNorm2d(out));
    act = register_module("act", nn::ReLU6());
  }
  at::Tensor forward(at::Tensor x) {
    at::Tensor y = bn3(project(act(bn2(dw(act(bn1(pw(x))))))));
    return residual ? x + y : y;
  }
  bool residual;
  torch::nn::Conv2d pw{nullptr}, dw{nullptr}, project{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr};
  torch::nn::ReLU6 act{nullptr};
};
TORCH_MODULE(InvertedResidual);

/// A small MobileNetV2 written with plain torch::nn.
struct MobileNetV2Impl : torch::nn::Module {
  MobileNetV2Impl() {
    namespace nn = torch::nn;
    stem = register_module("stem", nn::Conv2d(nn::Conv2dOptions(3, 16, 3).stride(2).padding(1).bias(false)));
    stem_bn = register_module("stem_bn", nn::BatchNorm2d(16));
    act = register_module("act", nn::ReLU6());
    b1 = register_module("b1", InvertedResidual(16, 8, 1, 1));
    b2 = register_module("b2", InvertedResidual(8, 12, 2, 6));
    b3 = register_module("b3", InvertedResidual(12, 12, 1, 6));
    head = register_module("head", nn::Linear(12, 10));
  }
  at::Tensor forward(at::Tensor x) {
    x = b3(b2(b1(act(stem_bn(stem(x))))));
    x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
    return head(torch::dropout(x, 0.2, is_training()));
  }
  torch::nn::Conv2d stem{nullptr};
  torch::nn::BatchNorm2d stem_bn{nullptr};
  torch::nn::ReLU6 act{nullptr};
  InvertedResidual b1{nullptr}, b2{nullptr}, b3{nullptr};
  torch::nn::Linear head{nullptr};
};
TORCH_MODULE(MobileNetV2);

TEST(MetaTrace, MobileNetV2MatchesTheRealTraceAndEager) {
  torch::manual_seed(0);
  MobileNetV2 net;
  net->eval();
  at::Tensor x = at::randn({2, 3, 32, 32});
  EXPECT_EQ(same_as_real_trace(net.ptr(), {x}), std::vector<std::string>{});
  auto gm = symbolic_trace(net, {x});  // on meta: the default
  at::NoGradGuard no_grad;
  EXPECT_TRUE(at::allclose(gm->forward(x), net->forward(x), 1e-5, 1e-6));
  at::Tensor y = at::randn({2, 3, 32, 32});
  EXPECT_TRUE(at::allclose(Interpreter(gm).run({y}).toTensor(), net->forward(y), 1e-5, 1e-6));
}

TEST(MetaTrace, TransformerEncoderLayer) {
  torch::manual_seed(0);
  auto layer = torch::nn::TransformerEncoderLayer(
      torch::nn::TransformerEncoderLayerOptions(16, 2).dim_feedforward(32).dropout(0.0));
  EXPECT_EQ(same_as_real_trace(layer.ptr(), {at::randn({5, 2, 16})}), std::vector<std::string>{});
}

TEST(MetaTrace, LstmTagger) {
  torch::manual_seed(0);
  auto net = trace_test::Seq2Vec();
  EXPECT_EQ(same_as_real_trace(net.ptr(), {at::randn({5, 3, 8})}), std::vector<std::string>{});
}

TEST(MetaTrace, ResidualNetTrainMode) {
  torch::manual_seed(0);
  auto net = examples::ResidualNet();
  net->train();
  EXPECT_EQ(same_as_real_trace(net.ptr(), {at::randn({2, 3, 16, 16})}), std::vector<std::string>{});
}

TEST(MetaTrace, OperatorsWithoutAMetaKernelRunOnZerosAndAreListed) {
  // libtorch 1.13 has no meta kernel for kthvalue.
  auto fn = [](std::vector<c10::IValue> a) -> c10::IValue {
    auto [values, indices] = at::kthvalue(a[0].toTensor(), 2, 1);
    return values * 2 + indices.to(at::kFloat);
  };
  Tracer tracer;
  auto gm = to_graph_module(tracer, tracer.trace(fn, {at::randn({3, 5})}));
  EXPECT_EQ(tracer.meta_fallbacks(), std::vector<std::string>{"aten::kthvalue"});
  at::Tensor x = at::randn({3, 5});
  EXPECT_TRUE(at::equal(gm->forward({x}).toTensor(), fn({x}).toTensor()));
  EXPECT_EQ(same_as_real_trace(fn, {at::randn({3, 5})}), std::vector<std::string>{"aten::kthvalue"});
}

TEST(MetaTrace, ProxiesReportTheInputDeviceAndReadingValuesStillFails) {
  auto fn = [](std::vector<c10::IValue> a) -> c10::IValue {
    at::Tensor x = a[0].toTensor();
    EXPECT_EQ(x.device(), c10::Device(c10::kCPU));
    return x + at::ones_like(x);
  };
  auto gm = symbolic_trace(fn, {at::randn({2})});
  at::Tensor x = at::randn({2});
  EXPECT_TRUE(at::equal(gm->forward({x}).toTensor(), x + 1));
  auto reads = [](std::vector<c10::IValue> a) -> c10::IValue {
    at::Tensor x = a[0].toTensor();
    return x.sum().item<float>() > 0 ? x : -x;
  };
  for (bool real : {false, true}) {
    EXPECT_EQ(fx_test::error_of([&] { symbolic_trace(reads, {at::randn({2})}, {}, values(real)); }),
              "symbolically traced variables cannot be used as inputs to control flow (aten::item reads the value of "
              "a traced tensor)");
  }
}

TEST(MetaTrace, TrainModeBatchNormLeavesTheModelsBuffersUntouched) {
  torch::manual_seed(0);
  auto net = examples::ResidualNet();
  net->train();
  const at::Tensor mean = net->bn1->running_mean.clone();
  const int64_t tracked = net->bn1->num_batches_tracked.item<int64_t>();
  auto gm = symbolic_trace(net, {at::randn({2, 3, 16, 16})});
  EXPECT_TRUE(at::equal(net->bn1->running_mean, mean));
  EXPECT_EQ(net->bn1->num_batches_tracked.item<int64_t>(), tracked);
  EXPECT_FALSE(net->bn1->running_mean.is_meta());
}

}  // namespace
}  // namespace fx
