#pragma once
// Internal: fxcpp's own float32 GEMM for the 1×1 convolutions of few pixels
// below AVX-512 (GemmConv's), with their bias, residual and activation
// applied to the product while it is still in registers.
//
// oneDNN's packed sgemm (packed_gemm.h) computes these products as fast,
// but around it GemmConv needed a pass that copied a blocked input into the
// GEMM's rows and prefilled C with the bias and residual, and a pass after
// that activated the result and copied it into a blocked output: three
// parallel regions and two copies per layer, where the GEMM of a layer at
// 7×7 takes 70-250 us. This kernel reads the activations where they are
// (NHWC or nChw8c: rows of 8-channel blocks, PixelRows) and writes each
// output tile once, in one parallel region. Its tile is 6 rows × 16
// output channels: twelve AVX2 accumulators, one broadcast of an input per
// row and two loads of the weights (packed in panels of 16 output channels,
// [⌈OC/16⌉, K, 16]) per input channel, MLAS's and BLIS's shape for AVX2.
#include <fx/onednn.h>

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace fx::onednn::detail {

/// An activation matrix of pixels by channels as a GEMM operand: row r is
/// pixel r % pixels of image r / pixels, its `channels` channels (a multiple
/// of 8 when `blocked`) in NHWC order or in nChw8c's 8-channel blocks;
/// `Float` is const float for an input.
template <typename Float>
struct PixelRows {
  Float* data;
  int64_t pixels, channels;
  bool blocked;
  /// Row r's first channel.
  Float* row(int64_t r) const {
    return blocked ? data + (r / pixels) * channels * pixels + (r % pixels) * 8 : data + r * channels;
  }
  /// From a row's 8-channel block to its next one.
  int64_t block_stride() const { return blocked ? pixels * 8 : 8; }
};

/// A GEMM against weights [OC, K] packed once, for inputs of any row count.
class PanelGemm {
 public:
  /// Whether the CPU has the AVX2 and FMA instructions the kernel uses.
  static bool available();
  /// `weight`: contiguous float32 [OC, K].
  explicit PanelGemm(const at::Tensor& weight);
  /// out = act(in · Wᵀ + bias [+ out]) for `rows` rows, `in` of K channels
  /// and `out` of OC; `bias` OC floats or null; out's old values are the
  /// residual when post_ops.sum. Applies the activations activate_row()
  /// takes (none, ReLU, clip, SiLU) and leaves any other to the caller.
  /// Parallel over ATen's threads.
  void run(const PixelRows<const float>& in, const PixelRows<float>& out, int64_t rows, const float* bias,
           const PostOps& post_ops) const;

 private:
  int64_t oc_, k_;
  at::Tensor panels_;  // [⌈OC/16⌉, K, 16], zeros past OC
};

}  // namespace fx::onednn::detail
