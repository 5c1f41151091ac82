// fxcpp::onednn_conv2d: a 2-d convolution through oneDNN with packed
// weights, channels_last output and fused bias / residual sum / activation.
#include "onednn/packed_ops.h"

#include <fx/error.h>


#include <sstream>

namespace fx::onednn::detail {
namespace {

using dims = dnnl::memory::dims;
using tag = dnnl::memory::format_tag;

std::string sizes_str(at::IntArrayRef s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

void check_pair(const std::vector<int64_t>& v, const char* name, int64_t min) {
  if (v.size() != 2 || v[0] < min || v[1] < min)
    throw Error(std::string("onednn_conv2d: ") + name + " must be two integers >= " + std::to_string(min) +
                ", got " + sizes_str(v));
}

}  // namespace

at::Tensor to_dtype(const at::Tensor& input, c10::ScalarType dtype) {
  return input.scalar_type() == dtype ? input : input.to(dtype);
}

PackedOp::PackedOp(PostOps post_ops, c10::ScalarType dtype, const char* op)
    : post_ops_(std::move(post_ops)), dtype_(dtype), out_dtype_(dtype) {
  check_dtype(dtype, op);
}

std::string PackedOp::str_suffix() const {
  std::string s;
  if (!bias_.defined()) s += ", bias=False";
  if (dtype_ == at::kBFloat16) s += ", bf16";
  const std::string p = post_ops_.str();
  if (!p.empty()) s += ", " + p;
  return s + ")";
}

PackedConv::PackedConv(const at::Tensor& weight, const c10::optional<at::Tensor>& bias, ConvParams params,
                       PostOps post_ops, c10::ScalarType dtype)
    : PackedOp(std::move(post_ops), dtype, "onednn_conv2d"), params_(std::move(params)) {
  if (!weight.defined() || weight.dim() != 4 || weight.scalar_type() != at::kFloat)
    throw Error("onednn_conv2d: the weight must be a float32 tensor [out, in / groups, kh, kw]");
  check_pair(params_.stride, "stride", 1);
  check_pair(params_.padding, "padding", 0);
  check_pair(params_.dilation, "dilation", 1);
  const int64_t g = params_.groups;
  if (g < 1 || weight.size(0) % g != 0)
    throw Error("onednn_conv2d: groups must be >= 1 and divide the " + std::to_string(weight.size(0)) +
                " output channels, got " + std::to_string(g));
  out_channels_ = weight.size(0);
  in_channels_ = weight.size(1) * g;
  kh_ = weight.size(2);
  kw_ = weight.size(3);
  if (bias && bias->defined()) {
    if (bias->dim() != 1 || bias->size(0) != out_channels_)
      throw Error("onednn_conv2d: the bias must have " + std::to_string(out_channels_) + " elements");
    bias_ = bias->to(at::kFloat).contiguous();
  }
  at::Tensor plain = weight.contiguous();
  if (g == 1)
    weights_ = std::make_unique<PackedWeights>(plain, dims{out_channels_, in_channels_, kh_, kw_}, tag::oihw);
  else
    weights_ = std::make_unique<PackedWeights>(plain, dims{g, out_channels_ / g, in_channels_ / g, kh_, kw_}, tag::goihw);
}

std::vector<int64_t> PackedConv::output_sizes(at::IntArrayRef s) const {
  std::vector<int64_t> out{s[0], out_channels_, 0, 0};
  const int64_t k[2] = {kh_, kw_};
  for (int i = 0; i < 2; ++i) {
    const int64_t extent = params_.dilation[i] * (k[i] - 1) + 1;
    out[2 + i] = (s[2 + i] + 2 * params_.padding[i] - extent) / params_.stride[i] + 1;
    if (s[2 + i] + 2 * params_.padding[i] < extent)
      throw Error("onednn_conv2d: input " + sizes_str(s) + " is smaller than the kernel " + std::to_string(kh_) +
                  "x" + std::to_string(kw_));
  }
  return out;
}

std::shared_ptr<const PackedConv::Kernel> PackedConv::kernel(at::IntArrayRef sizes, bool channels_last,
                                                             c10::ScalarType src_dtype) const {
  Key key{sizes.vec(), channels_last, src_dtype};
  return kernels_.get(key, [&] {
    const auto dt = data_type(dtype_);
    const std::vector<int64_t> out = output_sizes(sizes);
    dnnl::memory::desc src(dims(sizes.begin(), sizes.end()), dt, channels_last ? tag::nhwc : tag::nchw);
    dnnl::memory::desc dst(dims(out.begin(), out.end()), data_type(out_dtype_), tag::nhwc);
    const int64_t g = params_.groups;
    dims wdims = g == 1 ? dims{out_channels_, in_channels_, kh_, kw_}
                        : dims{g, out_channels_ / g, in_channels_ / g, kh_, kw_};
    dnnl::memory::desc wei(wdims, dt, tag::any);
    dnnl::memory::desc bias;
    if (bias_.defined()) bias = dnnl::memory::desc({out_channels_}, dnnl::memory::data_type::f32, tag::a);
    dims stride(params_.stride.begin(), params_.stride.end());
    dims dilate{params_.dilation[0] - 1, params_.dilation[1] - 1};
    dims pad(params_.padding.begin(), params_.padding.end());
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src,
                                      wei, bias, dst, stride, dilate, pad, pad);
    dnnl::convolution_forward::primitive_desc pd(d, make_attr(post_ops_), engine());
    return Kernel{dnnl::convolution_forward(pd), weights_->get(pd.weights_desc()), src, dst,
                  pd.scratchpad_desc().get_size()};
  });
}

at::Tensor PackedConv::run(const at::Tensor& input, const c10::optional<at::Tensor>& residual) const {
  if (!input.defined() || input.dim() != 4 || input.size(1) != in_channels_)
    throw Error("onednn_conv2d: expected an input [N, " + std::to_string(in_channels_) + ", H, W], got " +
                (input.defined() ? sizes_str(input.sizes()) : std::string("None")));
  // Always channels_last: oneDNN has no fast kernel for an NCHW source with
  // an NHWC destination (the 3-channel stem would run its reference code).
  at::Tensor x = to_dtype(input, dtype_).contiguous(at::MemoryFormat::ChannelsLast);
  const std::vector<int64_t> out_sizes = output_sizes(x.sizes());
  if (x.is_meta())  // shapes only (ShapeProp::propagate_meta, FLOP counts): no kernel runs
    return make_output(out_sizes, x.options().dtype(out_dtype_), at::MemoryFormat::ChannelsLast, post_ops_, residual,
                       "onednn_conv2d");
  auto k = kernel(x.sizes(), true, dtype_);
  at::Tensor out = make_output(out_sizes, x.options().dtype(out_dtype_), at::MemoryFormat::ChannelsLast, post_ops_,
                               residual, "onednn_conv2d");
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, memory_of(k->src, x)},
                                             {DNNL_ARG_WEIGHTS, k->weights},
                                             {DNNL_ARG_DST, memory_of(k->dst, out)}};
  if (bias_.defined())
    args.emplace(DNNL_ARG_BIAS, memory_of(dnnl::memory::desc({out_channels_}, dnnl::memory::data_type::f32, tag::a),
                                          bias_));
  execute(k->primitive, args, k->scratchpad_bytes);
  return out;
}

