#pragma once
/// \file
/// lower_to_onednn: convolutions and linear layers of constants become
/// fxcpp::onednn_conv2d / fxcpp::onednn_linear (fx/onednn.h) with their
/// weights packed once, fusing what follows them when nothing else reads
/// the intermediate value:
///   conv2d/linear → [add(·, residual) | add_] → [relu | relu6 | hardtanh | silu |
///   sigmoid | hardswish | gelu | tanh (or their in-place forms)]
/// The residual sum is fused only when ShapeProp's tensor_meta shows both
/// operands have the same shape (no broadcasting); it writes into the
/// residual's buffer when that value is a fresh result (not an input, an
/// attribute or a view) that nothing reads afterwards.
///
/// aten::matmul / aten::bmm of two float activations of rank 3 or 4 with
/// equal batch sizes (attention's q @ k^T and p @ v; shapes from
/// tensor_meta) become fxcpp::onednn_matmul, so they no longer depend on
/// the BLAS libtorch was given. A matmul whose only user is a
/// transpose(-3, -2) read only by flatten / reshape (attention's
/// (p @ v).transpose(1, 2).flatten(2)) takes the transpose in
/// (transpose_out=True): it writes the transposed product contiguous, and
/// the flatten, which copied it, is a view (vit_b_16: 12 copies of
/// [197, 768] per image).
///
/// Pooling: aten::max_pool2d (floor mode, no dilation) becomes
/// fxcpp::max_pool2d and aten::adaptive_avg_pool2d becomes
/// fxcpp::adaptive_avg_pool2d, oneDNN's pooling in the input's layout where
/// it applies (float / bf16, contiguous or channels_last; for the adaptive
/// average, an output size that divides the input's, as global pooling
/// does: efficientnet_b0's 17 pools took 1.7 ms of ATen's strided reduction
/// at one thread, 0.8 ms so), ATen's otherwise.
///
/// aten::softmax over the last dim (no dtype) and aten::layer_norm over the
/// last dim become fxcpp::softmax / fxcpp::layer_norm: oneDNN's JIT kernels
/// for contiguous float tensors (vit_b_16 at one thread: softmax 10 → 6 ms,
/// layer norms 5.2 → 2.8 ms), ATen's for anything else.
///
/// Layouts stay unobservable. Convolutions write channels_last whatever
/// their input's layout, and the element-wise ops, pooling and convolutions
/// after them keep it: their values do not depend on strides. Every other
/// reader of such a value (view, reshape, flatten, as_strided, a graph
/// output, a call_module, a registered or unknown function, any op not
/// known to be layout-free) would see it, so the value is replaced where it
/// is made by fxcpp::restore_layout(value, format): a copy in the memory
/// format the unoptimised program gave it, the one eager ATen's conv2d gives
/// for the region's first input (fxcpp::suggest_memory_format of that input,
/// at run time: contiguous for NCHW, channels_last for channels_last). The
/// optimised forward's outputs have the unoptimised forward's sizes and
/// strides; a view that works eagerly works optimised. (A weight in
/// channels_last, which makes eager's conv2d write channels_last too, is
/// not taken into account.)
///
/// Run on frozen graphs (fx::freeze_modules, fx::fold_batch_norm first):
/// aten::conv2d(x, W, b, stride, padding, dilation, groups) and
/// aten::linear(x, W, b) with get_attr weights.
///
/// Linear layers: which kernel runs them is LinearKernel's choice. oneDNN
/// 2.6 computes float32 matmul with brgemm kernels on AVX-512, faster than
/// BLAS there. Below AVX-512 fxcpp::onednn_linear runs on oneDNN's packed
/// GEMM (`gemm:packed`: weights packed once, where oneDNN's matmul, `gemm:jit`,
/// and OpenBLAS copy them on every call), faster than OpenBLAS on most
/// shapes but not all (AMD EPYC Zen 3, 1 thread: vit_b_16's [197, 768] →
/// 3072 12.8 against 13.7 ms; resnet50's head [8, 2048] → 1000 2.1 against
/// 1.5 ms), so there the pass times both per shape and keeps the faster.

#include <fx/onednn.h>
#include <fx/passes/pass_manager.h>

#include <c10/core/ScalarType.h>

