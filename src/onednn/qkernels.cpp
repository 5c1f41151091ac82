// fxcpp::onednn_qconv2d / onednn_qlinear: int8 convolution and linear
// layers through oneDNN: u8 activations, s8 per-channel weights packed once,
// requantisation as output scales, bias, residual sum and activation as
// post-ops.
//
// oneDNN 2.x computes dst = post_ops(output_scale * (src_s32 * wei + bias)),
// with the bias in the accumulator's units (int32: bias / (input_scale *
// weight_scale), rounded, as ideep passes it); the output zero point is the
// shift of a final linear post-op, and an input zero point is folded into the
// bias where no padding reads it (a runtime zero point otherwise): oneDNN's
// fastest (brgemm) kernels take neither zero point. With an activation that is
// scale-equivariant (none, relu, clip) the output scales divide by the
// output's scale directly and post-ops see the output's units; other
// activations (silu, hardswish, …) need real values: the output scales give
// real values and a final linear post-op divides by the output's scale.
#include "onednn/qpacked_ops.h"

#include <fx/error.h>

#include <ATen/ops/_empty_affine_quantized.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/hardswish.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/quantize_per_tensor.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/silu.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/zeros.h>

#include <cmath>
#include <cstring>
#include <sstream>

namespace fx::onednn::detail {
namespace {

using dims = dnnl::memory::dims;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

/// Whether oneDNN's int8 kernels without VNNI compute `weight` exactly: they
/// multiply u8 x s8 pairs into saturating 16-bit sums (vpmaddubsw), which
/// cannot overflow when every |w| <= 64 (2 x 255 x 64 = 32640 <= 32767): the
/// 7-bit weights of a weight observer of range [-64, 63]
/// (fx::quantization::with_weight_range).
bool fits_16bit_pair_sums(const at::Tensor& weight) {
  if (weight.numel() == 0) return true;
  // Not weight.abs(): the int8 absolute value of -128 is -128.
  return weight.max().item<int64_t>() <= kMaxWeightFor16BitSums &&
         weight.min().item<int64_t>() >= -kMaxWeightFor16BitSums;
}

bool scale_equivariant(const PostOps& p) {
  return p.activation == Activation::None || p.activation == Activation::Relu || p.activation == Activation::Clip;
}

void check_qparams(const QuantParams& q, const char* which, const char* op) {
  if (!(q.scale > 0) || !std::isfinite(q.scale) || q.zero_point < 0 || q.zero_point > 255)
    throw Error(std::string(op) + ": the " + which + " scale must be > 0 and its zero point in [0, 255], got scale " +
                std::to_string(q.scale) + ", zero point " + std::to_string(q.zero_point));
}

bool same_qparams(double scale, int64_t zero_point, const QuantParams& q) {
  return zero_point == q.zero_point && std::abs(scale - q.scale) <= 1e-6 * q.scale;
}

std::string qparams_str(double scale, int64_t zero_point) {
  std::ostringstream os;
  os << "scale " << scale << ", zero point " << zero_point;
  return os.str();
}

dnnl::memory s32_scalar(const int32_t& value) {
  return dnnl::memory(dnnl::memory::desc({1}, dt::s32, tag::a), engine(), const_cast<int32_t*>(&value));
}

}  // namespace

PackedQOp::PackedQOp(const PackedQState& state, const char* op, int64_t out_channels)
    : state_(state), out_channels_(out_channels) {
  const PackedQState& s = state_;
  if (!s.weight.defined() || s.weight.scalar_type() != at::kChar)
    throw Error(std::string(op) + ": the weight must be an int8 (torch.int8) tensor");
  if (!s.weight_scales.defined() || s.weight_scales.dim() != 1 || s.weight_scales.size(0) != out_channels)
    throw Error(std::string(op) + ": weight_scales must have one scale per output channel (" +
                std::to_string(out_channels) + ")");
  check_qparams(s.input, "input", op);
  if (!s.output_float) check_qparams(s.output, "output", op);
  if (s.post_ops.sum) {
    check_qparams(s.residual, "residual", op);
    if (s.output_float) throw Error(std::string(op) + ": a residual sum needs a quint8 output");
  }
  if (s.post_ops.residual_inplace) throw Error(std::string(op) + ": int8 kernels copy their residual");
  at::Tensor ws = s.weight_scales.to(at::kDouble).contiguous();
  real_domain_ = s.output_float || !scale_equivariant(s.post_ops);
  const double per_output = real_domain_ ? 1.0 : 1.0 / s.output.scale;
  output_scales_.resize(static_cast<size_t>(out_channels));
  for (int64_t c = 0; c < out_channels; ++c) {
    const double w = ws[c].item<double>();
    if (!(w > 0) || !std::isfinite(w)) throw Error(std::string(op) + ": weight scale " + std::to_string(c) + " is not > 0");
    output_scales_[static_cast<size_t>(c)] = static_cast<float>(s.input.scale * w * per_output);
  }
  if (s.bias && s.bias->defined()) {
    if (s.bias->dim() != 1 || s.bias->size(0) != out_channels)
      throw Error(std::string(op) + ": the bias must have " + std::to_string(out_channels) + " elements");
    bias_ = (s.bias->to(at::kDouble) / (ws * s.input.scale)).round().clamp(INT32_MIN, INT32_MAX).to(at::kInt).contiguous();
  }
  src_zero_point_ = static_cast<int32_t>(s.input.zero_point);
  dst_zero_point_ = s.output_float ? 0 : static_cast<int32_t>(s.output.zero_point);
}

dnnl::primitive_attr PackedQOp::attr(int scale_mask) const {
  const PackedQState& s = state_;
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  attr.set_output_scales(scale_mask, output_scales_);
  const double per_output = real_domain_ ? 1.0 : 1.0 / s.output.scale;
  dnnl::post_ops ops;
  if (s.post_ops.sum)
    ops.append_sum(static_cast<float>(s.residual.scale * per_output), static_cast<int32_t>(s.residual.zero_point));
  PostOps act = s.post_ops;
  if (!real_domain_ && act.activation == Activation::Clip) {
    act.alpha = static_cast<float>(act.alpha * per_output);
    act.beta = static_cast<float>(act.beta * per_output);
  }
  append_activation(ops, act);
  // The output zero point as the last post-op's shift (round(v + zp) = round(v) + zp): oneDNN's
  // brgemm convolutions take no destination zero point and would fall back to slower kernels.
  const float zero_point = static_cast<float>(dst_zero_point_);
  if (real_domain_ && !s.output_float)
    ops.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, static_cast<float>(1.0 / s.output.scale), zero_point);
  else if (dst_zero_point_ != 0)
    ops.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, 1.f, zero_point);
  attr.set_post_ops(ops);
  if (src_zero_point_ != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  return attr;
}

