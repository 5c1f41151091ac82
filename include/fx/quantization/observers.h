#pragma once
/// \file
/// Observers (torch.ao.quantization.observer): modules that record the range
/// of the values flowing through them during calibration and turn it into a
/// scale and zero point. prepare() inserts them as `call_module` nodes named
/// `activation_post_process_N`; convert() reads calculate_qparams().
///
/// The arithmetic is Python 1.13's, op for op on ATen tensors (float32 where
/// Python computes in float32), so that the same data gives the same qparams:
/// MinMax and PerChannelMinMax exactly, Histogram's L2 search
/// (_non_linear_param_search, _combine_histograms, including its
/// `histc(min=int(min_val), max=int(max_val))`) to the last bit as well.

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>
#include <torch/nn/module.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace fx::quantization {

/// torch.per_tensor_affine ... (torch.qscheme).
enum class QScheme { PerTensorAffine, PerTensorSymmetric, PerChannelAffine, PerChannelSymmetric };

/// Python's name of a scheme ("torch.per_tensor_affine").
std::string qscheme_name(QScheme q);

/// The constructor arguments of every observer (Python's keyword arguments;
/// each observer reads the ones it has).
struct ObserverOptions {
  /// torch.quint8 (activations) or torch.qint8 (weights).
  c10::ScalarType dtype = c10::kQUInt8;
  /// The quantization scheme.
  QScheme qscheme = QScheme::PerTensorAffine;
  /// Halves the integer range (x86's vpmaddubsw); onednn's default is off.
  bool reduce_range = false;
  /// A custom integer range (both or neither).
  std::optional<int64_t> quant_min, quant_max;
  /// The smallest scale (torch.finfo(torch.float32).eps).
  double eps = std::numeric_limits<float>::epsilon();
  /// MovingAverageMinMaxObserver's averaging constant.
  double averaging_constant = 0.01;
  /// PerChannelMinMaxObserver's channel axis.
  int64_t ch_axis = 0;
  /// HistogramObserver's bins and upsample rate.
  int64_t bins = 2048, upsample_rate = 128;
  /// FixedQParamsObserver's scale and zero point.
  double scale = 1.0;
  /// FixedQParamsObserver's zero point.
  int64_t zero_point = 0;
};

/// The base of all observers (ObserverBase / UniformQuantizationObserverBase).
class ObserverBase : public torch::nn::Module {
 public:
  /// Builds the common state from `options` (qmin/qmax as calculate_qmin_qmax).
  ObserverBase(const std::string& type_name, const ObserverOptions& options);
  /// Records `x` (a floating-point tensor; an empty one is ignored) and returns it unchanged.
  virtual at::Tensor forward(const at::Tensor& x) = 0;
  /// The scale (float32) and zero point (int64) tensors: one element per
  /// tensor, one per channel for per-channel observers. An observer that saw
  /// nothing gives Python's default ([1.0], [0]); convert() refuses it first.
  virtual std::pair<at::Tensor, at::Tensor> calculate_qparams() = 0;
  /// Whether forward() has recorded any value.
  virtual bool has_observed() const = 0;
  /// Python's class name ("HistogramObserver").
  const std::string& type_name() const { return type_name_; }
  /// The options this observer was made with.
  const ObserverOptions& options() const { return options_; }
  /// The quantized dtype (torch.quint8 / torch.qint8).
  c10::ScalarType dtype() const { return options_.dtype; }
  /// The integer range.
  int64_t quant_min() const { return quant_min_; }
  /// The integer range.
  int64_t quant_max() const { return quant_max_; }

 protected:
  /// UniformQuantizationObserverBase._calculate_qparams(min_val, max_val).
  std::pair<at::Tensor, at::Tensor> calculate_qparams_from(const at::Tensor& min_val, const at::Tensor& max_val) const;

  std::string type_name_;
  ObserverOptions options_;
  int64_t quant_min_ = 0, quant_max_ = 255;
  bool has_customized_qrange_ = false;
  at::Tensor eps_;
};

/// Running min and max (MinMaxObserver); buffers min_val, max_val.
class MinMaxObserver : public ObserverBase {
 public:
  /// A MinMaxObserver (per-tensor schemes only, else fx::Error).
  explicit MinMaxObserver(const ObserverOptions& options = {});
  /// Records x (see ObserverBase::forward).
  at::Tensor forward(const at::Tensor& x) override;
  /// The scale and zero point (see ObserverBase::calculate_qparams).
  std::pair<at::Tensor, at::Tensor> calculate_qparams() override;
  /// Whether forward() has recorded any value.
  bool has_observed() const override;

 protected:
  /// For subclasses: a MinMaxObserver reporting `type_name`.
  MinMaxObserver(const std::string& type_name, const ObserverOptions& options);
  at::Tensor min_val_, max_val_;
};

/// Moving averages of min and max (MovingAverageMinMaxObserver).
class MovingAverageMinMaxObserver : public MinMaxObserver {
 public:
  /// A MovingAverageMinMaxObserver (per-tensor schemes only).
  explicit MovingAverageMinMaxObserver(const ObserverOptions& options = {});
  /// Records x (see ObserverBase::forward).
  at::Tensor forward(const at::Tensor& x) override;
};

