#pragma once
/// \file
/// oneDNN int8 kernels as call_function targets (what
/// fx::quantization::lower_to_onednn_int8 puts in a graph):
///
///   fxcpp::onednn_qconv2d(Tensor input, __torch__.torch.classes.fxcpp.PackedQConv packed,
///                         Tensor? residual=None) -> Tensor
///   fxcpp::onednn_qlinear(Tensor input, __torch__.torch.classes.fxcpp.PackedQLinear packed) -> Tensor
///
/// `input` (and `residual`) are quint8 per-tensor affine tensors (torch's
/// quantized tensors, as aten::quantize_per_tensor makes them) of the scale
/// and zero point the op was packed for; the result is a quint8 tensor of
/// the op's output scale and zero point (convolutions: channels_last), or
/// float32 when packed with output_float. Weights are int8, symmetric, one
/// scale per output channel, reordered once into the layout oneDNN's
/// fastest kernel wants (VNNI / AMX where the CPU has them). The int32
/// accumulator is requantised by oneDNN's output scales; bias, the residual
/// sum (with the residual's own scale and zero point) and the activation
/// are post-ops, so q(act(conv(dq(x)) + b + dq(r))) is one kernel.
/// Kernels are made per input shape on first use. Threads: at::set_num_threads.
///
/// Without VNNI (has_int8_dot_product() false: AVX2, or oneDNN held there)
/// oneDNN's int8 kernels sum u8 x s8 products in pairs into saturating 16-bit
/// integers, exact only while every |weight| <= kMaxWeightFor16BitSums. So
/// there a convolution or linear layer with larger weights (the 8 bits of the
/// default qconfigs) computes in float32 instead (computes_in_float), but for
/// depthwise convolutions, whose kernel widens first; 7-bit weights
/// (fx::quantization::with_weight_range(-64, 63)) run on the int8 kernels.

#include <fx/onednn.h>

namespace fx::onednn {

/// The largest |weight| oneDNN's int8 kernels compute exactly without VNNI:
/// 2 x 255 x 64 = 32640 fits the 16-bit sum of a u8 x s8 pair.
constexpr int64_t kMaxWeightFor16BitSums = 64;

/// A per-tensor affine quantization: real = scale * (q - zero_point).
struct QuantParams {
  double scale = 1.0;
  int64_t zero_point = 0;
  bool operator==(const QuantParams& o) const { return scale == o.scale && zero_point == o.zero_point; }
};

/// What an int8 packed operator is made of.
struct PackedQState {
  /// A 2-d convolution or a linear layer.
  PackedState::Kind kind = PackedState::Kind::Conv2d;
  /// int8 (torch.int8) [out, in / groups, kh, kw] or [out, in]: the quantized weight's integers.
  at::Tensor weight;
  /// float32 [out]: the weight's scale per output channel (zero points are 0).
  at::Tensor weight_scales;
  /// float32 [out], or none: the float bias, added before requantisation.
  c10::optional<at::Tensor> bias;
  /// Conv2d only.
  ConvParams params;
  /// The activation and whether a residual is summed (PostOps::sum).
  PostOps post_ops;
  /// The input's, the output's and (with post_ops.sum) the residual's quantization.
  QuantParams input, output, residual;
  /// Return float32 (the activation's real values) instead of quint8.
  bool output_float = false;
};

/// A packed int8 convolution (state.kind Conv2d) or linear layer (Linear).
/// Throws fx::Error for values it refuses (weight not int8, scales of
/// another length, scale <= 0, zero points outside [0, 255], an activation
/// oneDNN has no post-op for).
c10::IValue pack_int8(const PackedQState& state);

/// Whether `value` is a packed operator of pack_int8.
bool is_packed_int8(const c10::IValue& value);

/// The state of the int8 packed operator `packed` (fx::Error if it is not one).
PackedQState packed_int8_state(const c10::IValue& packed);

/// "QConv2d(64, 128, kernel=(3, 3), relu, scale=0.031, zero_point=0)": what it computes.
std::string describe_int8(const c10::IValue& packed);

/// The name of the oneDNN implementation the kernel for an input of `sizes`
/// uses ("brg:avx512_core_amx", "jit_int8:avx512_core_vnni", …; made if needed).
std::string int8_implementation(const c10::IValue& packed, at::IntArrayRef sizes);

/// Whether the int8 packed operator `packed` computes in float32 here rather
/// than on oneDNN's int8 kernels: no VNNI, weights beyond
/// kMaxWeightFor16BitSums and not a depthwise convolution (see the file comment).
bool int8_computes_in_float(const c10::IValue& packed);

}  // namespace fx::onednn