void PackedQOp::check_input(const at::Tensor& input, const char* what) const {
  if (!input.defined() || input.scalar_type() != at::kQUInt8 || input.qscheme() != at::kPerTensorAffine)
    throw Error(std::string(what) + ": the input must be a quint8 per-tensor quantized tensor, got " +
                (input.defined() ? std::string(c10::toString(input.scalar_type())) : std::string("None")));
  if (!same_qparams(input.q_scale(), input.q_zero_point(), state_.input))
    throw Error(std::string(what) + ": the input is quantized with " +
                qparams_str(input.q_scale(), input.q_zero_point()) + ", the kernel was packed for " +
                qparams_str(state_.input.scale, state_.input.zero_point));
}

at::Tensor PackedQOp::make_output(at::IntArrayRef sizes, at::MemoryFormat format,
                                  const c10::optional<at::Tensor>& residual, const char* what) const {
  const PackedQState& s = state_;
  if (s.output_float) return at::empty(sizes, at::TensorOptions().dtype(at::kFloat).memory_format(format));
  at::Tensor out = at::_empty_affine_quantized(sizes, at::TensorOptions().dtype(at::kQUInt8), s.output.scale,
                                               s.output.zero_point, format);
  if (!s.post_ops.sum) return out;
  if (!residual || !residual->defined() || residual->sizes() != sizes || residual->scalar_type() != at::kQUInt8 ||
      residual->qscheme() != at::kPerTensorAffine)
    throw Error(std::string(what) + ": the residual must be a quint8 tensor of the output's shape " + sizes_str(sizes));
  if (!same_qparams(residual->q_scale(), residual->q_zero_point(), s.residual))
    throw Error(std::string(what) + ": the residual is quantized with " +
                qparams_str(residual->q_scale(), residual->q_zero_point()) + ", the kernel was packed for " +
                qparams_str(s.residual.scale, s.residual.zero_point));
  at::Tensor r = residual->contiguous(format);
  std::memcpy(out.data_ptr(), r.data_ptr(), static_cast<size_t>(r.numel()));
  return out;
}

