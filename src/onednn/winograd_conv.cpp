// fxcpp::winograd_conv2d / winograd_conv2d_backward: a training step's 3x3
// convolutions by oneDNN's Winograd kernels (forward, input gradient and
// weight gradient), for the training compiler's conv_as_winograd pass.
//
// Winograd's F(4x4, 3x3) computes a 3x3 convolution with 2.25x fewer
// multiplications than the direct algorithm; oneDNN 2.6 has it for float32
// on AVX-512 (jit_wino_4x3: forward_training, backward_data,
// backward_weights), in its blocked nChw16c layout. The activations arrive
// as the graph keeps them (NHWC or NCHW), so each call reorders its inputs
// into the blocked layout and its outputs back, in buffers of the call;
// measured with those reorders on an AMD EPYC Zen 5, 1 thread, forward +
// both gradients: 0.64x ATen's time for 64 channels on 16x16 maps at
// batch 32, 0.66x for 128 on 8x8, 0.56x for 256 on 4x4, 0.74x for 64 on
// 16x16 at batch 8; and 1.21x for 256 on 4x4 at batch 8 (too few tiles),
// which is why the pass asks for enough output positions. Results differ
// from the direct algorithm's by rounding (~2e-6 of the largest value).
#include "onednn/context.h"

#include <fx/error.h>

#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <optional>
#include <sstream>
#include <tuple>

namespace fx::onednn {
namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

/// The primitives of one convolution geometry and its tensors' layouts.
struct WinogradKernels {
  dnnl::convolution_forward::primitive_desc forward_pd;
  dnnl::convolution_backward_data::primitive_desc backward_data_pd;
  dnnl::convolution_backward_weights::primitive_desc backward_weights_pd;
  dnnl::convolution_forward forward;
  dnnl::convolution_backward_data backward_data;
  dnnl::convolution_backward_weights backward_weights;
};

/// x's sizes, w's sizes, padding.
using WinogradKey = std::tuple<std::vector<int64_t>, std::vector<int64_t>, int64_t, int64_t>;

detail::KernelCache<WinogradKey, std::optional<WinogradKernels>>& kernel_cache() {
  static detail::KernelCache<WinogradKey, std::optional<WinogradKernels>> cache;
  return cache;
}

/// The kernels for x [N, C, H, W], w [Co, C, 3, 3] and padding (ph, pw), or
/// nullopt where oneDNN has no Winograd kernel for them (no AVX-512, channel
/// counts its blocking does not take).
std::shared_ptr<const std::optional<WinogradKernels>> kernels_for(at::IntArrayRef x, at::IntArrayRef w, int64_t ph,
                                                                   int64_t pw) {
  WinogradKey key{x.vec(), w.vec(), ph, pw};
  return kernel_cache().get(key, [&]() -> std::optional<WinogradKernels> {
    if (!has_winograd_kernels()) return std::nullopt;
    const int64_t ho = x[2] + 2 * ph - 2, wo = x[3] + 2 * pw - 2;
    const dnnl::memory::desc src({x[0], x[1], x[2], x[3]}, dt::f32, tag::any),
        weights({w[0], w[1], 3, 3}, dt::f32, tag::any), dst({x[0], w[0], ho, wo}, dt::f32, tag::any);
    const dnnl::memory::dims strides{1, 1}, padding{ph, pw};
    const auto algorithm = dnnl::algorithm::convolution_winograd;
    const dnnl::primitive_attr attr = detail::make_attr(PostOps{});
    try {
      dnnl::convolution_forward::primitive_desc fwd(
          dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algorithm, src, weights, dst, strides,
                                          padding, padding),
          attr, detail::engine());
      dnnl::convolution_backward_data::primitive_desc bwd_data(
          dnnl::convolution_backward_data::desc(algorithm, src, weights, dst, strides, padding, padding), attr,
          detail::engine(), fwd);
      dnnl::convolution_backward_weights::primitive_desc bwd_weights(
          dnnl::convolution_backward_weights::desc(algorithm, src, weights, dst, strides, padding, padding), attr,
          detail::engine(), fwd);
      return WinogradKernels{fwd,
                             bwd_data,
                             bwd_weights,
                             dnnl::convolution_forward(fwd),
                             dnnl::convolution_backward_data(bwd_data),
                             dnnl::convolution_backward_weights(bwd_weights)};
    } catch (const dnnl::error&) {
      return std::nullopt;
    }
  });
}