#include <string>
#include <vector>

namespace fx {

/// Which kernel runs a float32 linear layer (aten::linear of constants).
enum class LinearKernel : uint8_t {
  /// oneDNN's where its ISA is AVX-512 or newer; below (AVX2), whichever of
  /// oneDNN's and ATen's is faster for the layer's input shape, timed once
  /// by the pass (onednn::time_linear, once per distinct shape, weight and
  /// post-ops; ATen's only when at least 5% faster, as a near tie keeps the
  /// fused post-ops). The measurements are kept for the process (per shape,
  /// weight size, post-ops and thread count), so every optimisation in it
  /// chooses alike. A layer whose input shape is unknown (no tensor_meta:
  /// no example inputs), or of fewer than 2^18 floating-point operations
  /// (a few microseconds, too short to time), gets oneDNN's untimed; so does
  /// every layer on more than one thread where the BLAS keeps threads of
  /// its own (onednn::blas_has_own_threads: Debian's OpenBLAS), whose idle
  /// workers and OpenMP's take each other's cores (OneDnnLowering::linear_note).
  Auto,
  /// oneDNN's for every layer (fxcpp::onednn_linear).
  OneDnn,
  /// ATen's for every layer: aten::linear, its residual sum and activation
  /// stay as they are (the BLAS libtorch links).
  Aten,
};

/// "auto", "onednn", "aten".
std::string linear_kernel_name(LinearKernel k);
/// The LinearKernel named `name` (linear_kernel_name's names); throws
/// fx::Error naming the three otherwise.
LinearKernel linear_kernel_from_name(const std::string& name);

/// A linear layer whose kernel LinearKernel::Auto chose by timing.
struct LinearChoice {
  /// The aten::linear node's name.
  std::string node;
  /// Its input's sizes, and its output features.
  std::vector<int64_t> input_sizes;
  int64_t out_features = 0;
  /// What was measured (shared by the layers of one shape, weight size and post-ops).
  onednn::LinearTiming timing;
  /// Whether ATen's kernel was chosen.
  bool aten = false;
};

/// What lower_to_onednn did.
struct OneDnnLowering {
  /// Nodes lowered.
  size_t convs = 0, linears = 0, matmuls = 0;
  /// Residual sums and activations fused into them.
  size_t fused_post_ops = 0;
  /// Values copied back to the layout the unoptimised program gave them
  /// (fxcpp::restore_layout, see the file comment).
  size_t restored_layouts = 0;
  /// Linear layers left to ATen (LinearKernel::Aten, or Auto timed it faster).
  size_t aten_linears = 0;
  /// The layers LinearKernel::Auto timed, in graph order (none on AVX-512).
  std::vector<LinearChoice> linear_choices;
  /// Why LinearKernel::Auto timed no layer below AVX-512 (empty when it
  /// could): more than one thread beside a BLAS with threads of its own.
  std::string linear_note;
  /// The dtype of the kernels made: the one asked for, or float32 when
  /// bfloat16 was asked for where oneDNN has no bf16 kernels
  /// (onednn::has_bf16_kernels: AVX2-only CPUs).
  c10::ScalarType dtype = c10::ScalarType::Float;
};

/// Lowers `gm` in place (see the file comment). `dtype` is at::kFloat or
/// at::kBFloat16 (kernels in bf16, fp32 accumulation; a kernel returns bf16
/// only when all its users are oneDNN kernels, float32 otherwise, so the
/// rest of the graph keeps its dtypes; where oneDNN has no bf16 kernels,
/// float32 kernels, and counts->dtype says so). Fills `counts` when given.
/// `winograd`: float32 3×3 convolutions may use oneDNN's Winograd algorithm
/// (onednn::ConvParams::winograd: resnet18 9% faster at batch 1, 15% at
/// batch 8; results within ~3e-6 of the direct algorithm relative to the
/// output's scale).
/// `linear`: which kernel runs float32 linear layers (LinearKernel).
PassResult lower_to_onednn(std::shared_ptr<GraphModule> gm, c10::ScalarType dtype = c10::ScalarType::Float,
                           OneDnnLowering* counts = nullptr, bool winograd = true,
                           LinearKernel linear = LinearKernel::Auto);

}  // namespace fx
