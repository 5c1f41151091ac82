// fxcpp::layer_norm: aten::layer_norm over a contiguous float tensor's last
// dimension as oneDNN's layer normalization (a JIT kernel; weight and bias
// as its scale and shift): a transformer's norms, where ATen's took 0.2 ms
// per [197, 768] at one thread (vit_b_16: 25 of them, 5 ms). Anything else
// (several normalized dims, another dtype or layout, meta tensors) is
// ATen's layer_norm.
#include "onednn/context.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/layer_norm.h>
#include <torch/library.h>

namespace fx::onednn::detail {
namespace {

struct LayerNormKernel {
  dnnl::layer_normalization_forward primitive;
  dnnl::memory::desc md, param;
  size_t scratchpad_bytes;
};

/// Rows, columns, epsilon, with weight, with bias.
using LayerNormKey = std::tuple<int64_t, int64_t, double, bool, bool>;

KernelCache<LayerNormKey, LayerNormKernel>& layer_norm_kernels() {
  static KernelCache<LayerNormKey, LayerNormKernel> cache;
  return cache;
}

/// A float32 contiguous [n] tensor, or undefined.
bool plain_param(const c10::optional<at::Tensor>& p, int64_t n) {
  return !p || !p->defined() ||
         (p->scalar_type() == at::kFloat && p->dim() == 1 && p->size(0) == n && p->is_contiguous());
}

at::Tensor layer_norm(const at::Tensor& input, at::IntArrayRef normalized_shape, const c10::optional<at::Tensor>& weight,
                      const c10::optional<at::Tensor>& bias, double eps) {
  const int64_t n = input.dim() >= 1 ? input.size(-1) : 0;
  if (input.is_meta() || normalized_shape.size() != 1 || normalized_shape[0] != n || input.scalar_type() != at::kFloat ||
      !input.is_contiguous() || input.numel() == 0 || !plain_param(weight, n) || !plain_param(bias, n))
    return at::layer_norm(input, normalized_shape, weight, bias, eps);
  const bool scale = weight && weight->defined(), shift = bias && bias->defined();
  const int64_t rows = input.numel() / n;
  auto k = layer_norm_kernels().get({rows, n, eps, scale, shift}, [&] {
    const auto f32 = dnnl::memory::data_type::f32;
    dnnl::memory::desc md({rows, n}, f32, dnnl::memory::format_tag::ab);
    auto flags = dnnl::normalization_flags::none;
    if (scale) flags |= dnnl::normalization_flags::use_scale;
    if (shift) flags |= dnnl::normalization_flags::use_shift;
    dnnl::layer_normalization_forward::desc d(dnnl::prop_kind::forward_inference, md, static_cast<float>(eps), flags);
    dnnl::layer_normalization_forward::primitive_desc pd(d, make_attr(PostOps{}), engine());
    return LayerNormKernel{dnnl::layer_normalization_forward(pd), md,
                           dnnl::memory::desc({n}, f32, dnnl::memory::format_tag::a), pd.scratchpad_desc().get_size()};
  });
  at::Tensor out = at::empty(input.sizes(), input.options());
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, memory_of(k->md, input)},
                                             {DNNL_ARG_DST, memory_of(k->md, out)}};
  if (scale) args.emplace(DNNL_ARG_SCALE, memory_of(k->param, *weight));
  if (shift) args.emplace(DNNL_ARG_SHIFT, memory_of(k->param, *bias));
  execute(k->primitive, args, k->scratchpad_bytes);
  return out;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(fxcpp, m) {
  m.def("layer_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, Tensor? bias=None, float eps=1e-05) "
        "-> Tensor",
        &layer_norm);
}

}  // namespace fx::onednn::detail
