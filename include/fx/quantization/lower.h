#pragma once
/// \file
/// lower_to_onednn_int8: the reference quantized graph of convert() made
/// into oneDNN int8 kernels (as torch.ao.quantization's
/// _lower_to_native_backend makes it into quantized::conv2d & co, but with
/// fxcpp's own packed oneDNN primitives).
///
/// Patterns (the reference graph's dequantize / quantize_per_tensor nodes):
///  - dq(x) → aten::conv2d(·, dq(quantize_per_channel(w)), b) [→ relu] → q
///      becomes fxcpp::onednn_qconv2d(x_q, packed): u8 activations, s8
///      per-channel weights packed once, requantisation as oneDNN output
///      scales, bias and relu fused; the output is a quint8 tensor
///      (channels_last) with the q node's scale and zero point;
///  - the residual add of a ResNet block, add(dq(conv_out), dq(y)) [→ relu] → q,
///      is fused into the convolution as a sum post-op;
///  - dq(x) → aten::linear(·, dq(qw), b) [→ relu] → q: fxcpp::onednn_qlinear;
///  - dq → max_pool2d / flatten / reshape / view / relu / adaptive_avg_pool2d /
///      cat → q with the input's qparams: the op runs on the quint8 tensor;
/// Everything else stays as it was (float between dequantize and quantize,
/// the reference's arithmetic); the report says why for every node.
/// Numerics: each kernel rounds where the reference graph rounds (its result
/// at most one step from the reference's arithmetic); a fused residual sum
/// skips the rounding of the convolution's own output, so outputs can move
/// by a step more than the reference's.

#include <fx/graph_module.h>
#include <fx/quantization/prepare.h>

#include <memory>
#include <string>
#include <vector>

namespace fx::quantization {

/// What lower_to_onednn_int8 did.
struct LowerReport {
  /// One entry per computing node of the reference graph (quantize /
  /// dequantize nodes excluded): "int8 oneDNN convolution (relu, +residual)",
  /// "runs on quint8", or why it stays float.
  std::vector<NodeQuantization> nodes;
  /// int8 oneDNN kernels made (convolutions, linear layers).
  size_t int8_kernels = 0;
  /// Of those, the ones that compute in float32 on this CPU
  /// (onednn::int8_computes_in_float: no VNNI, weights beyond 7 bits).
  size_t float_kernels = 0;
  /// One line per node, as PrepareReport::str().
  std::string str() const;
};

/// The reference graph `reference` (convert()'s result) with its quantized
/// patterns made into oneDNN int8 kernels (see the file comment); a new
/// GraphModule holding only what the lowered graph reads (no float weights),
/// `reference` is never changed. Kernel nodes keep their layer's node name
/// ("layer1_0_conv1"). Throws
/// fx::Error for a graph that is not a reference quantized graph (no
/// quantize_per_tensor node to quint8) and for one in training mode.
std::shared_ptr<GraphModule> lower_to_onednn_int8(const std::shared_ptr<GraphModule>& reference,
                                                  LowerReport* report = nullptr);

}  // namespace fx::quantization
