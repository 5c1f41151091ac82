#pragma once
/// \file
/// Weight-only quantized linear layers for decoder LLMs (issue 67): int8 per
/// channel or per group, int4 per group, symmetric or with a zero point, as
/// llama.cpp's Q8_0 / Q4_0 / Q4_1 formats serve them. Decoding one token is a
/// matrix-vector product whose time is reading the weights; at 1 or 0.5 byte
/// a weight instead of 4 it reads 4 or 8 times less. The activations are
/// quantized per block of 32 to int8 (llama.cpp's Q8_0) and the products are
/// integer dot products (AVX-512 VNNI, AVX2, or plain C++), each packed
/// weight byte streamed once per call (per tile of 4 rows for a prompt).
///
///     auto w = fx::decoders::pack_weight_only(linear->weight, {/*bits=*/4, /*group_size=*/32});
///     at::Tensor y = fx::decoders::linear_weight_only(x, w, linear->bias);
///
/// The same product is the torch operator
///     fxcpp::linear_weight_only(Tensor x, Tensor data, Tensor scales, Tensor? zeros, int bits,
///                               int group_size, int in_features, Tensor? bias=None) -> Tensor
/// so that a graph node can call it on a module's attribute tensors (meta
/// tensors give the output's shape only).
///
/// The packed layout (CPU-independent, saved as plain tensors):
///   - int8: `data` int8 [N, K], row-major, w = scale * (q - zero).
///   - int4: `data` uint8 [N, K / 2]; each block of 32 weights of a row is 16
///     bytes, byte j holding weight j in its low nibble and weight j + 16 in
///     its high nibble (llama.cpp's Q4_0 order), q in [0, 15];
///     w = scale * (q - zero), zero 8 when symmetric.
///   - `scales` (and `zeros`) float32 [N, groups], groups = K / group_size (1 per channel).

#include <fx/error.h>

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include <cstdint>
#include <string>

namespace fx::decoders {

/// How a weight is quantized.
struct WeightOnlyScheme {
  /// Bits per weight: 8 or 4.
  int bits = 8;
  /// Weights per scale along K: 0 is one scale per output channel (int8 only);
  /// else 32, 64 or 128, dividing K.
  int64_t group_size = 0;
  /// false: a zero point per group besides its scale (asymmetric).
  bool symmetric = true;
};

/// A packed weight: plain tensors only (they are saved as module attributes
/// in .fx files), in a layout that does not depend on the CPU (see the file
/// comment).
struct PackedWeightOnly {
  /// The packed integer weights: int8 [N, K] (8 bits) or uint8 [N, K / 2] (4 bits).
  at::Tensor data;
  /// float32 [N, groups].
  at::Tensor scales;
  /// float32 [N, groups] (integer values) when asymmetric, else undefined.
  at::Tensor zeros;
  /// N, the output features.
  int64_t out_features = 0;
  /// K, the input features.
  int64_t in_features = 0;
  /// How `data` was quantized.
  WeightOnlyScheme scheme;
};

/// Quantizes `weight` (a float [N, K] tensor of any floating dtype) per
/// `scheme`: per group the symmetric scale is the smallest that keeps every
/// weight in [-2^(bits-1), 2^(bits-1) - 1] steps, the asymmetric one spans
/// [min(w, 0), max(w, 0)]; each weight is rounded to its nearest step, so
/// dequantizing it is off by at most half a step.
/// Throws fx::Error (one line naming the argument) on a bad scheme or weight.
PackedWeightOnly pack_weight_only(const at::Tensor& weight, const WeightOnlyScheme& scheme);

/// The packed weight as float32 [N, K]: the reference the kernels approximate.
/// Throws fx::Error when `w`'s tensors are undefined or their shapes disagree.
at::Tensor dequantize_weight_only(const PackedWeightOnly& w);

/// x @ W.T (+ bias) for a float32 `x` [..., K]: a float32 [..., N]. The
/// activations are quantized per block of 32 along K (max |x| / 127 a step)
/// and multiplied in integers with the packed weights; the result differs
/// from x @ dequantize_weight_only(w).T by that rounding only.
/// Throws fx::Error (one line naming the argument and the values) on a
/// non-float or mis-sized `x`, an inconsistent `w`, or a bias not [N].
at::Tensor linear_weight_only(const at::Tensor& x, const PackedWeightOnly& w,
                              const c10::optional<at::Tensor>& bias = c10::nullopt);

/// Rows `indices` of the packed weight, dequantized: float32
/// [*indices.sizes(), K], each row exactly dequantize_weight_only's. An
/// embedding table's lookup on a table packed as a linear layer's weight
/// (quantize_weight_only packs `embed_tokens` so; a tied lm_head's packed
/// tensors serve both). Meta tensors give the shape only. Throws fx::Error
/// (one line) on non-integer indices, or an index outside [0, N) naming it.
///
/// The torch operator:
///     fxcpp::embedding_weight_only(Tensor indices, Tensor data, Tensor scales, Tensor? zeros, int bits,
///                                  int group_size, int embedding_dim) -> Tensor
at::Tensor embedding_weight_only(const at::Tensor& indices, const PackedWeightOnly& w);

/// The kernel this process runs for `bits` (8 or 4): "avx512-vnni", "avx2"
/// or "scalar", chosen once from the CPU's features.
std::string weight_only_kernel(int bits);

namespace detail {

/// linear_weight_only on the kernel named `kernel` ("avx512-vnni", "avx2",
/// "scalar": the decode kernels, for any number of rows; "avx512-vnni-gemm":
/// the prompt kernel, which linear_weight_only takes from 16 rows on a VNNI
/// CPU), whatever the CPU would choose: for tests and benchmarks.
/// Throws fx::Error when the CPU cannot run it or the name is unknown.
at::Tensor linear_weight_only_with(const std::string& kernel, const at::Tensor& x, const PackedWeightOnly& w,
                                   const c10::optional<at::Tensor>& bias = c10::nullopt);

/// An uninitialised tensor for weights a kernel streams (packed weight-only
/// data): from 2 MB on, 2 MB-aligned and advised for transparent huge pages
/// (MADV_HUGEPAGE; the hint is ignored where they are off), so a GEMV's
/// stream crosses a page boundary every 2 MB, not every 4 KB; at::empty below.
at::Tensor weight_stream_empty(at::IntArrayRef sizes, at::ScalarType dtype);

/// Uninitialised packed tensors for an n x k weight of `scheme`, allocated
/// as pack_weight_only's (the data by weight_stream_empty).
PackedWeightOnly empty_packed_weight_only(int64_t n, int64_t k, const WeightOnlyScheme& scheme);

/// Rows [first, first + rows) of `w`: views of its tensors (no copy).
PackedWeightOnly packed_rows(const PackedWeightOnly& w, int64_t first, int64_t rows);

/// pack_weight_only's work written into tensors the caller allocated:
/// `into` (of `weight`'s shape and its scheme; contiguous, e.g. packed_rows
/// of a bigger buffer) receives `weight`'s rows. quantize_weight_only packs
/// sibling layers side by side in one buffer (merge_projections then stacks
/// them without a copy) and a large weight a block of rows at a time (the
/// block's float pages go back before the next is read). `first_row`
/// numbers the rows in errors. Throws what pack_weight_only throws.
void pack_weight_only_into(const at::Tensor& weight, PackedWeightOnly& into, int64_t first_row = 0);

}  // namespace detail

}  // namespace fx::decoders
