#pragma once
/// \file
/// The demo model: a small residual convolutional network written with
/// plain torch::nn (convolution, batch norm, ReLU, a residual add, pooling,
/// a linear classifier). Header-only, so the demo, the examples and the
/// tests trace the very same code.
///
/// Layout (qualified names as symbolic_trace reports them):
///   conv1, bn1            stem: 3x3 conv → batch norm → relu → 2x2 max pool
///   block.conv1, block.bn1, block.conv2, block.bn2
///                         a BasicBlock: out = relu(bn2(conv2(relu(bn1(conv1(x))))) + x)
///   fc                    adaptive average pool → flatten → linear

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <cstdint>

namespace fx::examples {

/// out = relu(bn2(conv2(relu(bn1(conv1(x))))) + x), channel count preserved.
struct ResidualBlockImpl : torch::nn::Module {
  /// A block on `channels` channels.
  explicit ResidualBlockImpl(int64_t channels)
      : conv1(register_module(
            "conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(channels, channels, 3).padding(1).bias(false)))),
        bn1(register_module("bn1", torch::nn::BatchNorm2d(channels))),
        conv2(register_module(
            "conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(channels, channels, 3).padding(1).bias(false)))),
        bn2(register_module("bn2", torch::nn::BatchNorm2d(channels))) {}

  /// The block's output, same shape as `x`.
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor out = at::relu(bn1(conv1(x)));
    out = bn2(conv2(out));
    return at::relu(out + x);
  }

  torch::nn::Conv2d conv1;
  torch::nn::BatchNorm2d bn1;
  torch::nn::Conv2d conv2;
  torch::nn::BatchNorm2d bn2;
};
TORCH_MODULE(ResidualBlock);

/// The demo network: stem, one residual block, global pooling, classifier.
struct ResidualNetImpl : torch::nn::Module {
  /// Images with `in_channels` channels, `channels` feature maps, `classes` outputs.
  explicit ResidualNetImpl(int64_t in_channels = 3, int64_t channels = 16, int64_t classes = 10)
      : conv1(register_module(
            "conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(in_channels, channels, 3).padding(1).bias(false)))),
        bn1(register_module("bn1", torch::nn::BatchNorm2d(channels))),
        block(register_module("block", ResidualBlock(channels))),
        fc(register_module("fc", torch::nn::Linear(channels, classes))) {}

  /// Class scores [N, classes] for images [N, in_channels, H, W].
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = at::relu(bn1(conv1(x)));
    y = at::max_pool2d(y, {2, 2});
    y = block(y);
    y = at::adaptive_avg_pool2d(y, {1, 1}).flatten(1);
    return fc(y);
  }

  torch::nn::Conv2d conv1;
  torch::nn::BatchNorm2d bn1;
  ResidualBlock block;
  torch::nn::Linear fc;
};
TORCH_MODULE(ResidualNet);

}  // namespace fx::examples