at::Tensor PackedQOp::float_output(const at::Tensor& y) const {
  at::Tensor a = apply_activation(y, state_.post_ops);
  return state_.output_float ? a : at::quantize_per_tensor(a, state_.output.scale, state_.output.zero_point, at::kQUInt8);
}

void PackedQOp::add_args(std::unordered_map<int, dnnl::memory>& args, const dnnl::memory::desc& bias) const {
  if (bias_.defined()) args.emplace(DNNL_ARG_BIAS, memory_of(bias, bias_));
  if (src_zero_point_ != 0) args.emplace(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, s32_scalar(src_zero_point_));
}

std::string PackedQOp::str_suffix() const {
  const PackedQState& s = state_;
  std::ostringstream os;
  if (!bias_.defined()) os << ", bias=False";
  const std::string p = s.post_ops.str();
  if (!p.empty()) os << ", " << p;
  if (s.output_float)
    os << ", float output";
  else
    os << ", scale=" << s.output.scale << ", zero_point=" << s.output.zero_point;
  os << ")";
  return os.str();
}

// ---- convolution ----------------------------------------------------------

PackedQConv::PackedQConv(const PackedQState& state)
    : PackedQOp(state, "onednn_qconv2d", state.weight.defined() && state.weight.dim() > 0 ? state.weight.size(0) : 0) {
  const PackedQState& s = state_;
  const ConvParams& p = s.params;
  if (s.weight.dim() != 4) throw Error("onednn_qconv2d: the weight must be [out, in / groups, kh, kw]");
  for (const auto* v : {&p.stride, &p.padding, &p.dilation})
    if (v->size() != 2) throw Error("onednn_qconv2d: stride, padding and dilation must have two values");
  if (p.groups < 1 || out_channels_ % p.groups != 0)
    throw Error("onednn_qconv2d: groups must divide the " + std::to_string(out_channels_) + " output channels");
  in_channels_ = s.weight.size(1) * p.groups;
  kh_ = s.weight.size(2);
  kw_ = s.weight.size(3);
  const bool depthwise = s.weight.size(1) == 1 && out_channels_ == p.groups;
  if (!has_int8_dot_product() && !depthwise && !fits_16bit_pair_sums(s.weight)) {
    // Without VNNI, oneDNN's int8 convolutions multiply u8 x s8 pairs into saturating 16-bit
    // sums (vpmaddubsw: 2 x 255 x 127 > 32767): a full-range input comes out up to ~120 steps
    // wrong (QConvKernel.*_full_range held at AVX2). Its depthwise kernel widens to 32 bits
    // first and is exact, and 7-bit weights cannot saturate (fits_16bit_pair_sums). The
    // others compute in float32 on oneDNN's float kernels: dequantize, convolution + bias +
    // residual + activation, quantize.
    ConvParams float_params = p;
    float_params.winograd = false;
    float_conv_ = std::make_unique<PackedConv>(
        s.weight.to(at::kFloat) * s.weight_scales.to(at::kFloat).view({-1, 1, 1, 1}), s.bias, float_params,
        s.post_ops, at::kFloat);
    return;
  }
  const bool padded = p.padding != std::vector<int64_t>{0, 0};
  if (src_zero_point_ != 0 && (!padded || !has_int8_dot_product())) {
    // The input's zero point folds into the bias where every tap reads input data:
    // sum (x - zp) w = sum x w - zp sum w. oneDNN then keeps its brgemm kernels, which a
    // runtime source zero point sends to slower ones (EfficientNet's 1x1 convolutions after
    // SiLU). Without VNNI oneDNN gets a runtime source zero point wrong: a padded (depthwise)
    // convolution's input is then padded with the zero point (the real domain's zero) by
    // padded(), and the kernel has no padding.
    at::Tensor compensation = s.weight.to(at::kLong).sum({1, 2, 3}) * src_zero_point_;
    at::Tensor b = bias_.defined() ? bias_.to(at::kLong) : at::zeros({out_channels_}, at::kLong);
    bias_ = (b - compensation).clamp(INT32_MIN, INT32_MAX).to(at::kInt).contiguous();
    pad_input_ = padded;
    src_zero_point_ = 0;
  }
  const int64_t g = p.groups;
  at::Tensor plain = s.weight.contiguous();
  if (g == 1)
    weights_ = std::make_unique<PackedWeights>(plain, dims{out_channels_, in_channels_, kh_, kw_}, tag::oihw);
  else
    weights_ = std::make_unique<PackedWeights>(plain, dims{g, out_channels_ / g, in_channels_ / g, kh_, kw_},
                                               tag::goihw);
}

