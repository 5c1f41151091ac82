#pragma once
// Models the symbolic_trace tests trace: written the way C++ users write
// them, with torch::nn layers, ATen functions and Tensor methods.

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/rnn.h>
#include <torch/nn/pimpl.h>

#include <string>
#include <tuple>
#include <vector>

namespace fx::trace_test {

/// torchvision's BasicBlock: two 3x3 convs, a residual, optional downsample.
struct BasicBlockImpl : torch::nn::Module {
  BasicBlockImpl(int64_t in, int64_t out, int64_t stride)
      : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3)
                                                             .stride(stride)
                                                             .padding(1)
                                                             .bias(false)))),
        bn1(register_module("bn1", torch::nn::BatchNorm2d(out))),
        conv2(register_module("conv2",
                              torch::nn::Conv2d(torch::nn::Conv2dOptions(out, out, 3).padding(1).bias(false)))),
        bn2(register_module("bn2", torch::nn::BatchNorm2d(out))) {
    if (stride != 1 || in != out) {
      downsample = register_module(
          "downsample",
          torch::nn::Sequential(torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)),
                                torch::nn::BatchNorm2d(out)));
    }
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor identity = x;
    at::Tensor out = at::relu(bn1(conv1(x)));
    out = bn2(conv2(out));
    if (downsample) identity = downsample->forward(x);
    out += identity;
    return at::relu(out);
  }
  torch::nn::Conv2d conv1;
  torch::nn::BatchNorm2d bn1;
  torch::nn::Conv2d conv2;
  torch::nn::BatchNorm2d bn2;
  torch::nn::Sequential downsample{nullptr};
};
TORCH_MODULE(BasicBlock);

/// torchvision's Bottleneck (ResNet-50): 1x1, 3x3, 1x1 convs, expansion 4.
struct BottleneckImpl : torch::nn::Module {
  BottleneckImpl(int64_t in, int64_t width, int64_t stride)
      : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, width, 1).bias(false)))),
        bn1(register_module("bn1", torch::nn::BatchNorm2d(width))),
        conv2(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(width, width, 3)
                                                             .stride(stride)
                                                             .padding(1)
                                                             .bias(false)))),
        bn2(register_module("bn2", torch::nn::BatchNorm2d(width))),
        conv3(register_module("conv3", torch::nn::Conv2d(torch::nn::Conv2dOptions(width, width * 4, 1).bias(false)))),
        bn3(register_module("bn3", torch::nn::BatchNorm2d(width * 4))) {
    if (stride != 1 || in != width * 4) {
      downsample = register_module(
          "downsample", torch::nn::Sequential(
                            torch::nn::Conv2d(torch::nn::Conv2dOptions(in, width * 4, 1).stride(stride).bias(false)),
                            torch::nn::BatchNorm2d(width * 4)));
    }
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor identity = x;
    at::Tensor out = at::relu(bn1(conv1(x)));
    out = at::relu(bn2(conv2(out)));
    out = bn3(conv3(out));
    if (downsample) identity = downsample->forward(x);
    out += identity;
    return at::relu(out);
  }
  torch::nn::Conv2d conv1;
  torch::nn::BatchNorm2d bn1;
  torch::nn::Conv2d conv2;
  torch::nn::BatchNorm2d bn2;
  torch::nn::Conv2d conv3;
  torch::nn::BatchNorm2d bn3;
  torch::nn::Sequential downsample{nullptr};
};
TORCH_MODULE(Bottleneck);

/// torchvision's ResNet, in C++: ResNet-18 (BasicBlock, {2,2,2,2}) or
/// ResNet-50 (Bottleneck, {3,4,6,3}).
struct ResNetImpl : torch::nn::Module {
  ResNetImpl(bool bottleneck, std::vector<int64_t> layers, int64_t classes = 1000)
      : conv1(register_module("conv1",
                              torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 64, 7).stride(2).padding(3).bias(false)))),
        bn1(register_module("bn1", torch::nn::BatchNorm2d(64))) {
    const int64_t expansion = bottleneck ? 4 : 1;
    int64_t in = 64;
    const int64_t widths[4] = {64, 128, 256, 512};
    for (int l = 0; l < 4; ++l) {
      torch::nn::Sequential seq;
      for (int64_t b = 0; b < layers[l]; ++b) {
        const int64_t stride = (b == 0 && l > 0) ? 2 : 1;
        if (bottleneck) {
          seq->push_back(Bottleneck(in, widths[l], stride));
        } else {
          seq->push_back(BasicBlock(in, widths[l], stride));
        }
        in = widths[l] * expansion;
      }
      stages.push_back(register_module("layer" + std::to_string(l + 1), seq));
    }
    fc = register_module("fc", torch::nn::Linear(512 * expansion, classes));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = at::relu(bn1(conv1(x)));
    y = at::max_pool2d(y, {3, 3}, {2, 2}, {1, 1});
    for (auto& s : stages) y = s->forward(y);
    y = at::adaptive_avg_pool2d(y, {1, 1});
    y = at::flatten(y, 1);
    return fc(y);
  }
  torch::nn::Conv2d conv1;
  torch::nn::BatchNorm2d bn1;
  std::vector<torch::nn::Sequential> stages;
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(ResNet);

/// The seed's ComplexModel: linear1 → relu → linear2.
struct ComplexModelImpl : torch::nn::Module {
  ComplexModelImpl()
      : linear1(register_module("linear1", torch::nn::Linear(10, 5))),
        linear2(register_module("linear2", torch::nn::Linear(5, 1))) {}
  at::Tensor forward(const at::Tensor& x) { return linear2(at::relu(linear1(x))); }
  torch::nn::Linear linear1;
  torch::nn::Linear linear2;
};
TORCH_MODULE(ComplexModel);

/// An LSTM encoder with a linear head; returns (scores, (h, c)).
struct Seq2VecImpl : torch::nn::Module {
  Seq2VecImpl()
      : lstm(register_module("lstm", torch::nn::LSTM(torch::nn::LSTMOptions(8, 16).num_layers(2)))),
        head(register_module("head", torch::nn::Linear(16, 4))) {}
  std::tuple<at::Tensor, std::tuple<at::Tensor, at::Tensor>> forward(const at::Tensor& x) {
    auto out = lstm(x);
    at::Tensor y = std::get<0>(out);
    return {head(y.select(0, -1)), std::get<1>(out)};
  }
  torch::nn::LSTM lstm;
  torch::nn::Linear head;
};
TORCH_MODULE(Seq2Vec);

/// The seed-003 model with data-dependent control flow.
struct AddMulModelImpl : torch::nn::Module {
  at::Tensor forward(const at::Tensor& a, const at::Tensor& b) {
    if (a.sum().item<float>() > 0) return a + b;
    return a * b;
  }
};
TORCH_MODULE(AddMulModel);

}  // namespace fx::trace_test
