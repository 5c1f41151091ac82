#pragma once
/// \file
/// oneDNN kernels as call_function targets: convolution and linear with
/// their weights reordered once into the layout oneDNN's fastest kernel
/// wants ("packed"), bias, activation and a residual sum fused as post-ops;
/// and a batched matmul of two activations. Kernels are made per input
/// shape on first use (fx::optimize_for_inference runs one forward on its
/// example inputs, so that happens at optimise time). The lower_to_onednn
/// pass puts them in graphs; they are ordinary dispatcher operators, so the
/// optimised graph prints, runs under the Interpreter and GraphModule, and
/// shows in the profiler:
///
///   fxcpp::onednn_conv2d(Tensor input, __torch__.torch.classes.fxcpp.PackedConv packed,
///                        Tensor? residual=None, bool blocked=False) -> Tensor
///     (blocked: the output in oneDNN's nChw8c as a [N, C/8, H, W, 8] tensor,
///     else channels_last; the input may be such a blocked tensor too.
///     fxcpp::to_blocked(Tensor) / fxcpp::from_blocked(Tensor) convert.)
///   fxcpp::onednn_linear(Tensor input, __torch__.torch.classes.fxcpp.PackedLinear packed,
///                        Tensor? residual=None) -> Tensor
///
///   fxcpp::onednn_matmul(Tensor self, Tensor other, bool transpose_out=False) -> Tensor
///     (two activations [..., M, K] x [..., K, N] with equal batch sizes,
///     e.g. attention's q @ k^T: no packing, kernels cached per shape;
///     transpose_out: the product's transpose(-3, -2), contiguous, which
///     attention's (p @ v).transpose(1, 2).flatten(2) then reads as a view)
///
/// The packed objects (torch custom classes) are the node's constant
/// arguments. Convolutions read NCHW or channels_last input and write
/// channels_last output (every ATen op between them keeps that layout, so
/// activations are converted once, at the first convolution). With
/// `residual`, the result is activation(conv(x) + bias + residual); when the
/// packed op was made with residual_inplace, a channels_last residual of
/// the output's shape and dtype is overwritten and returned (the pass sets
/// it only when the residual has no later use).
/// Threads: at::set_num_threads (libdnnl is built with OpenMP). All ops are
/// safe to call from several threads at once.

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <c10/util/intrusive_ptr.h>

#include <memory>
#include <string>
#include <vector>

