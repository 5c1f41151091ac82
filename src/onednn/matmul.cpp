// fxcpp::onednn_matmul: batched matmul of two activations (attention's
// q @ k^T and p @ v) through oneDNN, so it does not depend on the BLAS.
#include "onednn/context.h"

#include <fx/error.h>

#include <ATen/ops/empty.h>

#include <sstream>

namespace fx::onednn::detail {
namespace {

/// A kernel for one pair of shapes and strides.
struct MatmulKernel {
  dnnl::matmul primitive;
  dnnl::memory::desc a, b, out;
  size_t scratchpad_bytes;
};

/// a's sizes and strides, b's, dtype, transpose_out.
using MatmulKey = std::tuple<std::vector<int64_t>, std::vector<int64_t>, std::vector<int64_t>, std::vector<int64_t>,
                             c10::ScalarType, bool>;

KernelCache<MatmulKey, MatmulKernel>& kernels() {
  static KernelCache<MatmulKey, MatmulKernel> cache;
  return cache;
}

/// A view oneDNN reads directly: one of the last two dims dense.
at::Tensor readable(const at::Tensor& t) {
  const int64_t r = t.dim();
  if (t.stride(r - 1) == 1 || t.stride(r - 2) == 1) return t;
  return t.contiguous();
}

}  // namespace

at::Tensor matmul(const at::Tensor& self, const at::Tensor& other, bool transpose_out) {
  if (self.dim() < 2 || self.dim() != other.dim() || self.sizes().slice(0, self.dim() - 2) !=
      other.sizes().slice(0, other.dim() - 2) || self.size(-1) != other.size(-2) ||
      self.scalar_type() != other.scalar_type()) {
    std::ostringstream os;
    os << "onednn_matmul: expected [..., M, K] and [..., K, N] of one dtype with equal batch sizes, got "
       << self.sizes() << " and " << other.sizes();
    throw Error(os.str());
  }
  const int64_t r = self.dim();
  if (transpose_out && r < 3)
    throw Error("onednn_matmul: transpose_out needs a batch dimension, got " + std::to_string(r) + "-d operands");
  at::Tensor a = readable(self), b = readable(other);
  std::vector<int64_t> out_sizes = a.sizes().vec();
  out_sizes.back() = b.size(-1);
  // transpose_out: the result is matmul(...).transpose(-3, -2), allocated
  // contiguous; oneDNN writes the product through its transposed view.
  std::vector<int64_t> alloc_sizes = out_sizes;
  if (transpose_out) std::swap(alloc_sizes[r - 3], alloc_sizes[r - 2]);
  if (a.is_meta()) return at::empty(alloc_sizes, a.options());  // shapes only (ShapeProp::propagate_meta)
  at::Tensor out = at::empty(alloc_sizes, a.options());
  // No rows, columns or batches (oneDNN 2.6's AVX-512 matmul divides by zero
  // making a primitive for them), or an empty sum: no kernel runs.
  if (a.numel() == 0 || b.numel() == 0) return out.zero_();
  at::Tensor product = transpose_out ? out.transpose(r - 3, r - 2) : out;
  MatmulKey key{a.sizes().vec(), a.strides().vec(), b.sizes().vec(), b.strides().vec(), a.scalar_type(), transpose_out};
  auto k = kernels().get(key, [&] {
    const dnnl::memory::desc da = strided_desc(a), db = strided_desc(b), dout = strided_desc(product);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(da, db, dout), make_attr(PostOps{}), engine());
    return MatmulKernel{dnnl::matmul(pd), da, db, dout, pd.scratchpad_desc().get_size()};
  });
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, memory_of(k->a, a)},
                                             {DNNL_ARG_WEIGHTS, memory_of(k->b, b)},
                                             {DNNL_ARG_DST, memory_of(k->out, product)}};
  execute(k->primitive, args, k->scratchpad_bytes);
  return out;
}

}  // namespace fx::onednn::detail
