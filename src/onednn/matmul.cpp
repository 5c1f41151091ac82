// fxcpp::onednn_matmul: batched matmul of two activations (attention's
// q @ k^T and p @ v) through oneDNN, so it does not depend on the BLAS.
#include "onednn/context.h"

#include <fx/error.h>

#include <ATen/ops/empty.h>

#include <sstream>

namespace fx::onednn::detail {
namespace {

using dims = dnnl::memory::dims;

/// A kernel for one pair of shapes and strides.
struct MatmulKernel {
  dnnl::matmul primitive;
  dnnl::memory::desc a, b, out;
  size_t scratchpad_bytes;
};

using MatmulKey = std::tuple<std::vector<int64_t>, std::vector<int64_t>, std::vector<int64_t>, std::vector<int64_t>,
                             c10::ScalarType>;

KernelCache<MatmulKey, MatmulKernel>& kernels() {
  static KernelCache<MatmulKey, MatmulKernel> cache;
  return cache;
}

dnnl::memory::desc strided(const at::Tensor& t) {
  return dnnl::memory::desc(dims(t.sizes().begin(), t.sizes().end()), data_type(t.scalar_type()),
                            dims(t.strides().begin(), t.strides().end()));
}

/// A view oneDNN reads directly: one of the last two dims dense.
at::Tensor readable(const at::Tensor& t) {
  const int64_t r = t.dim();
  if (t.stride(r - 1) == 1 || t.stride(r - 2) == 1) return t;
  return t.contiguous();
}

}  // namespace

at::Tensor matmul(const at::Tensor& self, const at::Tensor& other) {
  if (self.dim() < 2 || self.dim() != other.dim() || self.sizes().slice(0, self.dim() - 2) !=
      other.sizes().slice(0, other.dim() - 2) || self.size(-1) != other.size(-2) ||
      self.scalar_type() != other.scalar_type()) {
    std::ostringstream os;
    os << "onednn_matmul: expected [..., M, K] and [..., K, N] of one dtype with equal batch sizes, got "
       << self.sizes() << " and " << other.sizes();
    throw Error(os.str());
  }
  at::Tensor a = readable(self), b = readable(other);
  std::vector<int64_t> out_sizes = a.sizes().vec();
  out_sizes.back() = b.size(-1);
  if (a.is_meta()) return at::empty(out_sizes, a.options());  // shapes only (ShapeProp::propagate_meta)
  MatmulKey key{a.sizes().vec(), a.strides().vec(), b.sizes().vec(), b.strides().vec(), a.scalar_type()};
  auto k = kernels().get(key, [&] {
    dnnl::memory::desc out(dims(out_sizes.begin(), out_sizes.end()), data_type(a.scalar_type()),
                           dnnl::memory::format_tag(out_sizes.size() == 3 ? dnnl::memory::format_tag::abc
                                                    : out_sizes.size() == 4 ? dnnl::memory::format_tag::abcd
                                                                            : dnnl::memory::format_tag::ab));
    dnnl::matmul::desc d(strided(a), strided(b), out);
    dnnl::matmul::primitive_desc pd(d, make_attr(PostOps{}), engine());
    return MatmulKernel{dnnl::matmul(pd), strided(a), strided(b), out, pd.scratchpad_desc().get_size()};
  });
  at::Tensor out = at::empty(out_sizes, a.options());
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, memory_of(k->a, a)},
                                             {DNNL_ARG_WEIGHTS, memory_of(k->b, b)},
                                             {DNNL_ARG_DST, memory_of(k->out, out)}};
  execute(k->primitive, args, k->scratchpad_bytes);
  return out;
}

}  // namespace fx::onednn::detail
