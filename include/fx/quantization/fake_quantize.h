#pragma once
/// \file
/// Fake quantizers (torch.ao.quantization.fake_quantize): the observers of
/// quantization-aware training. Each watches its input with an observer and
/// returns it quantized and dequantized again with the current scale and
/// zero point, so that training sees int8's rounding and clipping while the
/// gradient passes straight through (libtorch's own fake-quantize kernels and
/// their straight-through-estimator backward).
///
///  - FusedMovingAvgObsFakeQuantize (the default QAT qconfig's, Python 1.13's
///    version 1): observer update, qparams and fake quantization in one call
///    of `at::fused_moving_avg_obs_fake_quant`, as Python runs it;
///  - FakeQuantize: any observer, then `at::fake_quantize_per_tensor_affine` /
///    `fake_quantize_per_channel_affine` with the observer's qparams;
///  - FixedQParamsFakeQuantize: a FixedQParamsObserver's constant qparams
///    (sigmoid, tanh, softmax, hardsigmoid).
///
/// A FakeQuantize is an ObserverBase: prepare_qat inserts it where prepare
/// inserts observers (`activation_post_process_N`), and convert reads its
/// observer's calculate_qparams() like any observer's.

#include <fx/quantization/observers.h>

#include <memory>
#include <string>

namespace fx::quantization {

/// A fake quantizer (FakeQuantize / FusedMovingAvgObsFakeQuantize /
/// FixedQParamsFakeQuantize): buffers scale, zero_point, fake_quant_enabled,
/// observer_enabled, and its observer as child "activation_post_process"
/// (Python's state_dict names).
class FakeQuantize : public ObserverBase {
 public:
  /// `factory.type` names the fake quantizer, `factory.observer` its
  /// observer's class and `factory.options` the observer's arguments.
  /// fx::Error for an observer the fused kind cannot run (it needs
  /// MovingAverageMinMaxObserver or MovingAveragePerChannelMinMaxObserver) or a
  /// FixedQParamsFakeQuantize without a FixedQParamsObserver.
  explicit FakeQuantize(const ObserverFactory& factory);
  /// Observes `x` (observer enabled), updates scale and zero_point, returns
  /// `x` fake-quantized (fake quant enabled) or `x` itself (a copy for the
  /// fused kind, as the fused kernel returns).
  at::Tensor forward(const at::Tensor& x) override;
  /// The observer's calculate_qparams() (Python's FakeQuantize.calculate_qparams).
  std::pair<at::Tensor, at::Tensor> calculate_qparams() override;
  /// Whether the observer has seen data.
  bool has_observed() const override;
  /// Turns observation on or off (torch.ao.quantization.enable_observer / disable_observer).
  void enable_observer(bool on = true);
  /// Turns fake quantization on or off (enable_fake_quant / disable_fake_quant).
  void enable_fake_quant(bool on = true);
  /// Whether forward() observes.
  bool observer_enabled() const;
  /// Whether forward() fake-quantizes.
  bool fake_quant_enabled() const;
  /// The scale forward() quantizes with (float32; one per channel when per-channel).
  const at::Tensor& scale() const { return scale_; }
  /// The zero point forward() quantizes with (int32).
  const at::Tensor& zero_point() const { return zero_point_; }
  /// The observer (child "activation_post_process").
  ObserverBase& activation_post_process() const { return *observer_; }
  /// The observer's running min / max (its buffers min_val / max_val; undefined for a FixedQParamsObserver).
  const at::Tensor& running_min() const { return min_val_; }
  /// The observer's running max (see running_min).
  const at::Tensor& running_max() const { return max_val_; }
  /// Per-channel (weights) or per-tensor.
  bool is_per_channel() const;
  /// The factory that makes an equal, fresh fake quantizer.
  ObserverFactory factory() const;

 private:
  std::shared_ptr<ObserverBase> observer_;
  std::string observer_type_;
  at::Tensor scale_, zero_point_, fake_quant_enabled_, observer_enabled_;
  at::Tensor min_val_, max_val_;  // the observer's buffers (resized in place, never replaced)
  bool fused_ = false;
};

/// A new fake quantizer of `factory` (ObserverFactory::operator() calls it for fake-quantizer types).
std::shared_ptr<ObserverBase> make_fake_quantize(const ObserverFactory& factory);

/// The fake quantizer at `module`, or nullptr.
FakeQuantize* as_fake_quantize(torch::nn::Module& module);

/// Every fake quantizer of `module` and its submodules observes
/// (torch.ao.quantization.enable_observer applied with module.apply).
void enable_observer(torch::nn::Module& module);
/// ... stops observing: scales and zero points stay as they are (disable_observer).
void disable_observer(torch::nn::Module& module);
/// ... fake-quantizes (enable_fake_quant).
void enable_fake_quant(torch::nn::Module& module);
/// ... passes values through unquantized (disable_fake_quant).
void disable_fake_quant(torch::nn::Module& module);

/// A fake quantizer's options for fx::save: its factory and the sizes of its
/// per-channel state (a per-channel observer's min_val is empty until its
/// first forward, the scale one element until then).
nlohmann::json fake_quantize_to_json(const FakeQuantize& q);
/// A fake quantizer fake_quantize_to_json described, with buffers of the
/// sizes it recorded (fx::load then loads the saved values into them).
std::shared_ptr<FakeQuantize> fake_quantize_from_json(const nlohmann::json& j);

/// Registers FakeQuantize's forward and fx::save type (register_observer_modules calls it).
void register_fake_quantize_modules();

}  // namespace fx::quantization
