// fxcpp::max_pool2d: aten::max_pool2d (floor mode, no dilation)
// through oneDNN's pooling, in the input's layout (channels_last after the
// oneDNN convolutions). Its JIT kernel takes the ResNet stem's 3x3 / 2 pool
// of [N, 64, 112, 112] in about 0.22 ms per image where ATen's channels_last
// max_pool2d takes 0.5-0.65 ms (one thread).
// fxcpp::adaptive_avg_pool2d: aten::adaptive_avg_pool2d whose output size
// divides the input's (global pooling above all: EfficientNet's 16
// squeeze-excitation blocks, every classifier head) as oneDNN's average
// pooling: ATen reduces a channels_last tensor over H and W with a strided
// loop (efficientnet_b0: 1.7 ms of its 12 ms at one thread).
#include "onednn/packed_ops.h"

#include <fx/error.h>

#include <ATen/Parallel.h>
#include <ATen/ops/adaptive_avg_pool2d.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/max_pool2d.h>
#include <torch/library.h>

#include <tuple>

namespace fx::onednn::detail {
namespace {

using dims = dnnl::memory::dims;

struct PoolKernel {
  dnnl::pooling_v2_forward primitive;
  dnnl::memory::desc src, dst;
  size_t scratchpad_bytes;
};

/// Input sizes [N, C, H, W], layout, dtype, kernel, stride, padding, max
/// (else average), made on one thread (OneThread: a primitive keeps the
/// thread count it was made with).
using PoolKey = std::tuple<std::vector<int64_t>, Layout, c10::ScalarType, std::vector<int64_t>, std::vector<int64_t>,
                           std::vector<int64_t>, bool, bool>;

KernelCache<PoolKey, PoolKernel>& pool_kernels() {
  static KernelCache<PoolKey, PoolKernel> cache;
  return cache;
}

bool pair_of(at::IntArrayRef v, int64_t min) { return v.size() == 2 && v[0] >= min && v[1] >= min; }

/// oneDNN takes the input as it is when it is float / bf16, 4-d, contiguous
/// or channels_last, and the parameters are ones ATen accepts.
bool onednn_can_pool(const at::Tensor& x, at::IntArrayRef k, at::IntArrayRef s, at::IntArrayRef p) {
  if (x.dim() != 4 || (x.scalar_type() != at::kFloat && x.scalar_type() != at::kBFloat16)) return false;
  if (!x.is_contiguous() && !x.is_contiguous(at::MemoryFormat::ChannelsLast)) return false;
  if (!pair_of(k, 1) || !pair_of(s, 1) || !pair_of(p, 0) || x.numel() == 0) return false;
  for (int i = 0; i < 2; ++i)
    if (p[i] > k[i] / 2 || x.size(2 + i) + 2 * p[i] < k[i]) return false;
  return true;
}

/// The [N, C, H, W] output sizes of a floor-mode pooling of `in` ([N, C, H, W]).
std::vector<int64_t> pooled_sizes(at::IntArrayRef in, at::IntArrayRef kernel_size, const std::vector<int64_t>& s,
                                  at::IntArrayRef padding) {
  std::vector<int64_t> out{in[0], in[1], 0, 0};
  for (int i = 0; i < 2; ++i) out[2 + i] = (in[2 + i] + 2 * padding[i] - kernel_size[i]) / s[i] + 1;
  return out;
}

/// oneDNN's max or average (no padding read) pooling of `input`, which
/// onednn_can_pool accepted (or a blocked [N, C/8, H, W, 8] tensor), in
/// floor mode, in the input's layout.
at::Tensor pool(const at::Tensor& input, at::IntArrayRef kernel_size, const std::vector<int64_t>& s,
                at::IntArrayRef padding, bool max) {
  // A tensor that is both (size-1 dims) has the same memory either way.
  const Layout layout = input.dim() == 5 ? Layout::Blocked : input.is_contiguous() ? Layout::Nchw : Layout::Nhwc;
  const std::vector<int64_t> in =
      layout == Layout::Blocked ? unblocked_sizes(input, "max_pool2d") : input.sizes().vec();
  const std::vector<int64_t> out = pooled_sizes(in, kernel_size, s, padding);
  // oneDNN splits a pooling between threads by output pixel, then by channel
  // block: with fewer pixels than threads (a global pool at batch 1) each
  // thread streams the whole input for its channels, slower than one thread
  // alone (efficientnet_b0's [1, 32, 112, 112]: 85 us on two, 30 on one).
  const bool alone = out[0] * out[2] * out[3] < at::get_num_threads();
  const OneThread one_thread(alone);
  PoolKey key{in, layout, input.scalar_type(), kernel_size.vec(), s, padding.vec(), max, alone};
  auto k = pool_kernels().get(key, [&] {
    const auto dt = data_type(input.scalar_type());
    dnnl::memory::desc src = layout_desc(in, dt, layout);
    dnnl::memory::desc dst = layout_desc(out, dt, layout);
    // The right padding that gives floor mode's output size.
    dims pad_l(padding.begin(), padding.end()), pad_r(2);
    for (int i = 0; i < 2; ++i)
      pad_r[i] = (out[2 + i] - 1) * s[i] + kernel_size[i] - in[2 + i] - padding[i];
    const auto algorithm = max ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_exclude_padding;
    dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, algorithm, src, dst,
                                     dims(s.begin(), s.end()), dims(kernel_size.begin(), kernel_size.end()),
                                     dims{0, 0}, pad_l, pad_r);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::pooling_v2_forward::primitive_desc pd(d, attr, engine());
    return PoolKernel{dnnl::pooling_v2_forward(pd), src, dst, pd.scratchpad_desc().get_size()};
  });
  at::Tensor result =
      layout == Layout::Blocked
          ? at::empty(blocked_sizes(out), input.options().memory_format(at::MemoryFormat::Contiguous))
          : at::empty(out, input.options().memory_format(layout == Layout::Nhwc ? at::MemoryFormat::ChannelsLast
                                                                                 : at::MemoryFormat::Contiguous));
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, memory_of(k->src, input)},
                                             {DNNL_ARG_DST, memory_of(k->dst, result)}};
  execute(k->primitive, args, k->scratchpad_bytes);
  return result;
}