std::vector<int64_t> PackedQConv::output_sizes(at::IntArrayRef s, bool kernel_padding) const {
  if (s.size() != 4 || s[1] != in_channels_)
    throw Error("onednn_qconv2d: expected an input [N, " + std::to_string(in_channels_) + ", H, W], got " +
                sizes_str(s));
  const ConvParams& p = state_.params;
  std::vector<int64_t> out{s[0], out_channels_, 0, 0};
  const int64_t k[2] = {kh_, kw_};
  for (int i = 0; i < 2; ++i) {
    const int64_t pad = kernel_padding && pad_input_ ? 0 : p.padding[i];
    const int64_t extent = p.dilation[i] * (k[i] - 1) + 1;
    if (s[2 + i] + 2 * pad < extent)
      throw Error("onednn_qconv2d: input " + sizes_str(s) + " is smaller than the kernel");
    out[2 + i] = (s[2 + i] + 2 * pad - extent) / p.stride[i] + 1;
  }
  return out;
}

std::vector<int64_t> PackedQConv::kernel_input_sizes(at::IntArrayRef s) const {
  std::vector<int64_t> k = s.vec();
  if (pad_input_)
    for (int i = 0; i < 2; ++i) k[2 + static_cast<size_t>(i)] += 2 * state_.params.padding[static_cast<size_t>(i)];
  return k;
}

std::shared_ptr<const PackedQConv::Kernel> PackedQConv::kernel(at::IntArrayRef sizes) const {
  return kernels_.get(sizes.vec(), [&] {
    const ConvParams& p = state_.params;
    const std::vector<int64_t> out = output_sizes(sizes, true);
    dnnl::memory::desc src(dims(sizes.begin(), sizes.end()), dt::u8, tag::nhwc);
    dnnl::memory::desc dst(dims(out.begin(), out.end()), state_.output_float ? dt::f32 : dt::u8, tag::nhwc);
    const int64_t g = p.groups;
    dims wdims = g == 1 ? dims{out_channels_, in_channels_, kh_, kw_}
                        : dims{g, out_channels_ / g, in_channels_ / g, kh_, kw_};
    dnnl::memory::desc wei(wdims, dt::s8, tag::any);
    dnnl::memory::desc bias;
    if (bias_.defined()) bias = dnnl::memory::desc({out_channels_}, dt::s32, tag::a);
    dims stride(p.stride.begin(), p.stride.end());
    dims dilate{p.dilation[0] - 1, p.dilation[1] - 1};
    dims pad = pad_input_ ? dims{0, 0} : dims(p.padding.begin(), p.padding.end());
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src,
                                      wei, bias, dst, stride, dilate, pad, pad);
    // Output scales per output channel: dimension 1 (of g*oc for grouped convolutions too).
    dnnl::convolution_forward::primitive_desc pd(d, attr(1 << 1), engine());
    return Kernel{dnnl::convolution_forward(pd), weights_->get(pd.weights_desc()), src, dst,
                  pd.scratchpad_desc().get_size(), pd.impl_info_str()};
  });
}

