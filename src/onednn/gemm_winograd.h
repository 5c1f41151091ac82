#pragma once
// Internal: a float32 3×3 convolution as Winograd's F(2×2, 3×3) on oneDNN's
// packed GEMMs, below AVX-512, where oneDNN 2.6 has no Winograd kernel.
//
// Each 2×2 output tile is Aᵀ [Σ_c (G g Gᵀ) ⊙ (Bᵀ d B)] A of a 4×4 input tile
// d (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks",
// 2016): the 16 positions ξ of the 4×4 transformed tiles are 16 independent
// products [tiles, IC] × [IC, OC], 16 multiplications per tile and channel
// pair where the direct convolution has 36. The weights' transforms
// U_ξ = (G g Gᵀ)_ξ are packed once into oneDNN's packed GEMM (packed_gemm.h);
// a run transforms the input tiles (V_ξ, eight channels per AVX2 vector),
// runs the 16 GEMMs, and transforms their results back, adding the bias and
// residual and applying ReLU on the way out. Shallow layers run in blocks
// of tiles, one thread each from input to output (their data stays in its
// core's caches); deep ones in chunks of whole images, each pass parallel
// and the GEMMs, one per image and ξ, split between threads. Every GEMM runs
// on one thread and over the tiles of one block or one image, so the bits
// do not depend on the thread count, the layouts or the batch. (One GEMM
// over a chunk of several images gave an image in a chunk of three, 160
// channels at 30×30, other bits than alone: oneDNN's packed sgemm does not
// compute every row of a GEMM alike.)
//
// F(4×4, 3×3) (36 products where the direct kernel has 144) was about twice
// as fast again on these layers (held at AVX2 on an AMD EPYC Zen 5, 1 thread,
// batch 1: 64ch 56×56 2.07 → 0.86 ms, 128ch 28×28 2.09 → 0.71) but an order
// of magnitude less accurate in float32, even at its most accurate points:
// inception_v3 then strayed from float64 by 2.1x eager's float32 error, where
// the tests hold an optimised model to 2x (gemm_winograd.cpp). F(2×2, 3×3)
// is within ~3e-6 of the largest output of the direct kernel's results, as
// oneDNN's AVX-512 Winograd (which also takes F(2×2) below batch 4).
// Outputs of at most 8×8 take GemmConv instead.
#include "onednn/gemm_kernel.h"
#include "onednn/packed_gemm.h"

#include <vector>

namespace fx::onednn::detail {

/// Whether GemmWinograd can run here: the packed GEMM is available (below
/// AVX-512), oneDNN's ISA is at least AVX2 and the CPU has AVX2 and FMA.
bool gemm_winograd_available();

/// The 3×3 convolution of one input shape as Winograd F(2×2, 3×3).
class GemmWinograd : public GemmKernel {
 public:
  /// Whether a convolution runs here as GemmWinograd: ConvParams::winograd,
  /// float32 in and out, a 3×3 kernel, stride 1, dilation 1, groups 1,
  /// channel counts multiples of 8 from 16, an output larger than 8×8, an
  /// NHWC or blocked input, and gemm_winograd_available().
  static bool fits(const ConvParams& params, int64_t kh, int64_t kw, at::IntArrayRef in_sizes,
                   at::IntArrayRef out_sizes, Layout in, bool float32);
  /// `weight` [OC, IC, 3, 3] float32; `in` / `out` the input's and
  /// output's [N, C, H, W].
  GemmWinograd(const at::Tensor& weight, const ConvParams& params, at::IntArrayRef in, at::IntArrayRef out);
  void run(const float* src, Layout in_layout, at::Tensor& dst, bool blocked_out, const at::Tensor& bias,
           const PostOps& post_ops) const override;

 private:
  /// The GEMMs of U_ξ [OC, IC], packed for `rows` rows (a block's, or in
  /// chunks one image's), one thread each.
  std::vector<PackedGemm> pack(int64_t rows) const;
  /// Rows begin .. end of the block (or chunk) of tiles from row `row0`
  /// (over the batch, image by image): their input transforms into v
  /// (kPositions × [slice, IC]).
  void input_rows(const float* src, bool blocked_in, int64_t row0, int64_t begin, int64_t end, int64_t slice,
                  float* v) const;
  /// The outputs of those rows from the GEMMs' results m (kPositions ×
  /// [slice, OC]) into dst, + bias (+ dst when `sum`), ReLU when `relu`.
  void output_rows(const float* m, int64_t row0, int64_t begin, int64_t end, int64_t slice, float* dst,
                   bool blocked_out, const float* bias, bool sum, bool relu) const;
  /// Rows [row0, row0 + rows) of the batch (rows <= slice) from input to
  /// output on the calling thread, with `gemms` packed for `slice` rows.
  void block(const std::vector<PackedGemm>& gemms, const float* src, bool blocked_in, int64_t row0, int64_t rows,
             int64_t slice, float* v, float* m, float* dst, bool blocked_out, const float* bias, bool sum,
             bool relu) const;

  int64_t n_, c_, h_, w_, oc_, oh_, ow_, pad_h_, pad_w_;
  int64_t tiles_h_, tiles_w_;  // output tiles per column / row
  int64_t rows_;               // tiles of the batch: N · tiles_h_ · tiles_w_
  int64_t block_rows_;         // tiles per block (one thread's), or per chunk of whole images
  bool per_thread_blocks_;     // blocks of one thread each, or chunks in parallel passes
  at::Tensor weight_;          // [OC, IC, 3, 3] float32, the packed op's plain copy
  /// The packed GEMMs, made on the first run: key 0 for block_rows_ rows
  /// (chunks: one image's tiles; see pack()), key 1 for half a block (half
  /// blocks, see run()).
  mutable KernelCache<int, std::vector<PackedGemm>> gemms_;
};

}  // namespace fx::onednn::detail
