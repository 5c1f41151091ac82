#pragma once
/// \file
/// QConfig and QConfigMapping (torch.ao.quantization.qconfig /
/// qconfig_mapping): which observers watch a node's activations and
/// weights, chosen per module name, per module type or function target, or
/// globally. A null QConfig keeps the node in float.

#include <fx/quantization/observers.h>

#include <map>
#include <memory>
#include <optional>
#include <string>

namespace fx::quantization {

/// The observers of one node (torch.ao.quantization.QConfig).
struct QConfig {
  /// Makes the observer of activations (inputs and output).
  ObserverFactory activation;
  /// Makes the observer of weights (conv / linear).
  ObserverFactory weight;
  /// default_reuse_input_qconfig: no observer of its own, the output reuses
  /// the input's (Python's ReuseInputObserver; "reshape" in the default mapping).
  bool reuse_input = false;
};

/// A QConfig or nullptr (QConfigAny): nullptr keeps a node in float.
using QConfigPtr = std::shared_ptr<const QConfig>;

/// A QConfig as one line of JSON (node meta "qconfig" of prepared graphs, saved with fx::save).
std::string qconfig_to_string(const QConfig& qconfig);
/// The QConfig qconfig_to_string wrote; fx::Error if `text` is not one.
QConfigPtr qconfig_from_string(const std::string& text);

/// Which QConfig each node gets (torch.ao.quantization.QConfigMapping).
///
/// Lookup, most specific first (Python's precedence): for a call_module
/// node, set_module_name of its qualified name, then set_object_type of
/// its class name ("Conv2d"; a fused "ConvReLU2d" also finds "Conv2d"),
/// then set_module_name of each enclosing module (innermost first), then
/// set_global. For a call_function node, set_object_type of its target
/// ("aten::add" also covers aten::add_ and every overload of either), then
/// set_global. Unlike Python, a function call does not inherit the
/// module_name entry of the module it was traced in (fxcpp's graphs do not
/// record that scope).
class QConfigMapping {
 public:
  /// The QConfig of every node nothing more specific covers.
  QConfigMapping& set_global(QConfigPtr qconfig);
  /// By module class name ("Conv2d", "Linear", "ReLU") or function target ("aten::add").
  QConfigMapping& set_object_type(const std::string& type_or_target, QConfigPtr qconfig);
  /// By module qualified name ("layer1.0.conv1"); covers its submodules too.
  QConfigMapping& set_module_name(const std::string& name, QConfigPtr qconfig);

  /// The QConfig of a call_module node (see the class comment).
  QConfigPtr for_module(const std::string& qualified_name, const std::string& type) const;
  /// The QConfig of a call_function / call_method node.
  QConfigPtr for_function(const std::string& target) const;

  /// The global QConfig.
  const QConfigPtr& global() const { return global_; }

  /// This mapping with every QConfig in it (global, by object type, by
  /// module name) passed through fx::quantization::with_weight_range.
  QConfigMapping with_weight_range(int64_t quant_min, int64_t quant_max) const;
  /// This mapping with `bits`-bit weights: 8 is the mapping as it is, 7 is
  /// with_weight_range(-64, 63) (kMin7BitWeight, kMax7BitWeight: exact on
  /// oneDNN's int8 kernels without VNNI). fx::Error "with_weight_bits: weights
  /// take 7 or 8 bits, got N" for any other count.
  QConfigMapping with_weight_bits(int bits) const;

 private:
  QConfigPtr global_;
  std::map<std::string, QConfigPtr> object_types_;
  std::map<std::string, QConfigPtr> module_names_;
};

/// `qconfig` with its weights quantized to the integers [quant_min,
/// quant_max]: its weight observer (or fake quantizer) gets that custom range,
/// as torch.ao's `PerChannelMinMaxObserver.with_args(quant_min=-64,
/// quant_max=63, ...)`; nullptr stays nullptr. (-64, 63), 7-bit weights, lets
/// oneDNN's int8 kernels run exactly on CPUs without VNNI (fx/onednn_int8.h:
/// kMaxWeightFor16BitSums), where 8-bit weights compute in float32; it costs
/// half the weights' resolution. fx::Error unless -128 <= quant_min < 0 <
/// quant_max <= 127 (symmetric qint8 weights).
QConfigPtr with_weight_range(const QConfigPtr& qconfig, int64_t quant_min, int64_t quant_max);

/// The range of 7-bit weights, [-64, 63] (QConfigMapping::with_weight_bits(7)).
inline constexpr int64_t kMin7BitWeight = -64;
/// See kMin7BitWeight.
inline constexpr int64_t kMax7BitWeight = 63;

/// A function target without overload and in-place suffix: "aten::add_.Tensor" → "aten::add".
std::string canonical_function(const std::string& target);

/// get_default_qconfig(backend): "onednn" (HistogramObserver activations,
/// per-channel symmetric qint8 weights), "fbgemm" / "x86" (the same with
/// reduce_range activations) or "qnnpack" (MinMax activations, per-tensor
/// weights). Other names are an fx::Error listing these.
QConfigPtr get_default_qconfig(const std::string& backend = "onednn");

/// get_default_qconfig_mapping(backend): the global default qconfig,
/// fixed-qparams observers for sigmoid / hardsigmoid / softmax (scale 1/256,
/// zero point 0) and tanh (2/256, 128), and "reshape" reusing its input's observer.
QConfigMapping get_default_qconfig_mapping(const std::string& backend = "onednn");

/// get_default_qat_qconfig(backend) (Python 1.13's version 1): activations
/// FusedMovingAvgObsFakeQuantize of a MovingAverageMinMaxObserver (quint8,
/// 0..255, reduce_range for "fbgemm" / "x86"), weights
/// FusedMovingAvgObsFakeQuantize of a MovingAveragePerChannelMinMaxObserver
/// (qint8, -128..127, per-channel symmetric; per-tensor for "qnnpack").
QConfigPtr get_default_qat_qconfig(const std::string& backend = "onednn");

/// get_default_qat_qconfig_mapping(backend): as get_default_qconfig_mapping,
/// with get_default_qat_qconfig and FixedQParamsFakeQuantize for the fixed-qparams ops.
QConfigMapping get_default_qat_qconfig_mapping(const std::string& backend = "onednn");

/// A per-tensor MinMax QConfig: MinMaxObserver (quint8, per-tensor affine)
/// activations, MinMaxObserver (qint8, per-tensor symmetric) weights;
/// `moving_average` uses MovingAverageMinMaxObserver for activations.
QConfigPtr per_tensor_minmax_qconfig(bool moving_average = false);

}  // namespace fx::quantization