/// max_pool2d of a blocked tensor (block_activations): oneDNN's, in the blocked layout.
at::Tensor blocked_max_pool2d(const at::Tensor& input, at::IntArrayRef kernel_size, const std::vector<int64_t>& s,
                              at::IntArrayRef padding) {
  const std::vector<int64_t> in = unblocked_sizes(input, "max_pool2d");
  if (input.scalar_type() != at::kFloat || !pair_of(kernel_size, 1) || !pair_of(s, 1) || !pair_of(padding, 0))
    throw Error("max_pool2d: a blocked input takes float32 and two kernel sizes, strides and paddings");
  for (int i = 0; i < 2; ++i)
    if (padding[i] > kernel_size[i] / 2 || in[2 + i] + 2 * padding[i] < kernel_size[i])
      throw Error("max_pool2d: the kernel " + sizes_str(kernel_size) + " with padding " + sizes_str(padding) +
                  " does not fit the blocked input " + sizes_str(in));
  if (input.is_meta())
    return at::empty(blocked_sizes(pooled_sizes(in, kernel_size, s, padding)), input.options());
  return pool(input.contiguous(), kernel_size, s, padding, /*max=*/true);
}

at::Tensor max_pool2d(const at::Tensor& input, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                      at::IntArrayRef padding) {
  const std::vector<int64_t> s = stride.empty() ? kernel_size.vec() : stride.vec();
  if (input.dim() == 5) return blocked_max_pool2d(input, kernel_size, s, padding);
  // ATen computes it (meta tensors: ShapeProp::propagate_meta), or raises its error.
  // The dilation spelled out: a quantized max_pool2d reads two of them (given
  // one, it read (1, 0) and refused the pool).
  if (input.is_meta() || !onednn_can_pool(input, kernel_size, s, padding))
    return at::max_pool2d(input, kernel_size, s, padding, /*dilation=*/{1, 1});
  return pool(input, kernel_size, s, padding, /*max=*/true);
}

at::Tensor adaptive_avg_pool2d(const at::Tensor& input, at::IntArrayRef output_size) {
  // An output size dividing the input's: every window is kernel = stride =
  // input / output, as ATen's adaptive windows are then. Anything else
  // (and meta tensors, other dtypes, ATen's own errors) goes to ATen.
  const bool divides = output_size.size() == 2 && input.dim() == 4 && output_size[0] >= 1 && output_size[1] >= 1 &&
                       input.size(2) % output_size[0] == 0 && input.size(3) % output_size[1] == 0;
  if (input.is_meta() || !divides) return at::adaptive_avg_pool2d(input, output_size);
  const std::vector<int64_t> k{input.size(2) / output_size[0], input.size(3) / output_size[1]};
  if (!onednn_can_pool(input, k, k, {0, 0})) return at::adaptive_avg_pool2d(input, output_size);
  return pool(input, k, k, {0, 0}, /*max=*/false);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(fxcpp, m) {
  m.def("max_pool2d(Tensor input, int[2] kernel_size, int[2] stride=[], int[2] padding=0) -> Tensor",
        &max_pool2d);
  m.def("adaptive_avg_pool2d(Tensor input, int[2] output_size) -> Tensor", &adaptive_avg_pool2d);
}

}  // namespace fx::onednn::detail
