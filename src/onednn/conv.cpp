// fxcpp::onednn_conv2d: a 2-d convolution through oneDNN with packed
// weights, channels_last output and fused bias / residual sum / activation.
#include "onednn/gemm_conv.h"
#include "onednn/gemm_winograd.h"
#include "onednn/silu.h"
#include "onednn/packed_ops.h"

#include <fx/error.h>

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <sstream>

namespace fx::onednn::detail {
namespace {

using dims = dnnl::memory::dims;
using tag = dnnl::memory::format_tag;

/// Multiply-adds below which a convolution runs on one thread (OneThread):
/// efficientnet_b0's squeeze-excitation layers at batch 1 (one pixel, at
/// most 1152 × 48), 10-21 us on one thread and 14-27 us on two (AMD EPYC
/// Zen 5 held at AVX2). Depthwise layers of 100K-500K multiply-adds were
/// slower on one (conv 240 × 3×3 / 2 at 14×14: 54 us against 38-50).
constexpr int64_t kOneThreadMacs = int64_t{1} << 16;

/// Output values from which SiLU runs after a float32 convolution on more
/// than one thread too (silu_after): the pass is parallel, and over a
/// large enough output it beats oneDNN's swish post-op. efficientnet_b0 at
/// 2 threads, batch 1, on the AMD EPYC Zen 5, paired runs against 2^20
/// (where only [1, 96, 112, 112] passed it): 0.965 of the time held at
/// AVX2, 0.955 at AVX-512; 2^14, which takes every SiLU layer, gave 0.995
/// of 2^17's time.
constexpr int64_t kSiluPassValues = int64_t{1} << 17;

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
  if (dtype == at::kBFloat16 && !has_bf16_kernels())
    throw Error(std::string(op) + ": oneDNN has no bfloat16 kernels on this CPU (ISA " + cpu_isa() +
                "; bf16 needs AVX-512): pack float32 (fx::onednn::has_bf16_kernels)");
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
  // A Winograd layout is made from the plain weights only (and cannot be read back).
  if (g == 1)
    weights_ = std::make_unique<PackedWeights>(plain, dims{out_channels_, in_channels_, kh_, kw_}, tag::oihw,
                                               winograd_fits());
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

c10::optional<dnnl::convolution_forward::primitive_desc> PackedConv::winograd(const std::vector<int64_t>& in,
                                                                              const std::vector<int64_t>& out) const {
  if (!winograd_fits() || out_dtype_ != at::kFloat || out[2] < 14 || out[3] < 14) return c10::nullopt;
  const auto f32 = dnnl::memory::data_type::f32;
  dnnl::memory::desc src(dims(in.begin(), in.end()), f32, tag::any);
  dnnl::memory::desc dst(dims(out.begin(), out.end()), f32, tag::any);
  dnnl::memory::desc wei({out_channels_, in_channels_, 3, 3}, f32, tag::any);
  dnnl::memory::desc bias;
  if (bias_.defined()) bias = dnnl::memory::desc({out_channels_}, f32, tag::a);
  dims pad(params_.padding.begin(), params_.padding.end());
  try {
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_winograd, src,
                                      wei, bias, dst, {1, 1}, {0, 0}, pad, pad);
    const dnnl::primitive_attr attr = make_attr(post_ops_);
    // F(4×4, 3×3) does fewer multiplications, but its transformed weights
    // are 4× the direct ones (F(2×2, 3×3): 16/9×): at batch 1 a ResNet
    // streams its weights from memory once per image and F(2×2) is the
    // faster (resnet18: 18.6 ms against 20.9 ms with F(4×4), direct 21.1);
    // from batch 4 on, the weights stay in cache across the images and
    // F(4×4) is (batch 8: 124 ms, F(2×2) 129 ms, direct 149 ms).
    const char* want = in[0] >= 4 ? "wino_4x3" : "wino_2x3";
    dnnl::convolution_forward::primitive_desc pd(d, attr, engine());
    do {
      if (std::string(pd.impl_info_str()).find(want) != std::string::npos) return pd;
    } while (pd.next_impl());
    return dnnl::convolution_forward::primitive_desc(d, attr, engine());
  } catch (const dnnl::error&) {
    return c10::nullopt;  // no Winograd kernel for these shapes or post-ops: direct
  }
}

bool PackedConv::silu_after(at::IntArrayRef out) const {
  return post_ops_.activation == Activation::Silu && out_dtype_ == at::kFloat &&
         (at::get_num_threads() == 1 || c10::multiply_integers(out) >= kSiluPassValues);
}

bool PackedConv::runs_alone(at::IntArrayRef out) const {
  return c10::multiply_integers(out) * (in_channels_ / params_.groups) * kh_ * kw_ < kOneThreadMacs;
}

bool PackedConv::winograd_fits() const {
  return params_.winograd && dtype_ == at::kFloat && params_.groups == 1 && kh_ == 3 && kw_ == 3 &&
         params_.stride == std::vector<int64_t>{1, 1} && params_.dilation == std::vector<int64_t>{1, 1} &&
         in_channels_ % 16 == 0 && out_channels_ % 16 == 0;
}

std::shared_ptr<const PackedConv::Kernel> PackedConv::kernel(at::IntArrayRef sizes, Layout in, bool blocked_out,
                                                             c10::ScalarType src_dtype) const {
  const std::vector<int64_t> out = output_sizes(sizes);
  const bool silu_pass = silu_after(out);
  Key key{sizes.vec(), in, blocked_out, src_dtype, silu_pass, at::get_num_threads() > 1};
  return kernels_.get(key, [&] {
    const auto dt = data_type(dtype_);
    dnnl::memory::desc src = layout_desc(sizes, dt, in);
    dnnl::memory::desc dst = layout_desc(out, data_type(out_dtype_), blocked_out ? Layout::Blocked : Layout::Nhwc);
    // Below AVX-512, fxcpp's own kernels on the packed GEMM where they are the faster (gemm_kernel.h).
    const bool float32 = dtype_ == at::kFloat && out_dtype_ == at::kFloat;
    std::shared_ptr<const GemmKernel> gemm;
    const char* gemm_impl = nullptr;
    if (GemmConv::fits(params_, kh_, kw_, out, in, float32)) {
      auto conv = std::make_shared<const GemmConv>(weights_->plain({out_channels_, in_channels_, kh_, kw_}),
                                                   params_, sizes, out);
      gemm_impl = conv->implementation();
      gemm = std::move(conv);
    } else if (GemmWinograd::fits(params_, kh_, kw_, sizes, out, in, float32)) {
      gemm = std::make_shared<const GemmWinograd>(weights_->plain({out_channels_, in_channels_, kh_, kw_}),
                                                  params_, sizes, out);
      gemm_impl = "winograd_2x3:packed_gemm";
    }
    if (gemm) {
      Kernel k;
      k.gemm = std::move(gemm);
      k.src = src;
      k.dst = dst;
      k.scratchpad_bytes = 0;
      k.impl = gemm_impl;
      return k;
    }
    dnnl::convolution_forward::primitive_desc pd;
    bool direct = false;
    if (auto w = winograd(sizes.vec(), out)) {
      pd = *w;
    } else {
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
      PostOps ops = post_ops_;
      if (silu_pass) ops.activation = Activation::None;
      pd = dnnl::convolution_forward::primitive_desc(d, make_attr(ops), engine());
      direct = true;
    }
    Kernel k;
    k.silu_after = silu_pass && direct;
    k.primitive = dnnl::convolution_forward(pd);
    k.weights = weights_->get(pd.weights_desc());
    k.src = src;
    k.dst = dst;
    k.scratchpad_bytes = pd.scratchpad_desc().get_size();
    k.impl = std::string(pd.impl_info_str()) + (k.silu_after ? " + silu" : "");
    // A Winograd kernel computes in nChw16c: the activations go in and out by reorders.
    k.blocked = pd.src_desc() != src || pd.dst_desc() != dst;
    if (k.blocked) {
      k.blocked_src = pd.src_desc();
      k.blocked_dst = pd.dst_desc();
      k.into_src = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), src, engine(), k.blocked_src));
      k.into_dst = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), dst, engine(), k.blocked_dst));
      k.out_of_dst = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), k.blocked_dst, engine(), dst));
    }
    return k;
  });
}

