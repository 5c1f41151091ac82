#pragma once
// Internal: the packed oneDNN operators (torch custom classes) behind
// fxcpp::onednn_conv2d and fxcpp::onednn_linear.
#include "onednn/context.h"
#include "onednn/packed_gemm.h"

#include <torch/custom_class.h>

#include <tuple>

namespace fx::onednn::detail {

/// What every packed kernel has: post-ops, dtypes, bias, packed weights.
class PackedOp : public torch::CustomClassHolder {
 public:
  /// The output's dtype (default: the kernel's dtype); set before the first run.
  void set_output_dtype(c10::ScalarType t) { out_dtype_ = t; }
  /// "Conv2d(64, 128, kernel=(3, 3), relu)": what the op computes.
  virtual std::string str() const = 0;
  /// What the op is made of (fx::onednn::packed_state).
  virtual PackedState state() const = 0;
  /// The oneDNN implementation of the kernel for a float input of `sizes` (fx::onednn::implementation).
  virtual std::string implementation(at::IntArrayRef sizes) const = 0;
  /// Bytes of the weight copies held now (fx::onednn::packed_bytes): oneDNN's layouts.
  virtual size_t bytes() const { return weights_ ? weights_->bytes() : 0; }

 protected:
  PackedOp(PostOps post_ops, c10::ScalarType dtype, const char* op);
  /// ", bias=False, bf16, +residual, relu)": the end of str().
  std::string str_suffix() const;
  /// The state common to every packed op (weights as `weight_sizes`).
  PackedState base_state(PackedState::Kind kind, at::IntArrayRef weight_sizes) const;
  /// A kernel made for one input shape: the primitive and its weights' layout.
  template <class Primitive>
  struct Kernel {
    Primitive primitive;
    dnnl::memory weights;
    dnnl::memory::desc src, dst;
    size_t scratchpad_bytes;
    std::string impl;  // pd.impl_info_str()
  };

  PostOps post_ops_;
  c10::ScalarType dtype_, out_dtype_;
  at::Tensor bias_;  // f32, or undefined
  std::unique_ptr<PackedWeights> weights_;
};

/// Where a 4-d activation's values are: NCHW, channels_last (NHWC), or
/// oneDNN's nChw8c, eight channels innermost, held as a contiguous 5-d
/// tensor [N, C/8, H, W, 8] (fxcpp::to_blocked).
enum class Layout : uint8_t { Nchw, Nhwc, Blocked };

/// [N, C/8, H, W, 8]: the blocked tensor of a [N, C, H, W] value (C a multiple of 8).
std::vector<int64_t> blocked_sizes(at::IntArrayRef nchw);
/// [N, C, H, W] of a blocked [N, C/8, H, W, 8] tensor; fx::Error naming `op` for another tensor.
std::vector<int64_t> unblocked_sizes(const at::Tensor& blocked, const char* op);
/// oneDNN's descriptor of a [N, C, H, W] value in `layout`.
dnnl::memory::desc layout_desc(at::IntArrayRef nchw, dnnl::memory::data_type dt, Layout layout);

class GemmKernel;

/// A 2-d convolution with packed weights, bias and post-ops.
class PackedConv : public PackedOp {
 public:
  PackedConv(const at::Tensor& weight, const c10::optional<at::Tensor>& bias, ConvParams params, PostOps post_ops,
             c10::ScalarType dtype);
  /// activation(conv(input) + bias [+ residual]): channels_last, or with
  /// `blocked` oneDNN's nChw8c as a [N, C/8, H, W, 8] tensor (blocked_sizes).
  /// The input is a 4-d tensor or such a blocked one; the residual is laid
  /// out as the output.
  at::Tensor run(const at::Tensor& input, const c10::optional<at::Tensor>& residual, bool blocked = false) const;
  std::string str() const override;
  PackedState state() const override;
  std::string implementation(at::IntArrayRef sizes) const override;