at::Tensor PackedQConv::padded(const at::Tensor& x) const {
  // x: quint8, channels_last. The copy: [N, C, H + 2 ph, W + 2 pw], channels_last, its border the zero point.
  const int64_t ph = state_.params.padding[0], pw = state_.params.padding[1];
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  at::Tensor out = at::_empty_affine_quantized({n, c, h + 2 * ph, w + 2 * pw}, at::TensorOptions().dtype(at::kQUInt8),
                                               x.q_scale(), x.q_zero_point(), at::MemoryFormat::ChannelsLast);
  const auto* from = reinterpret_cast<const uint8_t*>(x.data_ptr());
  auto* to = reinterpret_cast<uint8_t*>(out.data_ptr());
  const auto row = static_cast<size_t>(w * c), padded_row = static_cast<size_t>((w + 2 * pw) * c);
  const auto zp = static_cast<uint8_t>(x.q_zero_point());
  for (int64_t i = 0; i < n; ++i) {
    uint8_t* image = to + static_cast<size_t>(i * (h + 2 * ph)) * padded_row;
    std::memset(image, zp, static_cast<size_t>(ph) * padded_row);  // the rows above
    std::memset(image + static_cast<size_t>(ph + h) * padded_row, zp, static_cast<size_t>(ph) * padded_row);  // below
    for (int64_t y = 0; y < h; ++y) {
      uint8_t* dst = image + static_cast<size_t>(ph + y) * padded_row;
      std::memset(dst, zp, static_cast<size_t>(pw * c));
      std::memcpy(dst + pw * c, from + static_cast<size_t>(i * h + y) * row, row);
      std::memset(dst + pw * c + static_cast<int64_t>(row), zp, static_cast<size_t>(pw * c));
    }
  }
  return out;
}

at::Tensor PackedQConv::run(const at::Tensor& input, const c10::optional<at::Tensor>& residual) const {
  check_input(input, "onednn_qconv2d");
  const std::vector<int64_t> out_sizes = output_sizes(input.sizes(), false);  // checks the input's sizes
  at::Tensor x = input.contiguous(at::MemoryFormat::ChannelsLast);
  if (float_conv_) {
    c10::optional<at::Tensor> r;
    if (state_.post_ops.sum) {
      make_output(out_sizes, at::MemoryFormat::ChannelsLast, residual, "onednn_qconv2d");  // checks the residual
      r = dequantize_u8(residual->contiguous(at::MemoryFormat::ChannelsLast));
    }
    at::Tensor y = float_conv_->run(dequantize_u8(x), r);
    return state_.output_float ? y : quantize_u8(y, state_.output.scale, state_.output.zero_point);
  }
  if (pad_input_) x = padded(x);
  auto k = kernel(x.sizes());
  at::Tensor out = make_output(out_sizes, at::MemoryFormat::ChannelsLast, residual, "onednn_qconv2d");
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, memory_of(k->src, x)},
                                             {DNNL_ARG_WEIGHTS, k->weights},
                                             {DNNL_ARG_DST, memory_of(k->dst, out)}};
  add_args(args, dnnl::memory::desc({out_channels_}, dt::s32, tag::a));
  execute(k->primitive, args, k->scratchpad_bytes);
  return out;
}

std::string PackedQConv::implementation(at::IntArrayRef sizes) const {
  output_sizes(sizes, false);  // checks the input's sizes and that the kernel fits
  if (float_conv_) return "float32 " + float_conv_->implementation(sizes) + " (no VNNI, 8-bit weights)";
  const std::string impl = kernel(kernel_input_sizes(sizes))->implementation;
  return pad_input_ ? impl + " (input padded with its zero point)" : impl;
}

std::string PackedQConv::str() const {
  const ConvParams& p = state_.params;
  std::ostringstream os;
  os << "QConv2d(" << in_channels_ << ", " << out_channels_ << ", kernel=(" << kh_ << ", " << kw_ << ")";
  if (p.stride != std::vector<int64_t>{1, 1}) os << ", stride=" << sizes_str(p.stride);
  if (p.padding != std::vector<int64_t>{0, 0}) os << ", padding=" << sizes_str(p.padding);
  if (p.dilation != std::vector<int64_t>{1, 1}) os << ", dilation=" << sizes_str(p.dilation);
  if (p.groups != 1) os << ", groups=" << p.groups;
  return os.str() + str_suffix();
}

// ---- linear ---------------------------------------------------------------

