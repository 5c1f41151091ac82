// fxcpp::softmax: aten::softmax over a contiguous float tensor's last
// dimension as oneDNN's softmax (a JIT kernel): attention's probabilities,
// where ATen's took 0.84 ms per [12, 197, 197] at one thread (vit_b_16: 10
// ms of its 220). Anything else (another dim, dtype or layout, a dtype
// argument, meta tensors) is ATen's softmax.
#include "onednn/context.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/softmax.h>
#include <torch/library.h>

namespace fx::onednn::detail {
namespace {

struct SoftmaxKernel {
  dnnl::softmax_v2_forward primitive;
  dnnl::memory::desc md;
  size_t scratchpad_bytes;
};

KernelCache<std::vector<int64_t>, SoftmaxKernel>& softmax_kernels() {
  static KernelCache<std::vector<int64_t>, SoftmaxKernel> cache;
  return cache;
}

at::Tensor softmax(const at::Tensor& input, int64_t dim, c10::optional<c10::ScalarType> dtype) {
  const int64_t rank = input.dim();
  const bool last = rank >= 1 && (dim == -1 || dim == rank - 1);
  if (input.is_meta() || dtype || !last || input.scalar_type() != at::kFloat || !input.is_contiguous() ||
      input.numel() == 0)
    return at::softmax(input, dim, dtype);
  // Rows of the last dimension: [rows, n], plain.
  const int64_t n = input.size(-1), rows = input.numel() / n;
  auto k = softmax_kernels().get({rows, n}, [&] {
    dnnl::memory::desc md({rows, n}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab);
    dnnl::softmax_v2_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::softmax_accurate, md, md,
                                     1);
    dnnl::softmax_v2_forward::primitive_desc pd(d, make_attr(PostOps{}), engine());
    return SoftmaxKernel{dnnl::softmax_v2_forward(pd), md, pd.scratchpad_desc().get_size()};
  });
  at::Tensor out = at::empty(input.sizes(), input.options());
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, memory_of(k->md, input)},
                                             {DNNL_ARG_DST, memory_of(k->md, out)}};
  execute(k->primitive, args, k->scratchpad_bytes);
  return out;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(fxcpp, m) {
  m.def("softmax(Tensor input, int dim, ScalarType? dtype=None) -> Tensor", &softmax);
}

}  // namespace fx::onednn::detail