namespace fx::onednn {

/// An activation fused after a kernel (after the residual sum, if any).
enum class Activation : uint8_t { None, Relu, Clip, Silu, Sigmoid, Hardswish, GeluErf, GeluTanh, Tanh };

/// The activation and its parameters (Clip: [alpha, beta], e.g. ReLU6 = [0, 6]).
struct PostOps {
  Activation activation = Activation::None;
  float alpha = 0, beta = 0;
  /// A residual is added before the activation (the op's `residual` argument).
  bool sum = false;
  /// The residual's buffer may be overwritten with the result.
  bool residual_inplace = false;
  /// "relu", "clip(0, 6)", "silu" ... and "+residual": for printing.
  std::string str() const;
};

/// The activation torch calls `name` (aten::relu, aten::relu6, aten::hardtanh with its
/// bounds, aten::silu, aten::sigmoid, aten::hardswish, aten::gelu with
/// approximate "none"/"tanh", aten::tanh); false if oneDNN has no such post-op.
bool activation_from_aten(const std::string& name, const std::vector<double>& scalars,
                          const std::string& approximate, PostOps& out);

/// Parameters of a 2-d convolution (torch's conventions: dilation 1 = dense).
struct ConvParams {
  std::vector<int64_t> stride{1, 1}, padding{0, 0}, dilation{1, 1};
  int64_t groups = 1;
  /// Let a float32 3×3 convolution of stride 1, dilation 1 and groups 1,
  /// whose channels are multiples of 16, use oneDNN's Winograd algorithm
  /// for inputs whose output is at least 14×14: F(2×2, 3×3) below batch 4
  /// (its transformed weights are 16/9 of the direct ones), F(4×4, 3×3)
  /// from batch 4 on (fewer multiplications, 4× the weights). Faster than
  /// the direct algorithm there (resnet18: 9% at batch 1, 15% at batch 8;
  /// the activations are reordered into oneDNN's blocked nChw16c layout and
  /// back inside the kernel), with results within ~3e-6 of the direct
  /// algorithm's, relative to the output's largest value. Below AVX-512,
  /// where oneDNN has no Winograd kernel, fxcpp's own F(2×2, 3×3) on the
  /// packed GEMM instead, for 16 or more channels in multiples of 8 and
  /// outputs larger than 8×8 (has_gemm_winograd; ~3e-6). Other shapes and
  /// bf16 kernels use the direct algorithm. Ignored by int8 convolutions.
  bool winograd = false;
};

/// Makes a packed convolution (the `packed` argument of onednn_conv2d) from an
/// OIHW weight (fp32), an optional bias, the parameters and post-ops;
/// `dtype` is at::kFloat or at::kBFloat16 (weights and activations in bf16,
/// accumulation and bias in fp32). Throws fx::Error for unsupported values,
/// bf16 included where oneDNN has no bf16 kernels (has_bf16_kernels).
c10::IValue pack_conv2d(const at::Tensor& weight, const c10::optional<at::Tensor>& bias, const ConvParams& params,
                        const PostOps& post_ops, c10::ScalarType dtype);

/// Makes a packed linear layer ([out, in] weight, optional bias), as pack_conv2d.
c10::IValue pack_linear(const at::Tensor& weight, const c10::optional<at::Tensor>& bias, const PostOps& post_ops,
                        c10::ScalarType dtype);

/// What time_linear measured: milliseconds per call, the best of its
/// interleaved rounds, for each of the two kernels that can run a float32
/// linear layer.
struct LinearTiming {
  /// oneDNN's (pack_linear: packed weights, post-ops fused).
  double onednn_ms = 0;
  /// ATen's (at::linear: the BLAS libtorch links, OpenBLAS here), the
  /// residual sum and activation as ATen ops after it.
  double aten_ms = 0;
  /// Rounds timed (each runs both kernels once).
  int rounds = 0;
};

/// Times, on this CPU and its current thread count, the float32 linear
/// layer of `weight` ([out, in]), `bias` and `post_ops` on a random input
/// of `input_sizes` (and a random residual when post_ops.sum): both kernels
/// made and run once first, then alternated for at least 3 and at most 15
/// rounds, until ~40 ms have passed. Which one is faster depends on the
/// CPU and the shape: oneDNN 2.6 runs float32 matmul with its brgemm
/// kernels on AVX-512; below it pack_linear's float32 kernel is oneDNN's
/// packed GEMM ("gemm:packed": the weights laid out for its sgemm once,
/// not on every call as oneDNN's matmul and OpenBLAS do), which wins on
/// most shapes but not all.
/// Throws fx::Error when `input_sizes` does not end in `in`.
LinearTiming time_linear(const at::Tensor& weight, const c10::optional<at::Tensor>& bias, const PostOps& post_ops,
                         at::IntArrayRef input_sizes);

/// Whether ATen's BLAS keeps a pool of threads of its own beside OpenMP's:
/// the OpenBLAS of Debian's libopenblas0-pthread (openblas_get_parallel()
/// is 1). On more than one thread the two pools' idle workers spin on the
/// cores the other needs: held at AVX2 on an AMD EPYC Zen 5, 2 threads,
/// time_linear of vit_b_16's head [1, 768] -> 1000 gave oneDNN 6.08 ms in
/// two runs of three (0.03-0.05 in the other), ATen 0.18-3.9 ms, and
/// TorchScript's optimised vit_b_16 (OpenBLAS) takes 1.8x longer on two
/// threads than on one. False for a BLAS without its own threads (or none
/// found).
bool blas_has_own_threads();

/// Sets the dtype a packed op of pack_conv2d / pack_linear returns (float32
/// or bfloat16; by default its kernel's dtype). A bf16 kernel may write
/// float32 for consumers that are not oneDNN kernels (ATen's layer_norm, for
/// one, wants its input and weights of one dtype). Call before its first run.
void set_output_dtype(const c10::IValue& packed, c10::ScalarType dtype);

/// "Conv2d(64, 128, kernel=(3, 3), stride=(2, 2), relu)": what a packed
/// argument of pack_conv2d / pack_linear computes.
std::string describe(const c10::IValue& packed);

/// The name of the oneDNN implementation the kernel of `packed` (pack_conv2d
/// / pack_linear) uses for a float32 input of `sizes` ("brgconv:avx512_core",
/// "jit_wino_4x3:avx512_core", …; the kernel is made if needed; a float32
/// linear layer below AVX-512: "gemm:packed", oneDNN's packed sgemm, and
/// for one row "gemv", fxcpp's matrix-vector product; a small deep
/// convolution there "gemm:packed" too, its 1×1 ones "gemm:panel", fxcpp's
/// own AVX2 GEMM, src/onednn/panel_gemm.h; "… +
/// silu": a float32 SiLU runs after the kernel, not as its post-op, as it
/// does on one thread). Throws
/// fx::Error if `packed` is not a packed operator or `sizes` do not fit it.
std::string implementation(const c10::IValue& packed, at::IntArrayRef sizes);

/// The name of an activation ("relu", "clip", "silu", "sigmoid", "hardswish",
/// "gelu", "gelu_tanh", "tanh"; "" for None), as PostOps::str prints it.
std::string activation_name(Activation a);
/// The activation named `name` (activation_name's names); false if none is.
bool activation_from_name(const std::string& name, Activation& out);

/// What a packed operator is made of, without its kernels: fx::save stores
/// it (the weights in torch's layout, not oneDNN's blocked one, so the file
/// fits any CPU) and pack() makes the operator again, whose kernels and
/// packed weights are then made for the CPU that runs it, at first use.
struct PackedState {
  /// Which operator: a 2-d convolution (pack_conv2d) or a linear layer (pack_linear).
  enum class Kind : uint8_t { Conv2d, Linear } kind = Kind::Conv2d;
  /// float32, [out, in / groups, kh, kw] or [out, in]. For a bfloat16
  /// kernel, the values the kernel computes with (bf16-exact), so packing
  /// them again gives the same kernel bit for bit.
  at::Tensor weight;
  /// float32 [out], or none.
  c10::optional<at::Tensor> bias;
  /// Conv2d only.
  ConvParams params;
  PostOps post_ops;
  /// The kernel's dtype (float or bfloat16) and the dtype it returns (set_output_dtype).
  c10::ScalarType dtype = c10::ScalarType::Float, output_dtype = c10::ScalarType::Float;
};

/// Whether `value` is a packed operator of pack_conv2d / pack_linear.
bool is_packed(const c10::IValue& value);

/// The state of the packed operator `packed` (its weights read back from
/// oneDNN's layout when the plain copy was already dropped). Throws
/// fx::Error if `packed` is not a packed operator.
PackedState packed_state(const c10::IValue& packed);

/// A packed operator made from `state` (pack_conv2d / pack_linear, then
/// set_output_dtype). A bfloat16 state where oneDNN has no bf16 kernels
/// (has_bf16_kernels) is packed as float32, returning float32: a file
/// optimised on an AVX-512 CPU runs on an AVX2 one. Throws fx::Error for
/// values pack_conv2d / pack_linear refuse.
c10::IValue pack(const PackedState& state);

/// The instruction set oneDNN runs its kernels with on this CPU ("avx2",
/// "avx512_core", "avx512_core_vnni", "avx512_core_bf16", "avx512_core_amx",
/// ...), ONEDNN_MAX_CPU_ISA included: what the kernels fxcpp makes can use.
std::string cpu_isa();

/// Whether oneDNN runs its AVX-512 kernels here: an effective ISA of
/// avx512_core or above (ONEDNN_MAX_CPU_ISA included). Below it (AVX2-only
/// CPUs such as AMD EPYC Zen 3) the optimiser takes the paths that are the
/// faster there: blocked activations (block_activations), float32 linear
/// layers on oneDNN's packed GEMM and timed against ATen's (LinearKernel::Auto).
bool has_avx512_core();

/// Whether oneDNN has bfloat16 convolution and matmul kernels here (it has
/// none below AVX-512: an AVX2-only CPU such as AMD EPYC Zen 3 has none).
/// Probed once by making a small primitive. Where it has none, pack_conv2d /
/// pack_linear refuse bf16, pack() of a bf16 state (a file optimised
/// elsewhere) packs float32 kernels, and optimize_for_inference /
/// lower_to_onednn lower to float32 and say so.
bool has_bf16_kernels();

/// Whether oneDNN has Winograd convolutions here (AVX-512 only, in oneDNN
/// 2.6). Where it has none, a convolution packed with ConvParams::winograd
/// runs as fxcpp's own Winograd (has_gemm_winograd) or by the direct algorithm.
bool has_winograd_kernels();

/// Whether fxcpp runs float32 3×3 convolutions packed with
/// ConvParams::winograd as its own Winograd F(2×2, 3×3) on oneDNN's packed
/// GEMM here: below AVX-512 (no has_winograd_kernels) on a CPU with AVX2 and
/// FMA, for stride 1, dilation 1, one group, channel counts multiples of 8
/// from 16 and outputs larger than 8×8 (implementation() "winograd_2x3:packed_gemm").
/// On an AMD EPYC Zen 5 held at AVX2 resnet18 took 0.80x the time with it
/// at batch 1 on one thread (oneDNN's direct AVX2 kernels otherwise).
bool has_gemm_winograd();

/// Whether fxcpp::winograd_conv2d and fxcpp::winograd_conv2d_backward run
/// a float32 3x3 convolution (stride 1, dilation 1, one group, no bias,
/// padding 0 or 1) of an input of `input_sizes` [N, C, H, W] and a weight of
/// `weight_sizes` [Co, C, 3, 3] here: oneDNN has Winograd kernels for it
/// (AVX-512, channel counts its blocking takes). Its kernels are made and
/// kept for the operators' first call. The operators (training's
/// conv_as_winograd pass puts them in graphs):
///
///   fxcpp::winograd_conv2d(Tensor input, Tensor weight, int[2] padding) -> Tensor
///   fxcpp::winograd_conv2d_backward(Tensor grad_output, Tensor input, Tensor weight,
///                                   int[2] padding, bool[2] output_mask) -> (Tensor, Tensor)
///
/// compute aten::convolution and aten::convolution_backward's input and
/// weight gradients of such a convolution, in the tensors' own layouts
/// (NCHW or channels_last), to rounding (~2e-6 of the largest value).
bool has_winograd_conv2d(at::IntArrayRef input_sizes, at::IntArrayRef weight_sizes, at::IntArrayRef padding);

/// Whether oneDNN computes u8 x s8 products with VNNI / AMX here. Without,
/// fxcpp's int8 kernels take float paths where oneDNN's int8 arithmetic
/// would saturate or be wrong (fx/onednn_int8.h: weights beyond 7 bits), and
/// int8 of 8-bit weights gains little or nothing over float32.
bool has_int8_dot_product();

/// One line naming the ISA and the answers above, for reports:
/// "oneDNN ISA avx2: bf16 kernels no, Winograd fxcpp's F(2x2, 3x3), int8 dot products (VNNI/AMX) no"
/// (Winograd "yes": oneDNN's; "fxcpp's F(2x2, 3x3)": has_gemm_winograd; "no").
std::string cpu_summary();

/// Bytes of the weight copies the packed operator `packed` holds now:
/// oneDNN's layouts of its weights, and below AVX-512 the packed GEMM's
/// copies (one per input row count, the two most recent kept). Throws
/// fx::Error when `packed` is not a packed oneDNN operator.
size_t packed_bytes(const c10::IValue& packed);

/// Registers the operators and classes above (idempotent; the library does
/// it when loaded, this makes the dependency explicit).
void register_ops();

/// What a packed kernel does with a weight's plain tensor once it has made
/// its own copy in oneDNN's layout and let go of the plain one (it reads the
/// plain values again only to unpack them, as fx::save does).
using WeightsPackedHook = void (*)(const at::Tensor& plain);

/// Sets the process's WeightsPackedHook (nullptr: none, the default) and
/// returns the previous one. fxcpp_decoders sets fx::release_mapped_pages
/// there: a checkpoint's float32 weights lie in a private mapping of its
/// file that lives while any of them does, so without it every page read to
/// pack a layer stayed resident beside the packed copy (TinyLlama-8 F32: 3.4
/// GB for 1.9 GB of weights). Called outside any lock of the kernel's.
WeightsPackedHook set_weights_packed_hook(WeightsPackedHook hook);

}  // namespace fx::onednn