 private:
  /// A kernel for one input shape. The tensors are channels_last (src, dst);
  /// a Winograd kernel computes in oneDNN's blocked layouts (blocked_src,
  /// blocked_dst), reached by the reorders.
  struct Kernel : PackedOp::Kernel<dnnl::convolution_forward> {
    /// Set: the convolution runs on the packed GEMM (gemm_kernel.h: im2col,
    /// or Winograd), not on `primitive`.
    std::shared_ptr<const GemmKernel> gemm;
    /// Set: the primitive has no activation post-op and run() applies SiLU
    /// to the output after it (silu.h; see silu_after()).
    bool silu_after = false;
    bool blocked = false;
    dnnl::memory::desc blocked_src, blocked_dst;
    dnnl::reorder into_src, into_dst, out_of_dst;
  };
  /// Input sizes [N, C, H, W], the input's layout, whether the output is
  /// blocked, input dtype, whether a SiLU runs after the kernel, whether
  /// more than one thread runs it (GemmConv::fits).
  using Key = std::tuple<std::vector<int64_t>, Layout, bool, c10::ScalarType, bool, bool>;
  std::shared_ptr<const Kernel> kernel(at::IntArrayRef sizes, Layout in, bool blocked_out,
                                       c10::ScalarType src_dtype) const;
  /// Whether a float32 SiLU runs after the direct kernel (silu.h) rather
  /// than as oneDNN's swish post-op, for an output of sizes `out`: on one
  /// thread, where the pass is the faster (efficientnet_b0, AMD EPYC Zen 5,
  /// paired runs: 0.86x / 0.89x the time at batch 1 / 8, held at AVX2 0.95x
  /// / 0.93x), and on more for outputs of kSiluPassValues or more; smaller
  /// ones keep the fused swish (with the pass on every layer, 2^14, two
  /// threads at batch 1 took 0.995 of 2^17's time held at AVX2: no gain).
  bool silu_after(at::IntArrayRef out) const;
  /// Whether a convolution into an output of sizes `out` runs on the calling
  /// thread alone (OneThread), its kernel made so: fewer than kOneThreadMacs
  /// multiply-adds.
  bool runs_alone(at::IntArrayRef out) const;
  /// Whether params_.winograd may apply (float32, 3×3, stride 1, dilation 1,
  /// groups 1, channels multiples of 16); winograd() then checks the shape.
  bool winograd_fits() const;
  /// The Winograd primitive for `d` (F(4×4, 3×3) preferred), or none when
  /// params_.winograd is off or oneDNN has none for these shapes and post-ops.
  c10::optional<dnnl::convolution_forward::primitive_desc> winograd(const std::vector<int64_t>& in,
                                                                    const std::vector<int64_t>& out) const;
  std::vector<int64_t> output_sizes(at::IntArrayRef sizes) const;
  /// Checks `input` is [N, in_channels, H, W].
  void check_input(const at::Tensor& input) const;

  int64_t out_channels_, in_channels_, kh_, kw_;
  ConvParams params_;
  mutable KernelCache<Key, Kernel> kernels_;
};

/// A linear layer (y = x W^T + b) with packed weights and post-ops.
class PackedLinear : public PackedOp {
 public:
  PackedLinear(const at::Tensor& weight, const c10::optional<at::Tensor>& bias, PostOps post_ops,
               c10::ScalarType dtype);
  /// activation(input W^T + bias [+ residual]) for input [..., in_features].
  at::Tensor run(const at::Tensor& input, const c10::optional<at::Tensor>& residual) const;
  /// oneDNN's layouts of the weights and the packed GEMM copies held now.
  size_t bytes() const override;
  std::string str() const override;
  PackedState state() const override;
  std::string implementation(at::IntArrayRef sizes) const override;

 private:
  using Kernel = PackedOp::Kernel<dnnl::matmul>;
  using Key = std::pair<int64_t, c10::ScalarType>;  // rows, input dtype
  std::shared_ptr<const Kernel> kernel(int64_t rows, c10::ScalarType src_dtype) const;
  /// Whether this layer runs on oneDNN's packed GEMM (packed_gemm.h): a float32
  /// kernel with a float32 output where packed_gemm_available().
  bool on_packed_gemm() const;
  /// run() on the packed GEMM (one row: gemv.h): `out` (residual included) =
  /// activation(x W^T + bias + out).
  void run_packed_gemm(const at::Tensor& x, at::Tensor& out, int64_t rows) const;

  int64_t out_features_, in_features_;
  mutable KernelCache<Key, Kernel> kernels_;
  /// Packed GEMM weights by rows and thread count; the plain weights stay
  /// in weights_ (never reordered on this path) to pack for other shapes.
  /// Each is a copy of the weights: the kPackedGemmCopies most recent are
  /// kept, so inputs of ever new row counts (a decoder's prompts) do not
  /// pile up copies; a row count evicted is packed again when it returns.
  static constexpr size_t kPackedGemmCopies = 2;
  mutable KernelCache<std::pair<int64_t, int>, PackedGemm> gemms_{kPackedGemmCopies};
};

/// A PackedState as TorchScript pickles it (the packed classes' __getstate__
/// / __setstate__, so torch.jit.save writes an exported optimised graph and
/// torch.jit.load, after torch.ops.load_library of libfxcpp_onednn.so, reads
/// it): {op, activation}, {weight[, bias]}, and the numbers {stride (2),
/// padding (2), dilation (2), groups, alpha, beta, sum, residual_inplace,
/// dtype, output dtype}. Three elements: libtorch's conversion of longer
/// tuples trips gcc's -Warray-bounds in ivalue_inl.h.
using PickledState = std::tuple<std::vector<std::string>, std::vector<at::Tensor>, std::vector<double>>;
PickledState pickled(const PackedState& state);
/// The packed op of a PickledState, of class `Op` (fx::Error if it is another).
template <class Op>
c10::intrusive_ptr<Op> unpickled(PickledState state);

/// The packed op `packed` holds, or nullptr when it holds none.
PackedOp* find_packed_op(const c10::IValue& packed);
/// The packed op `packed` holds; fx::Error "WHAT: not a packed oneDNN operator" otherwise.
PackedOp& packed_op(const c10::IValue& packed, const char* what);

/// Runs `input` through a reorder into `dtype` if it is not already of it.
at::Tensor to_dtype(const at::Tensor& input, c10::ScalarType dtype);

}  // namespace fx::onednn::detail
