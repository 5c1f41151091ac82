#pragma once
// Internal: a float32 convolution as im2col and oneDNN's packed GEMM, for
// the deep, small layers where oneDNN 2.6's direct AVX2 kernel is weak.
//
// Below AVX-512, oneDNN's direct convolution (jit:avx2, nChw8c) blocks its
// registers along the output row: at 7×7 outputs and batch 1 it reaches
// ~50 GFLOP/s on an AMD EPYC Zen 3 (1 thread), where the same product as one
// GEMM, [N·OH·OW, C·kh·kw] × [C·kh·kw, OC] with the weights packed once,
// reaches ~70 (ONNX Runtime's MLAS gets there the same way). Measured there,
// 1 thread, min of 25 alternated calls (oneDNN direct against this):
//   [1, 512, 7, 7] 3×3 → 512        4.45 → 3.39 ms
//   [1, 256, 14, 14] 3×3/2 → 512    2.46 → 1.72 ms
//   [8, 512, 7, 7] 3×3 → 512        24.6 → 24.0 ms
//   [8, 256, 14, 14] 3×3/2 → 512    16.8 → 14.7 ms
// and at 2 threads 2.44 → 2.19 and 1.22 → 0.87 ms at batch 1. Larger outputs
// are the other way round (14×14 at batch 8: 22.1 against 28.8 ms), as are
// 1×1 convolutions on one thread (no im2col saved, 1.54 against 1.62 ms at
// 7×7): so a kernel larger than 1×1 with an output of at most 8×8 takes
// this path. A 1×1 kernel takes it on more than one thread for 16 to 64
// output pixels in all: oneDNN's jit_1x1 splits 49 pixels badly between two
// threads (AMD EPYC Zen 5 held at AVX2, 2 threads, [1, 160, 7, 7] → 960:
// 92 us against 73 as a GEMM; mobilenet_v2's last ten 1×1 layers 1.34 →
// 1.26 ms in the model), and at batch 8 the copies in and out cost more
// than the GEMM saves (mobilenet_v2 4% slower). Such a 1×1 convolution (of
// stride 1, no padding) runs on fxcpp's own GEMM where the CPU has AVX2 and
// FMA (panel_gemm.h): no im2col of a blocked input, no pass before or after.
#include "onednn/gemm_kernel.h"
#include "onednn/packed_gemm.h"
#include "onednn/packed_ops.h"
#include "onednn/panel_gemm.h"

#include <memory>

namespace fx::onednn::detail {

/// The convolution of one input shape as im2col + packed GEMM.
class GemmConv : public GemmKernel {
 public:
  /// Whether a convolution runs as a GEMM here: float32 in and out, groups
  /// 1, dilation 1, an output of at most 8×8 pixels, a kernel larger than
  /// 1×1 (or a 1×1 one on more than one thread with 16 to 64 output pixels
  /// in all), an NHWC or blocked (nChw8c) input, and below AVX-512 with the
  /// packed GEMM available.
  static bool fits(const ConvParams& params, int64_t kh, int64_t kw, at::IntArrayRef out_sizes, Layout in,
                   bool float32);
  /// `weight` [OC, IC, kh, kw] float32; `in` / `out` the input's and
  /// output's [N, C, H, W].
  GemmConv(const at::Tensor& weight, const ConvParams& params, at::IntArrayRef in, at::IntArrayRef out);
  void run(const float* src, Layout in_layout, at::Tensor& dst, bool blocked_out, const at::Tensor& bias,
           const PostOps& post_ops) const override;
  /// "gemm:panel" (a 1×1 convolution on PanelGemm) or "gemm:packed" (im2col
  /// and oneDNN's packed sgemm).
  const char* implementation() const { return panel_ ? "gemm:panel" : "gemm:packed"; }

 private:
  /// Row r of im2col: output pixel r's receptive field, [kh·kw·IC] channels
  /// innermost, from an NHWC or (`blocked`) nChw8c src; zeros in the padding.
  void im2col_row(const float* src, bool blocked, int64_t r, float* row) const;

  int64_t n_, c_, h_, w_, oc_, oh_, ow_, kh_, kw_;
  std::vector<int64_t> stride_, padding_;
  int64_t rows_, depth_;                      // N·OH·OW, kh·kw·IC
  at::Tensor weight_;                         // [OC, kh, kw, IC] contiguous: the GEMM's rows (none with panel_)
  mutable KernelCache<int, PackedGemm> gemms_;  // by thread count (the packing splits the work)
  std::unique_ptr<const PanelGemm> panel_;      // a 1×1 convolution of stride 1 without padding, on AVX2
};

}  // namespace fx::onednn::detail