/// Running min and max per channel (PerChannelMinMaxObserver), for weights.
class PerChannelMinMaxObserver : public ObserverBase {
 public:
  /// A PerChannelMinMaxObserver (per-channel schemes only).
  explicit PerChannelMinMaxObserver(const ObserverOptions& options = {});
  /// Records x (see ObserverBase::forward).
  at::Tensor forward(const at::Tensor& x) override;
  /// The scale and zero point (see ObserverBase::calculate_qparams).
  std::pair<at::Tensor, at::Tensor> calculate_qparams() override;
  /// Whether forward() has recorded any value.
  bool has_observed() const override;

 protected:
  /// For subclasses: a PerChannelMinMaxObserver reporting `type_name`.
  PerChannelMinMaxObserver(const std::string& type_name, const ObserverOptions& options);
  /// The running (min, max) after a batch whose per-channel extremes are
  /// (min_cur, max_cur): the elementwise min / max (the moving average in
  /// MovingAveragePerChannelMinMaxObserver).
  virtual std::pair<at::Tensor, at::Tensor> merge(const at::Tensor& min_cur, const at::Tensor& max_cur) const;
  at::Tensor min_val_, max_val_;
};

/// Moving averages of each channel's min and max
/// (MovingAveragePerChannelMinMaxObserver): the weight observer of
/// quantization-aware training's fake quantizers.
class MovingAveragePerChannelMinMaxObserver : public PerChannelMinMaxObserver {
 public:
  /// A MovingAveragePerChannelMinMaxObserver (per-channel schemes only).
  explicit MovingAveragePerChannelMinMaxObserver(const ObserverOptions& options = {});

 protected:
  /// min + c·(min_cur − min), max + c·(max_cur − max), c the averaging constant.
  std::pair<at::Tensor, at::Tensor> merge(const at::Tensor& min_cur, const at::Tensor& max_cur) const override;
};

/// A histogram of the values seen, qparams by L2-error search (HistogramObserver).
class HistogramObserver : public ObserverBase {
 public:
  /// A HistogramObserver (per-tensor schemes only).
  explicit HistogramObserver(const ObserverOptions& options = {});
  /// Records x (see ObserverBase::forward).
  at::Tensor forward(const at::Tensor& x) override;
  /// The scale and zero point (see ObserverBase::calculate_qparams).
  std::pair<at::Tensor, at::Tensor> calculate_qparams() override;
  /// Whether forward() has recorded any value.
  bool has_observed() const override;
  /// The histogram (bins float32 counts).
  const at::Tensor& histogram() const { return histogram_; }
  /// The range the histogram covers.
  const at::Tensor& min_val() const { return min_val_; }
  /// The range the histogram covers.
  const at::Tensor& max_val() const { return max_val_; }
  /// _non_linear_param_search: the clipped (min, max) the qparams come from.
  std::pair<at::Tensor, at::Tensor> non_linear_param_search() const;

 private:
  double compute_quantization_error(int64_t next_start_bin, int64_t next_end_bin) const;
  at::Tensor histogram_, min_val_, max_val_;
  int64_t dst_nbins_ = 256;
};

/// Constant qparams (FixedQParamsObserver: sigmoid, tanh, softmax ...).
class FixedQParamsObserver : public ObserverBase {
 public:
  /// scale and zero_point come from options.
  explicit FixedQParamsObserver(const ObserverOptions& options);
  /// Records x (see ObserverBase::forward).
  at::Tensor forward(const at::Tensor& x) override;
  /// The scale and zero point (see ObserverBase::calculate_qparams).
  std::pair<at::Tensor, at::Tensor> calculate_qparams() override;
  /// Always true: nothing needs to be seen.
  bool has_observed() const override { return true; }
};

/// Makes a new observer (Python's `Observer.with_args(...)` partial).
struct ObserverFactory {
  /// Python's class name ("MinMaxObserver", "MovingAverageMinMaxObserver",
  /// "PerChannelMinMaxObserver", "MovingAveragePerChannelMinMaxObserver",
  /// "HistogramObserver", "FixedQParamsObserver"), or a fake quantizer's
  /// ("FakeQuantize", "FusedMovingAvgObsFakeQuantize", "FixedQParamsFakeQuantize";
  /// fx/quantization/fake_quantize.h).
  std::string type;
  /// Its keyword arguments (a fake quantizer's: its observer's).
  ObserverOptions options;
  /// A fake quantizer's observer class ("MovingAverageMinMaxObserver"); empty for observers.
  std::string observer;
  /// A new observer; fx::Error for an unknown type.
  std::shared_ptr<ObserverBase> operator()() const;
};

/// A factory as JSON (its type and every option), for fx::save.
nlohmann::json factory_to_json(const ObserverFactory& factory);
/// The factory factory_to_json wrote; fx::Error for unknown or invalid values.
ObserverFactory factory_from_json(const nlohmann::json& j);

/// Registers the observer types for call_module (GraphModule) and fx::save
/// (once; prepare() calls it).
void register_observer_modules();

/// The observer at `module`, or nullptr if it is not one.
ObserverBase* as_observer(torch::nn::Module& module);

}  // namespace fx::quantization