/// The blocked copies and the primitives' scratchpads live as long as one
/// call (detail::CallScratch): in a training step's memory plan they share
/// the graph's arena with its other temporaries, where a per-thread
/// scratchpad kept the largest (backward-weights' 14 MB at resnet18's batch
/// 8) for good.
using detail::CallScratch;

/// `t` in layout `md`: t's own memory when it already is, else a reorder into a buffer of `scratch`.
dnnl::memory blocked(const at::Tensor& t, const dnnl::memory::desc& md, CallScratch& scratch) {
  const dnnl::memory::desc plain = detail::strided_desc(t);
  if (plain == md) return detail::memory_of(md, t);
  dnnl::memory user = detail::memory_of(plain, t);
  dnnl::memory packed(md, detail::engine(), scratch.get(md.get_size()));
  dnnl::reorder(user, packed).execute(detail::stream(), user, packed);
  return packed;
}

/// A new tensor of `sizes` in `like`'s layout (channels_last or contiguous)
/// and a memory that a primitive writing layout `md` fills: the tensor's own
/// memory when md is that layout, else a buffer of `scratch`, reordered into
/// the tensor by finish().
struct Output {
  at::Tensor tensor;
  dnnl::memory user, primitive;

  Output(at::IntArrayRef sizes, const at::Tensor& like, const dnnl::memory::desc& md, CallScratch& scratch) {
    tensor = at::empty(sizes, like.options(), like.suggest_memory_format());
    user = detail::memory_of(detail::strided_desc(tensor), tensor);
    primitive =
        user.get_desc() == md ? user : dnnl::memory(md, detail::engine(), scratch.get(md.get_size()));
  }
  at::Tensor finish() {
    if (primitive != user) dnnl::reorder(primitive, user).execute(detail::stream(), primitive, user);
    return tensor;
  }
};

/// Checks the operands of `op`, throwing fx::Error naming what does not fit.
void check(const char* op, const at::Tensor& x, const at::Tensor& w, at::IntArrayRef padding) {
  std::ostringstream os;
  if (x.dim() != 4 || w.dim() != 4 || w.size(2) != 3 || w.size(3) != 3 || w.size(1) != x.size(1))
    os << op << ": expected an input [N, C, H, W] and a weight [Co, C, 3, 3], got " << x.sizes() << " and "
       << w.sizes();
  else if (x.scalar_type() != at::kFloat || w.scalar_type() != at::kFloat)
    os << op << ": takes float32 tensors, got " << x.scalar_type() << " and " << w.scalar_type();
  else if (padding.size() != 2 || padding[0] < 0 || padding[0] > 1 || padding[1] < 0 || padding[1] > 1)
    os << op << ": padding must be two values of 0 or 1, got " << padding;
  else if (x.size(2) + 2 * padding[0] < 3 || x.size(3) + 2 * padding[1] < 3)
    os << op << ": the 3x3 kernel does not fit the " << x.size(2) << "x" << x.size(3) << " input";
  if (!os.str().empty()) throw Error(os.str());
}

const WinogradKernels& kernels_or_throw(const char* op, const at::Tensor& x, const at::Tensor& w,
                                        at::IntArrayRef padding,
                                        std::shared_ptr<const std::optional<WinogradKernels>>& holder) {
  holder = kernels_for(x.sizes(), w.sizes(), padding[0], padding[1]);
  if (!holder->has_value()) {
    std::ostringstream os;
    os << op << ": oneDNN has no Winograd kernel for an input " << x.sizes() << " and a weight " << w.sizes()
       << " on this CPU (ISA " << cpu_isa() << ")";
    throw Error(os.str());
  }
  return **holder;
}

std::vector<int64_t> output_sizes(const at::Tensor& x, const at::Tensor& w, at::IntArrayRef padding) {
  return {x.size(0), w.size(0), x.size(2) + 2 * padding[0] - 2, x.size(3) + 2 * padding[1] - 2};
}

at::Tensor winograd_conv2d(const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef padding) {
  check("fxcpp::winograd_conv2d", input, weight, padding);
  const std::vector<int64_t> out_sizes = output_sizes(input, weight, padding);
  if (input.is_meta()) return at::empty(out_sizes, input.options(), input.suggest_memory_format());
  std::shared_ptr<const std::optional<WinogradKernels>> holder;
  const WinogradKernels& k = kernels_or_throw("fxcpp::winograd_conv2d", input, weight, padding, holder);
  CallScratch scratch;
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, blocked(input, k.forward_pd.src_desc(), scratch)},
      {DNNL_ARG_WEIGHTS, blocked(weight, k.forward_pd.weights_desc(), scratch)}};
  Output out(out_sizes, input, k.forward_pd.dst_desc(), scratch);
  args.emplace(DNNL_ARG_DST, out.primitive);
  detail::execute(k.forward, args, k.forward_pd.scratchpad_desc().get_size(), scratch);
  return out.finish();
}

