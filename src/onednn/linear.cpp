// fxcpp::onednn_linear: y = x W^T + b through oneDNN matmul with packed
// weights and fused residual sum / activation (GELU for transformers);
// below AVX-512, float32 layers through oneDNN's packed GEMM (packed_gemm.h),
// or for one row a matrix-vector product (gemv.h), the bias and residual
// summed by the product and the activation applied in place.
#include "onednn/gemv.h"
#include "onednn/packed_ops.h"

#include <fx/error.h>

#include <ATen/Parallel.h>

#include <sstream>

namespace fx::onednn::detail {

using tag = dnnl::memory::format_tag;

PackedLinear::PackedLinear(const at::Tensor& weight, const c10::optional<at::Tensor>& bias, PostOps post_ops,
                           c10::ScalarType dtype)
    : PackedOp(std::move(post_ops), dtype, "onednn_linear") {
  if (!weight.defined() || weight.dim() != 2 || weight.scalar_type() != at::kFloat)
    throw Error("onednn_linear: the weight must be a float32 tensor [out_features, in_features]");
  out_features_ = weight.size(0);
  in_features_ = weight.size(1);
  if (bias && bias->defined()) {
    if (bias->dim() != 1 || bias->size(0) != out_features_)
      throw Error("onednn_linear: the bias must have " + std::to_string(out_features_) + " elements");
    bias_ = bias->to(at::kFloat).contiguous().view({1, out_features_});
  }
  // The plain [out, in] row-major weight is the {in, out} matrix in layout ba.
  weights_ = std::make_unique<PackedWeights>(weight.contiguous(), dnnl::memory::dims{in_features_, out_features_},
                                             tag::ba);
}

std::shared_ptr<const PackedLinear::Kernel> PackedLinear::kernel(int64_t rows, c10::ScalarType src_dtype) const {
  return kernels_.get(Key{rows, src_dtype}, [&] {
    const auto dt = data_type(dtype_);
    dnnl::memory::desc src({rows, in_features_}, dt, tag::ab);
    dnnl::memory::desc dst({rows, out_features_}, data_type(out_dtype_), tag::ab);
    dnnl::memory::desc wei({in_features_, out_features_}, dt, tag::any);
    dnnl::memory::desc bias;
    if (bias_.defined()) bias = dnnl::memory::desc({1, out_features_}, dnnl::memory::data_type::f32, tag::ab);
    dnnl::matmul::desc d(src, wei, bias, dst);
    dnnl::matmul::primitive_desc pd(d, make_attr(post_ops_), engine());
    return Kernel{dnnl::matmul(pd), weights_->get(pd.weights_desc()), src, dst, pd.scratchpad_desc().get_size(),
                  pd.impl_info_str()};
  });
}

at::Tensor PackedLinear::run(const at::Tensor& input, const c10::optional<at::Tensor>& residual) const {
  if (!input.defined() || input.dim() < 1 || input.size(-1) != in_features_) {
    std::ostringstream os;
    os << "onednn_linear: expected an input [..., " << in_features_ << "], got ";
    if (input.defined()) os << input.sizes(); else os << "None";
    throw Error(os.str());
  }
  at::Tensor x = to_dtype(input, dtype_).contiguous();
  const int64_t rows = x.numel() / in_features_;
  std::vector<int64_t> out_sizes = input.sizes().vec();
  out_sizes.back() = out_features_;
  at::Tensor out = make_output(out_sizes, x.options().dtype(out_dtype_), at::MemoryFormat::Contiguous, post_ops_, residual,
                               "onednn_linear");
  // Shapes only (ShapeProp::propagate_meta, FLOP counts), or no rows (oneDNN
  // 2.6's AVX-512 matmul divides by zero making a primitive for none): no kernel runs.
  if (x.is_meta() || rows == 0) return out;
  if (on_packed_gemm()) {
    run_packed_gemm(x, out, rows);
    return out;
  }
  auto k = kernel(rows, dtype_);
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, memory_of(k->src, x)},
                                             {DNNL_ARG_WEIGHTS, k->weights},
                                             {DNNL_ARG_DST, memory_of(k->dst, out)}};
  if (bias_.defined())
    args.emplace(DNNL_ARG_BIAS,
                 memory_of(dnnl::memory::desc({1, out_features_}, dnnl::memory::data_type::f32, tag::ab), bias_));
  execute(k->primitive, args, k->scratchpad_bytes);
  return out;
}

bool PackedLinear::on_packed_gemm() const {
  return dtype_ == at::kFloat && out_dtype_ == at::kFloat && packed_gemm_available();
}

void PackedLinear::run_packed_gemm(const at::Tensor& x, at::Tensor& out, int64_t rows) const {
  if (rows == 0) return;
  at::Tensor y = out.view({rows, out_features_});
  float beta = 0;
  if (post_ops_.sum) {  // out holds the residual (make_output)
    beta = 1;
    if (bias_.defined()) y.add_(bias_);
  } else if (bias_.defined()) {
    y.copy_(bias_.expand({rows, out_features_}));
    beta = 1;
  }
  if (rows == 1) {  // a matrix-vector product, on the plain weights (gemv.h)
    gemv(weights_->plain({out_features_, in_features_}).data_ptr<float>(), out_features_, in_features_,
         x.data_ptr<float>(), y.data_ptr<float>(), beta);
  } else {
    auto gemm = gemms_.get({rows, at::get_num_threads()}, [&] {
      return PackedGemm(weights_->plain({out_features_, in_features_}), rows);
    });
    gemm->compute(x.data_ptr<float>(), y.data_ptr<float>(), beta);
  }
  apply_activation_(y, post_ops_);
}

std::string PackedLinear::implementation(at::IntArrayRef sizes) const {
  if (sizes.empty() || sizes.back() != in_features_) {
    std::ostringstream os;
    os << "onednn_linear: expected an input [..., " << in_features_ << "], got " << sizes;
    throw Error(os.str());
  }
  const int64_t rows = c10::multiply_integers(sizes.begin(), sizes.end() - 1);
  if (on_packed_gemm()) return rows == 1 ? "gemv" : "gemm:packed";
  return rows == 0 ? "none (no rows)" : kernel(rows, dtype_)->impl;
}

PackedState PackedLinear::state() const {
  return base_state(PackedState::Kind::Linear, {out_features_, in_features_});
}

size_t PackedLinear::bytes() const {
  size_t n = PackedOp::bytes();
  gemms_.for_each([&](const PackedGemm& g) { n += g.bytes(); });
  return n;
}

std::string PackedLinear::str() const {
  std::ostringstream os;
  os << "Linear(" << in_features_ << ", " << out_features_;
  return os.str() + str_suffix();
}

}  // namespace fx::onednn::detail
