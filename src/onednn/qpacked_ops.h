#pragma once
// Internal: the int8 packed oneDNN operators (torch custom classes) behind
// fxcpp::onednn_qconv2d and fxcpp::onednn_qlinear.
#include "onednn/context.h"
#include "onednn/packed_ops.h"

#include <fx/onednn_int8.h>

#include <torch/custom_class.h>

#include <tuple>

namespace fx::onednn::detail {

/// What both int8 kernels share: the state, packed s8 weights, the bias in
/// the accumulator's units, the requantisation (output scales, post-ops,
/// zero points).
class PackedQOp : public torch::CustomClassHolder {
 public:
  /// What the op is made of (pack_int8's argument).
  const PackedQState& state() const { return state_; }
  /// "QConv2d(…)": what the op computes.
  virtual std::string str() const = 0;
  /// The oneDNN implementation for an input of `sizes`.
  virtual std::string implementation(at::IntArrayRef sizes) const = 0;
  /// Whether the op computes in float32 instead of on oneDNN's int8 kernels
  /// (no VNNI, weights beyond 7 bits, not depthwise).
  virtual bool computes_in_float() const = 0;

 protected:
  PackedQOp(const PackedQState& state, const char* op, int64_t out_channels);
  /// Scratchpad, output scales, sum / activation post-ops and runtime zero points.
  dnnl::primitive_attr attr(int scale_mask) const;
  /// Checks `input` is quint8 with the packed input qparams ("what": the op's name).
  void check_input(const at::Tensor& input, const char* what) const;
  /// The output tensor (quint8 with the output qparams, or float), holding
  /// the residual's bytes when a residual is summed.
  at::Tensor make_output(at::IntArrayRef sizes, at::MemoryFormat format, const c10::optional<at::Tensor>& residual,
                         const char* what) const;
  /// Adds the bias (of layout `bias`) and the runtime zero points to `args`.
  void add_args(std::unordered_map<int, dnnl::memory>& args, const dnnl::memory::desc& bias) const;
  /// The reference arithmetic's end for the float path: activation, then quantize (or not).
  at::Tensor float_output(const at::Tensor& y) const;
  /// ", relu, scale=…, zero_point=…)": the end of str().
  std::string str_suffix() const;

  PackedQState state_;
  int64_t out_channels_;
  std::unique_ptr<PackedWeights> weights_;
  // s32 [out]: bias / (input scale * weight scale), rounded (minus a folded zero point), or undefined
  at::Tensor bias_;
  std::vector<float> output_scales_;
  bool real_domain_;  // the activation needs real values: a final linear post-op divides by the output scale
  int32_t src_zero_point_, dst_zero_point_;
  // Dequantized weights when this CPU's oneDNN int8 matmul would be wrong (no VNNI and weights
  // beyond 7 bits: its 16-bit sums saturate): the float path of linear layers, else undefined.
  at::Tensor float_weight_;
};

/// An int8 2-d convolution (channels_last in and out).
class PackedQConv : public PackedQOp {
 public:
  explicit PackedQConv(const PackedQState& state);
  /// q(act(conv(dq(input)) + bias [+ dq(residual)])), channels_last.
  at::Tensor run(const at::Tensor& input, const c10::optional<at::Tensor>& residual) const;
  std::string str() const override;
  std::string implementation(at::IntArrayRef sizes) const override;
  bool computes_in_float() const override { return float_conv_ != nullptr; }

 private:
  struct Kernel {
    dnnl::convolution_forward primitive;
    dnnl::memory weights;
    dnnl::memory::desc src, dst;
    size_t scratchpad_bytes;
    std::string implementation;
  };
  /// The kernel for an input of `sizes` (already padded when pad_input_).
  std::shared_ptr<const Kernel> kernel(at::IntArrayRef sizes) const;
  /// The output's sizes for an input of `sizes`: with the convolution's padding, or with the
  /// kernel's (none when pad_input_) for a padded input. Throws unless `sizes` is
  /// [N, in_channels_, H, W] with H and W at least the kernel's extent.
  std::vector<int64_t> output_sizes(at::IntArrayRef sizes, bool kernel_padding) const;
  /// The sizes the kernel sees for an input of `sizes` (grown by the padding when pad_input_).
  std::vector<int64_t> kernel_input_sizes(at::IntArrayRef sizes) const;
  /// `x` (quint8, channels_last) padded with its zero point, for a kernel without padding.
  at::Tensor padded(const at::Tensor& x) const;

  int64_t in_channels_, kh_, kw_;
  // A padded convolution whose input zero point is folded into the bias (see the constructor):
  // its input is padded with the zero point, the kernel has no padding.
  bool pad_input_ = false;
  // Without VNNI (but for depthwise convolutions and 7-bit weights): the float32 convolution of the
  // dequantized weights, bias and post-ops that runs instead, else null.
  std::unique_ptr<PackedConv> float_conv_;
  mutable KernelCache<std::vector<int64_t>, Kernel> kernels_;
};

/// An int8 linear layer (y = x W^T + b) on quint8 input [..., in_features].
class PackedQLinear : public PackedQOp {
 public:
  explicit PackedQLinear(const PackedQState& state);
  /// q(act(dq(input) W^T + bias)).
  at::Tensor run(const at::Tensor& input) const;
  std::string str() const override;
  std::string implementation(at::IntArrayRef sizes) const override;
  bool computes_in_float() const override { return float_weight_.defined(); }

 private:
  struct Kernel {
    dnnl::matmul primitive;
    dnnl::memory weights;
    dnnl::memory::desc src, dst;
    size_t scratchpad_bytes;
    std::string implementation;
  };
  std::shared_ptr<const Kernel> kernel(int64_t rows) const;

  int64_t in_features_;
  mutable KernelCache<int64_t, Kernel> kernels_;
};

/// A PackedQState as TorchScript pickles it: {op, activation},
/// {weight, weight_scales[, bias]}, and the numbers {stride (2), padding
/// (2), dilation (2), groups, alpha, beta, sum, input scale, input zero
/// point, output scale, output zero point, residual scale, residual zero
/// point, output_float}.
using PickledQState = std::tuple<std::vector<std::string>, std::vector<at::Tensor>, std::vector<double>>;
PickledQState pickled_int8(const PackedQState& state);
/// The PackedQState of a PickledQState (fx::Error for another form).
PackedQState unpickled_int8(const PickledQState& state);

/// The int8 packed op `packed` holds, or nullptr.
PackedQOp* find_packed_int8(const c10::IValue& packed);

}  // namespace fx::onednn::detail
