#pragma once
// Internal: a float32 convolution fxcpp computes itself on oneDNN's packed
// GEMM, not on a oneDNN convolution primitive: GemmConv (im2col, the small
// deep layers) and GemmWinograd (Winograd's F(2×2, 3×3), 3×3 layers), both
// below AVX-512. PackedConv's kernel for one input shape holds one.
#include "onednn/packed_ops.h"
#include "onednn/silu.h"

#include <fx/error.h>

#include <immintrin.h>

#include <string>

namespace fx::onednn::detail {

/// Where pixel (n, y, x)'s eight channels from channel block `block` are in
/// an NHWC (`channels` per pixel) or blocked nChw8c [N, C/8, H, W, 8] tensor.
inline int64_t pixel(bool blocked, int64_t n, int64_t block, int64_t y, int64_t x, int64_t h, int64_t w,
                     int64_t channels) {
  return blocked ? (((n * (channels / 8) + block) * h + y) * w + x) * 8 : ((n * h + y) * w + x) * channels + block * 8;
}

/// Whether activate_row() applies `p`'s activation: none, ReLU, clip or SiLU.
inline bool activates_by_row(const PostOps& p) {
  const Activation a = p.activation;
  return a == Activation::None || a == Activation::Relu || a == Activation::Clip || a == Activation::Silu;
}

/// Applies `p`'s activation (one activates_by_row() takes) to the `n` floats
/// at `x` in place, in the pass that writes them; NaN stays NaN, as with ATen's.
inline void activate_row(float* x, int64_t n, const PostOps& p) {
  // ReLU and clip in SSE's maxps / minps (every x86-64 has them), which
  // return their second operand where either is NaN. Branch-free: GCC 12
  // compiled the std::max loop this replaces, `#pragma omp simd` and all,
  // to a compare and a jump per ReLU, which mispredicts on half of a
  // layer's outputs: resnet50's [1, 512, 7, 7] → 2048 with its residual
  // took 0.73 ms, 0.53 with this (AMD EPYC Zen 5 held at AVX2, 2 threads).
  const auto clamp = [x, n](__m128 lo, __m128 hi, bool upper) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
      const __m128 v = _mm_max_ps(lo, _mm_loadu_ps(x + i));
      _mm_storeu_ps(x + i, upper ? _mm_min_ps(hi, v) : v);
    }
    for (; i < n; ++i) {
      const __m128 v = _mm_max_ss(lo, _mm_load_ss(x + i));
      _mm_store_ss(x + i, upper ? _mm_min_ss(hi, v) : v);
    }
  };
  switch (p.activation) {
    case Activation::Relu: clamp(_mm_setzero_ps(), _mm_setzero_ps(), false); return;
    case Activation::Clip: clamp(_mm_set1_ps(p.alpha), _mm_set1_ps(p.beta), true); return;
    case Activation::Silu: silu_(x, n); return;
    default: return;
  }
}

/// A float32 convolution of one input shape on the packed GEMM.
class GemmKernel {
 public:
  virtual ~GemmKernel() = default;
  /// dst = activation(conv(src) + bias [+ dst]): `src` in layout `in_layout`
  /// (NHWC or blocked), `dst` NHWC or blocked (`blocked_out`), holding the
  /// residual when post_ops.sum; `bias` float32 [OC] or undefined.
  virtual void run(const float* src, Layout in_layout, at::Tensor& dst, bool blocked_out, const at::Tensor& bias,
                   const PostOps& post_ops) const = 0;

 protected:
  /// Checks run()'s `dst` (contiguous blocked, or channels_last) and `bias`
  /// (undefined, or contiguous float32 of `out_channels` values): fx::Error
  /// naming the kernel (`what`: "GEMM", "Winograd") otherwise.
  static void check_run_args(const at::Tensor& dst, bool blocked_out, const at::Tensor& bias, int64_t out_channels,
                             const char* what) {
    if (blocked_out ? !dst.is_contiguous() : !dst.is_contiguous(at::MemoryFormat::ChannelsLast))
      throw Error(std::string("onednn_conv2d: the ") + what + " convolution writes a " +
                  (blocked_out ? "contiguous blocked" : "channels_last") + " output, got strides " +
                  sizes_str(dst.strides()));
    if (bias.defined() && (bias.scalar_type() != at::kFloat || bias.numel() != out_channels || !bias.is_contiguous()))
      throw Error(std::string("onednn_conv2d: the ") + what + " convolution takes a contiguous float32 bias of " +
                  std::to_string(out_channels) + " values, got " + sizes_str(bias.sizes()));
  }
};

}  // namespace fx::onednn::detail