PackedState PackedOp::base_state(PackedState::Kind kind, at::IntArrayRef weight_sizes) const {
  PackedState s;
  s.kind = kind;
  s.weight = weights_->plain(weight_sizes);
  if (bias_.defined()) s.bias = bias_.reshape({-1});
  s.post_ops = post_ops_;
  s.dtype = dtype_;
  s.output_dtype = out_dtype_;
  return s;
}

PackedState PackedConv::state() const {
  PackedState s = base_state(PackedState::Kind::Conv2d, {out_channels_, in_channels_ / params_.groups, kh_, kw_});
  s.params = params_;
  return s;
}

std::string PackedConv::str() const {
  std::ostringstream os;
  os << "Conv2d(" << in_channels_ << ", " << out_channels_ << ", kernel=(" << kh_ << ", " << kw_ << ")";
  if (params_.stride != std::vector<int64_t>{1, 1}) os << ", stride=" << sizes_str(params_.stride);
  if (params_.padding != std::vector<int64_t>{0, 0}) os << ", padding=" << sizes_str(params_.padding);
  if (params_.dilation != std::vector<int64_t>{1, 1}) os << ", dilation=" << sizes_str(params_.dilation);
  if (params_.groups != 1) os << ", groups=" << params_.groups;
  return os.str() + str_suffix();
}

}  // namespace fx::onednn::detail
