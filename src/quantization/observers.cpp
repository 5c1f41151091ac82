// Observers, ported op for op from torch/ao/quantization/observer.py (1.13).
#include <fx/quantization/observers.h>

#include <fx/error.h>

#include <cmath>

namespace fx::quantization {

std::string qscheme_name(QScheme q) {
  switch (q) {
    case QScheme::PerTensorAffine: return "torch.per_tensor_affine";
    case QScheme::PerTensorSymmetric: return "torch.per_tensor_symmetric";
    case QScheme::PerChannelAffine: return "torch.per_channel_affine";
    case QScheme::PerChannelSymmetric: return "torch.per_channel_symmetric";
  }
  return "?";
}

namespace {

bool is_per_tensor(QScheme q) { return q == QScheme::PerTensorAffine || q == QScheme::PerTensorSymmetric; }
bool is_symmetric(QScheme q) { return q == QScheme::PerTensorSymmetric || q == QScheme::PerChannelSymmetric; }

void require(bool ok, const std::string& message) {
  if (!ok) throw Error(message);
}

/// The empty-or-unseen check of check_min_max_valid.
bool min_max_valid(const at::Tensor& min_val, const at::Tensor& max_val) {
  if (min_val.numel() == 0 || max_val.numel() == 0) return false;
  if (min_val.dim() == 0 || max_val.dim() == 0) {
    if (min_val.item<float>() == std::numeric_limits<float>::infinity() &&
        max_val.item<float>() == -std::numeric_limits<float>::infinity())
      return false;
    require(min_val.item<float>() <= max_val.item<float>(), "observer: min is greater than max");
  } else {
    require(at::all(min_val <= max_val).item<bool>(), "observer: min is greater than max");
  }
  return true;
}

at::Tensor scalar(double v) { return at::scalar_tensor(v, at::kFloat); }

}  // namespace

ObserverBase::ObserverBase(const std::string& type_name, const ObserverOptions& options)
    : type_name_(type_name), options_(options) {
  require(options.dtype == c10::kQUInt8 || options.dtype == c10::kQInt8,
          type_name + ": dtype must be torch.quint8 or torch.qint8");
  require(options.quant_min.has_value() == options.quant_max.has_value(),
          type_name + ": give both quant_min and quant_max, or neither");
  // calculate_qmin_qmax
  has_customized_qrange_ = options.quant_min.has_value();
  if (has_customized_qrange_) {
    const int64_t qmin = *options.quant_min, qmax = *options.quant_max;
    require(qmin <= 0 && 0 <= qmax, type_name + ": Used-specified quantization range must include 0.");
    require(qmin < qmax, type_name + ": qmin must be strictly less than qmax for user-specified quantization range.");
    require(qmax - qmin + 1 <= 256, type_name + ": quantization range should not exceed 256 values");
    quant_min_ = options.reduce_range ? qmin / 2 : qmin;
    quant_max_ = options.reduce_range ? qmax / 2 : qmax;
    // Python floors: -128 // 2 == -64, and qmin <= 0 so C++'s truncation differs only for odd negatives.
    if (options.reduce_range && qmin < 0 && qmin % 2 != 0) quant_min_ -= 1;
  } else if (options.dtype == c10::kQInt8) {
    quant_min_ = options.reduce_range ? -64 : -128;
    quant_max_ = options.reduce_range ? 63 : 127;
  } else {
    quant_min_ = 0;
    quant_max_ = options.reduce_range ? 127 : 255;
  }
  eps_ = register_buffer("eps", at::tensor({static_cast<float>(options.eps)}));
}

std::pair<at::Tensor, at::Tensor> ObserverBase::calculate_qparams_from(const at::Tensor& min_val,
                                                                      const at::Tensor& max_val) const {
  if (!min_max_valid(min_val, max_val)) return {at::tensor({1.0f}), at::tensor({int64_t{0}})};
  at::Tensor min_val_neg = at::min(min_val, at::zeros_like(min_val));
  at::Tensor max_val_pos = at::max(max_val, at::zeros_like(max_val));
  at::Tensor scale = at::ones(min_val_neg.sizes(), at::kFloat);
  at::Tensor zero_point = at::zeros(min_val_neg.sizes(), at::kLong);
  if (is_symmetric(options_.qscheme)) {
    max_val_pos = at::max(-min_val_neg, max_val_pos);
    scale = max_val_pos / (static_cast<double>(quant_max_ - quant_min_) / 2);
    scale = at::max(scale, eps_);
    if (options_.dtype == c10::kQUInt8) {
      zero_point = zero_point.new_full(zero_point.sizes(),
                                       has_customized_qrange_ ? (quant_min_ + quant_max_) / 2 : int64_t{128});
    }
  } else {
    scale = (max_val_pos - min_val_neg) / static_cast<double>(quant_max_ - quant_min_);
    scale = at::max(scale, eps_);
    zero_point = quant_min_ - at::round(min_val_neg / scale).to(at::kInt);
    zero_point = at::clamp(zero_point, quant_min_, quant_max_);
  }
  if (scale.dim() == 0) scale = at::tensor({scale.item<float>()});
  if (zero_point.dim() == 0) zero_point = at::tensor({zero_point.item<int64_t>()}, zero_point.scalar_type());
  return {scale, zero_point};
}

// ---- MinMaxObserver -------------------------------------------------------

MinMaxObserver::MinMaxObserver(const ObserverOptions& options) : MinMaxObserver("MinMaxObserver", options) {}

MinMaxObserver::MinMaxObserver(const std::string& type_name, const ObserverOptions& options)
    : ObserverBase(type_name, options) {
  require(is_per_tensor(options.qscheme), type_name + "'s qscheme only support torch.per_tensor_symmetric and "
                                                      "torch.per_tensor_affine.");
  require(!(options.qscheme == QScheme::PerTensorSymmetric && options.reduce_range &&
            options.dtype == c10::kQUInt8),
          type_name + ": Cannot reduce range for symmetric quantization for quint8");
  min_val_ = register_buffer("min_val", scalar(std::numeric_limits<double>::infinity()));
  max_val_ = register_buffer("max_val", scalar(-std::numeric_limits<double>::infinity()));
}

at::Tensor MinMaxObserver::forward(const at::Tensor& x_orig) {
  if (x_orig.numel() == 0) return x_orig;
  at::NoGradGuard no_grad;
  at::Tensor x = x_orig.detach().to(min_val_.scalar_type());
  auto [min_cur, max_cur] = at::aminmax(x);
  min_val_.copy_(at::min(min_cur, min_val_));
  max_val_.copy_(at::max(max_cur, max_val_));
  return x_orig;
}

std::pair<at::Tensor, at::Tensor> MinMaxObserver::calculate_qparams() {
  return calculate_qparams_from(min_val_, max_val_);
}

bool MinMaxObserver::has_observed() const {
  return !(min_val_.item<float>() == std::numeric_limits<float>::infinity() &&
           max_val_.item<float>() == -std::numeric_limits<float>::infinity());
}

MovingAverageMinMaxObserver::MovingAverageMinMaxObserver(const ObserverOptions& options)
    : MinMaxObserver("MovingAverageMinMaxObserver", options) {}

at::Tensor MovingAverageMinMaxObserver::forward(const at::Tensor& x_orig) {
  if (x_orig.numel() == 0) return x_orig;
  at::NoGradGuard no_grad;
  at::Tensor x = x_orig.detach().to(min_val_.scalar_type());
  at::Tensor min_val = min_val_, max_val = max_val_;
  if (!has_observed()) {
    std::tie(min_val, max_val) = at::aminmax(x);
  } else {
    auto [min_cur, max_cur] = at::aminmax(x);
    min_val = min_val + options_.averaging_constant * (min_cur - min_val);
    max_val = max_val + options_.averaging_constant * (max_cur - max_val);
  }
  min_val_.copy_(min_val);
  max_val_.copy_(max_val);
  return x_orig;
}

// ---- PerChannelMinMaxObserver ---------------------------------------------

PerChannelMinMaxObserver::PerChannelMinMaxObserver(const ObserverOptions& options)
    : PerChannelMinMaxObserver("PerChannelMinMaxObserver", options) {}

PerChannelMinMaxObserver::PerChannelMinMaxObserver(const std::string& type_name, const ObserverOptions& options)
    : ObserverBase(type_name, options) {
  require(!is_per_tensor(options.qscheme), type_name +
                                               "'s qscheme only support torch.per_channel_symmetric and "
                                               "torch.per_channel_affine.");
  require(!(options.qscheme == QScheme::PerChannelSymmetric && options.reduce_range &&
            options.dtype == c10::kQUInt8),
          type_name + ": Cannot reduce range for symmetric quantization for quint8");
  min_val_ = register_buffer("min_val", at::empty({0}, at::kFloat));
  max_val_ = register_buffer("max_val", at::empty({0}, at::kFloat));
}

at::Tensor PerChannelMinMaxObserver::forward(const at::Tensor& x_orig) {
  if (x_orig.numel() == 0) return x_orig;
  at::NoGradGuard no_grad;
  at::Tensor x = x_orig.detach();
  std::vector<int64_t> axes(x.dim());
  for (int64_t i = 0; i < x.dim(); ++i) axes[i] = i;
  const int64_t axis = options_.ch_axis < 0 ? options_.ch_axis + x.dim() : options_.ch_axis;
  axes[axis] = 0;
  axes[0] = axis;
  at::Tensor y = at::flatten(x.permute(axes).to(min_val_.scalar_type()), 1);
  auto [min_cur, max_cur] = at::aminmax(y, 1);
  at::Tensor min_val = min_cur, max_val = max_cur;
  if (min_val_.numel() != 0 && max_val_.numel() != 0) std::tie(min_val, max_val) = merge(min_cur, max_cur);
  min_val_.resize_(min_val.sizes());
  max_val_.resize_(max_val.sizes());
  min_val_.copy_(min_val);
  max_val_.copy_(max_val);
  return x_orig;
}

std::pair<at::Tensor, at::Tensor> PerChannelMinMaxObserver::merge(const at::Tensor& min_cur,
                                                                 const at::Tensor& max_cur) const {
  return {at::min(min_cur, min_val_), at::max(max_cur, max_val_)};
}

MovingAveragePerChannelMinMaxObserver::MovingAveragePerChannelMinMaxObserver(const ObserverOptions& options)
    : PerChannelMinMaxObserver("MovingAveragePerChannelMinMaxObserver", options) {}

std::pair<at::Tensor, at::Tensor> MovingAveragePerChannelMinMaxObserver::merge(const at::Tensor& min_cur,
                                                                              const at::Tensor& max_cur) const {
  return {min_val_ + options_.averaging_constant * (min_cur - min_val_),
          max_val_ + options_.averaging_constant * (max_cur - max_val_)};
}

std::pair<at::Tensor, at::Tensor> PerChannelMinMaxObserver::calculate_qparams() {
  return calculate_qparams_from(min_val_, max_val_);
}

bool PerChannelMinMaxObserver::has_observed() const { return min_val_.numel() != 0; }

// ---- HistogramObserver ----------------------------------------------------

HistogramObserver::HistogramObserver(const ObserverOptions& options) : ObserverBase("HistogramObserver", options) {
  require(is_per_tensor(options.qscheme), "HistogramObserver's qscheme only support torch.per_tensor_symmetric "
                                          "and torch.per_tensor_affine.");
  require(options.bins > 0 && options.upsample_rate > 0, "HistogramObserver: bins and upsample_rate must be positive");
  histogram_ = register_buffer("histogram", at::zeros({options.bins}, at::kFloat));
  min_val_ = register_buffer("min_val", scalar(std::numeric_limits<double>::infinity()));
  max_val_ = register_buffer("max_val", scalar(-std::numeric_limits<double>::infinity()));
  dst_nbins_ = 256;  // 2 ** torch.iinfo(dtype).bits for both 8-bit dtypes
}

bool HistogramObserver::has_observed() const {
  return !(min_val_.item<float>() == std::numeric_limits<float>::infinity() &&
           max_val_.item<float>() == -std::numeric_limits<float>::infinity());
}

namespace {

/// _get_norm: density * (end^3 - begin^3) / 3.
at::Tensor get_norm(const at::Tensor& delta_begin, const at::Tensor& delta_end, const at::Tensor& density) {
  at::Tensor norm = (delta_end * delta_end * delta_end - delta_begin * delta_begin * delta_begin) / 3;
  return density * norm;
}

/// Python's int(float): truncation toward zero.
int64_t py_int(double v) { return static_cast<int64_t>(std::trunc(v)); }

}  // namespace

double HistogramObserver::compute_quantization_error(int64_t next_start_bin, int64_t next_end_bin) const {
  const int64_t bins = options_.bins;
  const double bin_width =
      (static_cast<double>(max_val_.item<float>()) - static_cast<double>(min_val_.item<float>())) / bins;
  const double dst_bin_width = bin_width * (next_end_bin - next_start_bin + 1) / dst_nbins_;
  if (dst_bin_width == 0.0) return 0.0;
  at::Tensor src_bin = at::arange(bins);
  at::Tensor src_bin_begin = (src_bin - next_start_bin) * bin_width;
  at::Tensor src_bin_end = src_bin_begin + bin_width;
  at::Tensor dst_bin_of_begin = at::clamp(at::div(src_bin_begin, dst_bin_width, "floor"), 0, dst_nbins_ - 1);
  at::Tensor dst_bin_of_begin_center = (dst_bin_of_begin + 0.5) * dst_bin_width;
  at::Tensor dst_bin_of_end = at::clamp(at::div(src_bin_end, dst_bin_width, "floor"), 0, dst_nbins_ - 1);
  at::Tensor density = histogram_ / bin_width;
  at::Tensor norm = at::zeros({bins}, at::kFloat);
  at::Tensor delta_begin = src_bin_begin - dst_bin_of_begin_center;
  const double delta_end = dst_bin_width / 2;
  norm += get_norm(delta_begin, at::ones({bins}, at::kFloat) * delta_end, density);
  norm += (dst_bin_of_end - dst_bin_of_begin - 1) *
          get_norm(scalar(-dst_bin_width / 2), scalar(dst_bin_width / 2), density);
  at::Tensor dst_bin_of_end_center = dst_bin_of_end * dst_bin_width + dst_bin_width / 2;
  at::Tensor delta_end2 = src_bin_end - dst_bin_of_end_center;
  norm += get_norm(scalar(-dst_bin_width / 2), delta_end2, density);
  return norm.sum().item<double>();
}

std::pair<at::Tensor, at::Tensor> HistogramObserver::non_linear_param_search() const {
  const int64_t bins = options_.bins;
  at::Tensor bin_width = (max_val_ - min_val_) / bins;
  const double total = at::sum(histogram_).item<double>();
  at::Tensor csum_t = at::cumsum(histogram_, 0).contiguous();
  const float* csum = csum_t.data_ptr<float>();
  const double stepsize = 1e-5;
  double alpha = 0.0, beta = 1.0;
  int64_t start_bin = 0, end_bin = bins - 1;
  double norm_min = std::numeric_limits<double>::infinity();
  while (alpha < beta) {
    const double next_alpha = alpha + stepsize;
    const double next_beta = beta - stepsize;
    // cSum[l] < next_alpha * total: a float32 tensor against a Python float,
    // compared in float32 (the scalar is cast to the tensor's dtype).
    const float lo = static_cast<float>(next_alpha * total), hi = static_cast<float>(next_beta * total);
    int64_t l = start_bin, r = end_bin;
    while (l < end_bin && csum[l] < lo) ++l;
    while (r > start_bin && csum[r] > hi) --r;
    int64_t next_start_bin = start_bin, next_end_bin = end_bin;
    if ((l - start_bin) > (end_bin - r)) {
      next_start_bin = l;
      alpha = next_alpha;
    } else {
      next_end_bin = r;
      beta = next_beta;
    }
    if (next_start_bin == start_bin && next_end_bin == end_bin) continue;
    const double norm = compute_quantization_error(next_start_bin, next_end_bin);
    if (norm > norm_min) break;
    norm_min = norm;
    start_bin = next_start_bin;
    end_bin = next_end_bin;
  }
  at::Tensor new_min = min_val_ + bin_width * start_bin;
  at::Tensor new_max = min_val_ + bin_width * (end_bin + 1);
  return {new_min, new_max};
}

at::Tensor HistogramObserver::forward(const at::Tensor& x_orig) {
  if (x_orig.numel() == 0) return x_orig;
  at::NoGradGuard no_grad;
  at::Tensor x = x_orig.detach();
  const int64_t bins = options_.bins;
  const bool same_values = min_val_.item<float>() == max_val_.item<float>();
  if (!has_observed() || same_values) {
    auto [min_val, max_val] = at::aminmax(x);
    min_val_.resize_(min_val.sizes());
    min_val_.copy_(min_val);
    max_val_.resize_(max_val.sizes());
    max_val_.copy_(max_val);
    at::histc_out(histogram_, x, bins, py_int(min_val.item<double>()), py_int(max_val.item<double>()));
    return x_orig;
  }
  auto [new_min, new_max] = at::aminmax(x);
  at::Tensor combined_min = at::min(new_min, min_val_);
  at::Tensor combined_max = at::max(new_max, max_val_);
  // _adjust_min_max
  const int64_t upsample_rate = options_.upsample_rate;
  at::Tensor hist_bin_width = (max_val_ - min_val_) / (bins * upsample_rate);
  const int64_t downsample_rate =
      py_int(at::ceil((combined_max - combined_min) / (bins * hist_bin_width)).item<double>());
  at::Tensor e = downsample_rate * (bins * hist_bin_width) - (combined_max - combined_min);
  combined_max = combined_max + e;
  const int64_t start_idx = py_int(at::round((min_val_ - combined_min) / hist_bin_width).item<double>());
  at::Tensor combined_histogram =
      at::histc(x, bins, py_int(combined_min.item<double>()), py_int(combined_max.item<double>()));
  if (combined_min.item<float>() == min_val_.item<float>() && combined_max.item<float>() == max_val_.item<float>()) {
    combined_histogram += histogram_;
  } else {
    // _combine_histograms
    at::Tensor upsampled = histogram_.repeat_interleave(upsample_rate);
    at::Tensor with_range = at::zeros({bins * downsample_rate}, at::kFloat);
    with_range.slice(0, start_idx, bins * upsample_rate + start_idx).copy_(upsampled);
    at::Tensor integral =
        at::cumsum(with_range, 0, at::kDouble).slice(0, downsample_rate - 1, c10::nullopt, downsample_rate);
    at::Tensor shifted = at::zeros({bins}, at::kFloat);
    shifted.slice(0, 1, bins).copy_(integral.slice(0, 0, -1));
    at::Tensor interpolated = (integral - shifted) / upsample_rate;
    combined_histogram = combined_histogram + interpolated.to(at::kFloat);
  }
  histogram_.resize_(combined_histogram.sizes());
  histogram_.copy_(combined_histogram);
  min_val_.resize_(combined_min.sizes());
  min_val_.copy_(combined_min);
  max_val_.resize_(combined_max.sizes());
  max_val_.copy_(combined_max);
  return x_orig;
}

std::pair<at::Tensor, at::Tensor> HistogramObserver::calculate_qparams() {
  if (!has_observed()) return {at::tensor({1.0f}), at::tensor({int64_t{0}})};
  require(histogram_.numel() == options_.bins,
          "The number of bins in histogram should be equal to the number of bins supplied while making this observer");
  auto [new_min, new_max] = non_linear_param_search();
  return calculate_qparams_from(new_min, new_max);
}

// ---- FixedQParamsObserver ---------------------------------------------------

FixedQParamsObserver::FixedQParamsObserver(const ObserverOptions& options)
    : ObserverBase("FixedQParamsObserver", options) {
  register_buffer("scale", at::tensor({static_cast<float>(options.scale)}));
  register_buffer("zero_point", at::tensor({options.zero_point}, at::kInt));
}

at::Tensor FixedQParamsObserver::forward(const at::Tensor& x) { return x; }

std::pair<at::Tensor, at::Tensor> FixedQParamsObserver::calculate_qparams() {
  return {at::tensor({static_cast<float>(options_.scale)}), at::tensor({options_.zero_point}, at::kInt)};
}

ObserverBase* as_observer(torch::nn::Module& module) { return dynamic_cast<ObserverBase*>(&module); }

}  // namespace fx::quantization