PackedQLinear::PackedQLinear(const PackedQState& state)
    : PackedQOp(state, "onednn_qlinear", state.weight.defined() && state.weight.dim() > 0 ? state.weight.size(0) : 0) {
  const PackedQState& s = state_;
  if (s.weight.dim() != 2) throw Error("onednn_qlinear: the weight must be [out_features, in_features]");
  if (s.post_ops.sum) throw Error("onednn_qlinear: no residual sum");
  in_features_ = s.weight.size(1);
  if (!has_int8_dot_product() && !fits_16bit_pair_sums(s.weight)) {
    // Without VNNI, oneDNN's int8 matmul multiplies u8 x s8 pairs into saturating 16-bit sums
    // unless the weights have 7 bits (fits_16bit_pair_sums): the reference arithmetic in
    // float instead, exact and slower.
    float_weight_ = s.weight.to(at::kFloat) * s.weight_scales.to(at::kFloat).view({-1, 1});
    return;
  }
  // The input's zero point folded into the bias: sum_k (x_k - zp) w_nk = sum_k x_k w_nk - zp sum_k w_nk.
  // Exact, and oneDNN's gemm-based int8 matmul (CPUs without VNNI) gets runtime source zero points wrong.
  if (src_zero_point_ != 0) {
    at::Tensor compensation = s.weight.to(at::kLong).sum(1) * src_zero_point_;
    at::Tensor b = bias_.defined() ? bias_.to(at::kLong) : at::zeros({out_channels_}, at::kLong);
    bias_ = (b - compensation).clamp(INT32_MIN, INT32_MAX).to(at::kInt).contiguous();
    src_zero_point_ = 0;
  }
  // The plain [out, in] row-major weight is the {in, out} matrix in layout ba.
  weights_ = std::make_unique<PackedWeights>(s.weight.contiguous(), dims{in_features_, out_channels_}, tag::ba);
}

std::shared_ptr<const PackedQLinear::Kernel> PackedQLinear::kernel(int64_t rows) const {
  return kernels_.get(rows, [&] {
    dnnl::memory::desc src({rows, in_features_}, dt::u8, tag::ab);
    dnnl::memory::desc dst({rows, out_channels_}, state_.output_float ? dt::f32 : dt::u8, tag::ab);
    dnnl::memory::desc wei({in_features_, out_channels_}, dt::s8, tag::any);
    dnnl::memory::desc bias;
    if (bias_.defined()) bias = dnnl::memory::desc({1, out_channels_}, dt::s32, tag::ab);
    dnnl::matmul::desc d(src, wei, bias, dst);
    dnnl::matmul::primitive_desc pd(d, attr(1 << 1), engine());
    return Kernel{dnnl::matmul(pd), weights_->get(pd.weights_desc()), src, dst, pd.scratchpad_desc().get_size(),
                  pd.impl_info_str()};
  });
}

at::Tensor PackedQLinear::run(const at::Tensor& input) const {
  check_input(input, "onednn_qlinear");
  if (input.dim() < 1 || input.size(-1) != in_features_)
    throw Error("onednn_qlinear: expected an input [..., " + std::to_string(in_features_) + "], got " +
                sizes_str(input.sizes()));
  if (float_weight_.defined())
    return float_output(at::linear(input.dequantize(), float_weight_, state_.bias ? *state_.bias : at::Tensor()));
  at::Tensor x = input.contiguous();
  const int64_t rows = x.numel() / in_features_;
  std::vector<int64_t> out_sizes = input.sizes().vec();
  out_sizes.back() = out_channels_;
  at::Tensor out = make_output(out_sizes, at::MemoryFormat::Contiguous, c10::nullopt, "onednn_qlinear");
  if (rows == 0) return out;  // oneDNN 2.6's AVX-512 int8 matmul divides by zero making a primitive for no rows
  auto k = kernel(rows);
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, memory_of(k->src, x)},
                                             {DNNL_ARG_WEIGHTS, k->weights},
                                             {DNNL_ARG_DST, memory_of(k->dst, out)}};
  add_args(args, dnnl::memory::desc({1, out_channels_}, dt::s32, tag::ab));
  execute(k->primitive, args, k->scratchpad_bytes);
  return out;
}

std::string PackedQLinear::implementation(at::IntArrayRef sizes) const {
  if (float_weight_.defined()) return "aten:float (no VNNI, 8-bit weights)";
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < sizes.size(); ++i) rows *= sizes[i];
  return rows == 0 ? "none (no rows)" : kernel(rows)->implementation;
}

std::string PackedQLinear::str() const {
  std::ostringstream os;
  os << "QLinear(" << in_features_ << ", " << out_channels_;
  return os.str() + str_suffix();
}

}  // namespace fx::onednn::detail