std::tuple<at::Tensor, at::Tensor> winograd_conv2d_backward(const at::Tensor& grad_output, const at::Tensor& input,
                                                            const at::Tensor& weight, at::IntArrayRef padding,
                                                            std::array<bool, 2> output_mask) {
  const char* op = "fxcpp::winograd_conv2d_backward";
  check(op, input, weight, padding);
  const std::vector<int64_t> out_sizes = output_sizes(input, weight, padding);
  if (grad_output.sizes() != at::IntArrayRef(out_sizes) || grad_output.scalar_type() != at::kFloat) {
    std::ostringstream os;
    os << op << ": expected a float32 grad_output of " << at::IntArrayRef(out_sizes) << ", got "
       << grad_output.scalar_type() << " " << grad_output.sizes();
    throw Error(os.str());
  }
  at::Tensor grad_input, grad_weight;
  if (input.is_meta()) {
    if (output_mask[0]) grad_input = at::empty(input.sizes(), input.options(), input.suggest_memory_format());
    if (output_mask[1]) grad_weight = at::empty(weight.sizes(), weight.options(), weight.suggest_memory_format());
    return {grad_input, grad_weight};
  }
  std::shared_ptr<const std::optional<WinogradKernels>> holder;
  const WinogradKernels& k = kernels_or_throw(op, input, weight, padding, holder);
  if (!output_mask[0] && !output_mask[1]) return {grad_input, grad_weight};
  CallScratch scratch;
  const dnnl::memory dy = blocked(grad_output, k.backward_data_pd.diff_dst_desc(), scratch);
  if (output_mask[1]) {
    CallScratch weights_scratch;  // gone before the input gradient's buffers are made
    const dnnl::memory dy_w = k.backward_weights_pd.diff_dst_desc() == dy.get_desc()
                                  ? dy
                                  : blocked(grad_output, k.backward_weights_pd.diff_dst_desc(), weights_scratch);
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, blocked(input, k.backward_weights_pd.src_desc(), weights_scratch)}, {DNNL_ARG_DIFF_DST, dy_w}};
    Output dw(weight.sizes(), weight, k.backward_weights_pd.diff_weights_desc(), weights_scratch);
    args.emplace(DNNL_ARG_DIFF_WEIGHTS, dw.primitive);
    detail::execute(k.backward_weights, args, k.backward_weights_pd.scratchpad_desc().get_size(), weights_scratch);
    grad_weight = dw.finish();
  }
  if (output_mask[0]) {
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_WEIGHTS, blocked(weight, k.backward_data_pd.weights_desc(), scratch)}};
    Output dx(input.sizes(), input, k.backward_data_pd.diff_src_desc(), scratch);
    args.emplace(DNNL_ARG_DIFF_SRC, dx.primitive);
    detail::execute(k.backward_data, args, k.backward_data_pd.scratchpad_desc().get_size(), scratch);
    grad_input = dx.finish();
  }
  return {grad_input, grad_weight};
}

}  // namespace

bool has_winograd_conv2d(at::IntArrayRef input_sizes, at::IntArrayRef weight_sizes, at::IntArrayRef padding) {
  if (input_sizes.size() != 4 || weight_sizes.size() != 4 || padding.size() != 2 || weight_sizes[2] != 3 ||
      weight_sizes[3] != 3 || weight_sizes[1] != input_sizes[1] || padding[0] < 0 || padding[0] > 1 ||
      padding[1] < 0 || padding[1] > 1 || input_sizes[2] + 2 * padding[0] < 3 || input_sizes[3] + 2 * padding[1] < 3)
    return false;
  return kernels_for(input_sizes, weight_sizes, padding[0], padding[1])->has_value();
}

TORCH_LIBRARY_FRAGMENT(fxcpp, m) {
  m.def("winograd_conv2d(Tensor input, Tensor weight, int[2] padding) -> Tensor", &winograd_conv2d);
  m.def(
      "winograd_conv2d_backward(Tensor grad_output, Tensor input, Tensor weight, int[2] padding, bool[2] output_mask) "
      "-> (Tensor, Tensor)",
      &winograd_conv2d_backward);
}

}  // namespace fx::onednn