void PackedConv::check_input(const at::Tensor& input) const {
  if (!input.defined() || input.dim() != 4 || input.size(1) != in_channels_)
    throw Error("onednn_conv2d: expected an input [N, " + std::to_string(in_channels_) + ", H, W], got " +
                (input.defined() ? sizes_str(input.sizes()) : std::string("None")));
}

std::string PackedConv::implementation(at::IntArrayRef sizes) const {
  check_input(at::empty(sizes, at::TensorOptions().device(at::kMeta)));
  const OneThread one_thread(runs_alone(output_sizes(sizes)));  // output_sizes checks the kernel fits
  return kernel(sizes, Layout::Nhwc, false, dtype_)->impl;
}

at::Tensor PackedConv::run(const at::Tensor& input, const c10::optional<at::Tensor>& residual, bool blocked) const {
  if (blocked && (out_channels_ % 8 != 0 || dtype_ != at::kFloat || out_dtype_ != at::kFloat))
    throw Error("onednn_conv2d: a blocked output needs float32 kernels and a multiple of 8 output channels, got " +
                std::to_string(out_channels_));
  at::Tensor x = to_dtype(input, dtype_);
  Layout in = Layout::Nhwc;
  std::vector<int64_t> sizes;
  if (x.dim() == 5) {  // blocked (fxcpp::to_blocked, or another blocked convolution)
    sizes = unblocked_sizes(x, "onednn_conv2d");
    if (sizes[1] != in_channels_)
      throw Error("onednn_conv2d: expected an input [N, " + std::to_string(in_channels_) + ", H, W], got a blocked " +
                  sizes_str(sizes));
    if (!x.is_contiguous()) x = x.contiguous();
    in = Layout::Blocked;
  } else {
    check_input(x);
    // channels_last: oneDNN has no fast kernel for an NCHW source with an
    // NHWC destination (the 3-channel stem would run its reference code).
    // Into a blocked destination it is the other way round: an NCHW stem
    // has its JIT kernel, an NHWC one only the reference code.
    const bool nchw = blocked && in_channels_ < 8;
    const at::MemoryFormat f = nchw ? at::MemoryFormat::Contiguous : at::MemoryFormat::ChannelsLast;
    if (!x.is_contiguous(f)) x = copy_in_format(x, f);
    in = nchw ? Layout::Nchw : Layout::Nhwc;
    sizes = x.sizes().vec();
  }
  const std::vector<int64_t> out_sizes = output_sizes(sizes);
  const std::vector<int64_t> shape = blocked ? blocked_sizes(out_sizes) : out_sizes;
  const at::MemoryFormat format = blocked ? at::MemoryFormat::Contiguous : at::MemoryFormat::ChannelsLast;
  if (x.is_meta())  // shapes only (ShapeProp::propagate_meta, FLOP counts): no kernel runs
    return make_output(shape, x.options().dtype(out_dtype_), format, post_ops_, residual, "onednn_conv2d");
  const OneThread one_thread(runs_alone(out_sizes));
  auto k = kernel(sizes, in, blocked, dtype_);
  at::Tensor out = make_output(shape, x.options().dtype(out_dtype_), format, post_ops_, residual, "onednn_conv2d");
  if (k->gemm) {
    k->gemm->run(x.data_ptr<float>(), in, out, blocked, bias_, post_ops_);
    return out;
  }
  dnnl::memory src = memory_of(k->src, x), dst = memory_of(k->dst, out);
  if (k->blocked) {
    // Winograd: into the blocked layouts (the residual too: the sum post-op
    // reads the destination), the kernel, and back into `out`.
    dnnl::memory bsrc(k->blocked_src, engine(), scratchpad(k->blocked_src.get_size(), 1));
    dnnl::memory bdst(k->blocked_dst, engine(), scratchpad(k->blocked_dst.get_size(), 2));
    std::unordered_map<int, dnnl::memory> in_args{{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, bsrc}};
    execute(k->into_src, in_args, 0);
    if (post_ops_.sum) {
      std::unordered_map<int, dnnl::memory> r{{DNNL_ARG_FROM, dst}, {DNNL_ARG_TO, bdst}};
      execute(k->into_dst, r, 0);
    }
    src = bsrc;
    dst = bdst;
  }
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, k->weights}, {DNNL_ARG_DST, dst}};
  if (bias_.defined())
    args.emplace(DNNL_ARG_BIAS, memory_of(dnnl::memory::desc({out_channels_}, dnnl::memory::data_type::f32, tag::a),
                                          bias_));
  execute(k->primitive, args, k->scratchpad_bytes);
  if (k->blocked) {
    std::unordered_map<int, dnnl::memory> back{{DNNL_ARG_FROM, dst}, {DNNL_ARG_TO, memory_of(k->dst, out)}};
    execute(k->out_of_dst, back, 0);
  }
  if (k->silu_after) silu_(out.data_ptr<float>(), out.numel());
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
  if (winograd_fits()) os << ", winograd";
  return os.str() + str_suffix();
}

}  // namespace fx::onednn::detail
