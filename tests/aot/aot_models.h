#pragma once
// Models the training-graph tests compile, written the way C++ users write
// them (torchvision's architectures with torch::nn layers); ResNet comes
// from tests/trace/trace_models.h.

#include "../trace/trace_models.h"

#include <fx/graph_module.h>

#include <torch/torch.h>

#include <string>
#include <vector>

namespace fx::aot_test {

/// torchvision's Conv2dNormActivation with ReLU6 (in place, as torchvision's).
struct ConvBnRelu6Impl : torch::nn::Module {
  ConvBnRelu6Impl(int64_t in, int64_t out, int64_t kernel, int64_t stride = 1, int64_t groups = 1)
      : conv(register_module("0", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, kernel)
                                                        .stride(stride)
                                                        .padding((kernel - 1) / 2)
                                                        .groups(groups)
                                                        .bias(false)))),
        bn(register_module("1", torch::nn::BatchNorm2d(out))),
        act(register_module("2", torch::nn::ReLU6(torch::nn::ReLU6Options().inplace(true)))) {}
  at::Tensor forward(const at::Tensor& x) { return act(bn(conv(x))); }
  torch::nn::Conv2d conv;
  torch::nn::BatchNorm2d bn;
  torch::nn::ReLU6 act;
};
TORCH_MODULE(ConvBnRelu6);

/// torchvision's InvertedResidual (MobileNetV2).
struct InvertedResidualImpl : torch::nn::Module {
  InvertedResidualImpl(int64_t in, int64_t out, int64_t stride, int64_t expand)
      : use_residual(stride == 1 && in == out) {
    const int64_t hidden = in * expand;
    torch::nn::Sequential layers;
    if (expand != 1) layers->push_back(ConvBnRelu6(in, hidden, 1));
    layers->push_back(ConvBnRelu6(hidden, hidden, 3, stride, hidden));
    layers->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(hidden, out, 1).bias(false)));
    layers->push_back(torch::nn::BatchNorm2d(out));
    conv = register_module("conv", layers);
  }
  at::Tensor forward(const at::Tensor& x) { return use_residual ? x + conv->forward(x) : conv->forward(x); }
  bool use_residual;
  torch::nn::Sequential conv{nullptr};
};
TORCH_MODULE(InvertedResidual);

/// torchvision's mobilenet_v2 (width 1.0, dropout 0.2).
struct MobileNetV2Impl : torch::nn::Module {
  explicit MobileNetV2Impl(int64_t classes = 1000) {
    const int64_t settings[7][4] = {{1, 16, 1, 1},  {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                                    {6, 96, 3, 1},  {6, 160, 3, 2}, {6, 320, 1, 1}};
    torch::nn::Sequential f;
    f->push_back(ConvBnRelu6(3, 32, 3, 2));
    int64_t in = 32;
    for (const auto& s : settings) {
      for (int64_t i = 0; i < s[2]; ++i) {
        f->push_back(InvertedResidual(in, s[1], i == 0 ? s[3] : 1, s[0]));
        in = s[1];
      }
    }
    f->push_back(ConvBnRelu6(in, 1280, 1));
    features = register_module("features", f);
    classifier = register_module("classifier",
                                 torch::nn::Sequential(torch::nn::Dropout(0.2), torch::nn::Linear(1280, classes)));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = features->forward(x);
    y = torch::nn::functional::adaptive_avg_pool2d(y, torch::nn::functional::AdaptiveAvgPool2dFuncOptions({1, 1}));
    return classifier->forward(torch::flatten(y, 1));
  }
  torch::nn::Sequential features{nullptr}, classifier{nullptr};
};
TORCH_MODULE(MobileNetV2);

/// A sequence classifier over libtorch's LSTM.
struct LstmClassifierImpl : torch::nn::Module {
  LstmClassifierImpl()
      : lstm(register_module("lstm", torch::nn::LSTM(torch::nn::LSTMOptions(8, 16).batch_first(true)))),
        head(register_module("head", torch::nn::Linear(16, 3))) {}
  at::Tensor forward(const at::Tensor& x) {
    auto out = std::get<0>(lstm->forward(x));
    return head(out.select(1, -1));
  }
  torch::nn::LSTM lstm;
  torch::nn::Linear head;
};
TORCH_MODULE(LstmClassifier);

/// The call_function targets of a graph, in order.
inline std::vector<std::string> call_targets(const fx::GraphModule& gm) {
  std::vector<std::string> out;
  for (fx::Node* n : gm.graph().nodes())
    if (n->op() == fx::Opcode::CallFunction) out.push_back(n->target());
  return out;
}

/// Batch-norm statistics of order 1: a few train-mode passes on `x`.
template <class M>
void settle_batch_norm(M& m, const at::Tensor& x) {
  torch::NoGradGuard no_grad;
  m->train();
  for (int i = 0; i < 3; ++i) m->forward(x);
}

}  // namespace fx::aot_test
