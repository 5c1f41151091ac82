#pragma once
/// \file
/// convert (torch.ao.quantization.quantize_fx.convert_to_reference_fx): the
/// reference quantized graph of a calibrated prepared module.
///
/// Every observer node becomes quantize → dequantize with the observer's
/// qparams as buffers of the root (`<observed node>_scale_0` float32,
/// `<observed node>_zero_point_0` int64, 0-dim, as Python registers them):
///
///     x_scale_0 = self.x_scale_0;  x_zero_point_0 = self.x_zero_point_0
///     quantize_per_tensor = torch.ops.aten.quantize_per_tensor(x, x_scale_0, x_zero_point_0, torch.quint8)
///     dequantize = quantize_per_tensor.dequantize()
///
/// Unlike Python, whose reference conv/linear modules quantize their weight
/// inside forward, a quantized conv / linear layer becomes functional ATen
/// calls with the weight's quantize/dequantize in the graph, so that a
/// lowering pass sees the whole pattern
///
///     dequantize(x) ─┐
///     dequantize(quantize_per_channel(weight, weight_scale, weight_zero_point, 0, qint8)) ─ aten::conv2d (+ aten::relu) → quantize_per_tensor → dequantize
///
/// with weight, bias, weight_scale and weight_zero_point as attributes of a
/// module at the layer's old name ("layer1.0.conv1.weight_scale"). The node
/// computing the layer keeps the layer's node name. The weight qparams are
/// those of the qconfig's weight observer run on the (fused) weight, as
/// convert_fx computes them. The result runs with forward(), prints with
/// print_readable() and saves with fx::save.

#include <fx/graph_module.h>
#include <fx/quantization/prepare.h>

#include <memory>
#include <string>
#include <vector>

namespace fx::quantization {

/// What convert() did.
struct ConvertReport {
  /// One entry per computing node of the prepared graph (observers
  /// excluded), with the layer's quantization ("ConvReLU2d: weight qint8
  /// torch.per_channel_symmetric") or why it stays float.
  std::vector<NodeQuantization> nodes;
  /// quantize_per_tensor / quantize_per_channel nodes made from activation observers.
  size_t activation_quantize_nodes = 0;
  /// Layers whose weight is quantized.
  size_t quantized_weights = 0;
  /// One line per node, as PrepareReport::str().
  std::string str() const;
};

/// convert_to_reference_fx(prepared): a new GraphModule (see the file
/// comment); `prepared` is never changed. Throws fx::Error for a module
/// without observers ("convert: the module has no observers: prepare() it
/// first"), one that was not calibrated ("convert: observer
/// 'activation_post_process_0' (observing 'x') saw no data: calibrate the
/// prepared module (call forward on sample inputs) before convert") and one
/// in training mode.
std::shared_ptr<GraphModule> convert(const std::shared_ptr<GraphModule>& prepared, ConvertReport* report = nullptr);

}  // namespace fx::quantization
