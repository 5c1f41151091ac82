// PanelGemm (see panel_gemm.h): a 6×16 AVX2 tile over the whole depth K
// (no blocking of K: a panel of 16 × K weights, 64 KB at K = 1024, stays in
// L2 while the tiles of a thread's rows stream past it), then the tile's
// epilogue. Work items are (panel, tile of rows) pairs, panel-major, split
// between ATen's threads in contiguous ranges: a thread keeps its panel
// for all its tiles of rows, and the two threads of a layer at 7×7 read
// half the weights each.
#include "onednn/panel_gemm.h"

#include "onednn/context.h"
#include "onednn/silu_vec.h"

#include <fx/error.h>

#include <ATen/Parallel.h>

#include <immintrin.h>

#include <algorithm>

namespace fx::onednn::detail {
namespace {

#define FX_AVX2 __attribute__((target("avx2,fma")))

constexpr int64_t kTileRows = 6, kPanel = 16;
// The tile prefetches the weights 64 input channels (4 KB) ahead: a layer's
// weights come from L3 or memory, the panel once per thread and tile row
// group. Measured, AMD EPYC Zen 5 held at AVX2, 2 threads, caches flushed
// before each call, [1, 192, 7, 7] → 1152 + SiLU: 0.153 → 0.134 ms
// (oneDNN's packed sgemm and its passes: 0.152); [1, 960, 7, 7] → 160
// blocked: 0.112 → 0.089 (0.133); 512 or 2048 floats ahead did no better.
constexpr int64_t kPrefetch = 1024;

/// What the epilogue applies, besides the bias.
struct Epilogue {
  bool sum;
  Activation activation;
  float lo, hi;  // clip's bounds
};

FX_AVX2 inline __m256i first_lanes(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

FX_AVX2 inline __m256 activate(__m256 v, const Epilogue& e) {
  // max / min return their second operand where either is NaN: NaN stays NaN, as in activate_row().
  switch (e.activation) {
    case Activation::Relu: return _mm256_max_ps(_mm256_setzero_ps(), v);
    case Activation::Clip: return _mm256_min_ps(_mm256_set1_ps(e.hi), _mm256_max_ps(_mm256_set1_ps(e.lo), v));
    case Activation::Silu: return silu_vec::silu8(v);
    default: return v;
  }
}

/// Stores the first `n` (1 to 8, or more: all 8) of 8 outputs at `o` with
/// the bias at `b` (or none) and the residual at `o` added, activated.
FX_AVX2 inline void finish(__m256 v, float* o, const float* b, int64_t n, const Epilogue& e) {
  if (n >= 8) {
    if (b) v = _mm256_add_ps(v, _mm256_loadu_ps(b));
    if (e.sum) v = _mm256_add_ps(v, _mm256_loadu_ps(o));
    _mm256_storeu_ps(o, activate(v, e));
    return;
  }
  const __m256i m = first_lanes(n);
  if (b) v = _mm256_add_ps(v, _mm256_maskload_ps(b, m));
  if (e.sum) v = _mm256_add_ps(v, _mm256_maskload_ps(o, m));
  _mm256_maskstore_ps(o, m, activate(v, e));
}

/// Rows [r0, r0 + R) × output channels [c0, c0 + 16) (those below oc) of
/// the product, finished into `out`; `w` the panel of c0.
template <int R>
FX_AVX2 void tile(const PixelRows<const float>& in, int64_t r0, int64_t k, const float* w,
                  const PixelRows<float>& out, int64_t c0, int64_t oc, const float* bias, const Epilogue& e) {
  const float* a0 = in.row(r0);
  const float *a1 = a0, *a2 = a0, *a3 = a0, *a4 = a0, *a5 = a0;
  if (R > 1) a1 = in.row(r0 + 1);
  if (R > 2) a2 = in.row(r0 + 2);
  if (R > 3) a3 = in.row(r0 + 3);
  if (R > 4) a4 = in.row(r0 + 4);
  if (R > 5) a5 = in.row(r0 + 5);
  const int64_t stride = in.block_stride();
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00,
         c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  // One input channel j of every row: two loads of the panel, R broadcasts, 2R FMAs.
#define FX_CHANNEL(j)                                                              \
  {                                                                                \
    const __m256 w0 = _mm256_loadu_ps(w), w1 = _mm256_loadu_ps(w + 8);            \
    _mm_prefetch(reinterpret_cast<const char*>(w + kPrefetch), _MM_HINT_T0);       \
    w += kPanel;                                                                   \
    FX_ROW(0, j) FX_ROW(1, j) FX_ROW(2, j) FX_ROW(3, j) FX_ROW(4, j) FX_ROW(5, j) \
  }
#define FX_ROW(i, j)                                   \
  if (R > i) {                                         \
    const __m256 x = _mm256_broadcast_ss(a##i + (j));  \
    c##i##0 = _mm256_fmadd_ps(x, w0, c##i##0);         \
    c##i##1 = _mm256_fmadd_ps(x, w1, c##i##1);         \
  }
  for (int64_t block = 0; block < k / 8; ++block) {
    FX_CHANNEL(0) FX_CHANNEL(1) FX_CHANNEL(2) FX_CHANNEL(3) FX_CHANNEL(4) FX_CHANNEL(5) FX_CHANNEL(6) FX_CHANNEL(7)
    a0 += stride, a1 += stride, a2 += stride, a3 += stride, a4 += stride, a5 += stride;
  }
  for (int64_t j = 0; j < k % 8; ++j) FX_CHANNEL(j)  // an NHWC input's last channels
#undef FX_ROW
#undef FX_CHANNEL
  const int64_t left = oc - c0, half = out.block_stride();
  const float* b0 = bias ? bias + c0 : nullptr;
  const float* b1 = bias ? bias + c0 + 8 : nullptr;
#define FX_FINISH(i)                                               \
  if (R > i) {                                                     \
    float* o = out.row(r0 + i) + c0 / 8 * half;                    \
    finish(c##i##0, o, b0, left, e);                               \
    if (left > 8) finish(c##i##1, o + half, b1, left - 8, e);      \
  }
  FX_FINISH(0) FX_FINISH(1) FX_FINISH(2) FX_FINISH(3) FX_FINISH(4) FX_FINISH(5)
#undef FX_FINISH
}

using Tile = void (*)(const PixelRows<const float>&, int64_t, int64_t, const float*, const PixelRows<float>&,
                      int64_t, int64_t, const float*, const Epilogue&);
constexpr Tile kTiles[kTileRows + 1] = {nullptr, tile<1>, tile<2>, tile<3>, tile<4>, tile<5>, tile<6>};

}  // namespace

bool PanelGemm::available() { return cpu_has_avx2_fma(); }

PanelGemm::PanelGemm(const at::Tensor& weight) {
  if (weight.scalar_type() != at::kFloat || weight.dim() != 2 || !weight.is_contiguous())
    throw Error("onednn_conv2d: the panel GEMM takes a contiguous float32 weight [out_channels, in_channels], got " +
                sizes_str(weight.sizes()));
  oc_ = weight.size(0);
  k_ = weight.size(1);
  const int64_t panels = (oc_ + kPanel - 1) / kPanel;
  // Made on the kernel's first run: outside ATen's allocator (unplanned_empty).
  panels_ = unplanned_empty({panels, k_, kPanel}, at::kFloat);
  panels_.zero_();
  for (int64_t p = 0; p < panels; ++p) {
    const int64_t width = std::min(kPanel, oc_ - p * kPanel);
    panels_[p].narrow(1, 0, width).copy_(weight.narrow(0, p * kPanel, width).t());
  }
}

void PanelGemm::run(const PixelRows<const float>& in, const PixelRows<float>& out, int64_t rows, const float* bias,
                    const PostOps& post_ops) const {
  if (in.channels != k_ || out.channels != oc_ || (in.blocked && k_ % 8) || (out.blocked && oc_ % 8))
    throw Error("onednn_conv2d: the panel GEMM of " + std::to_string(k_) + " into " + std::to_string(oc_) +
                " channels got rows of " + std::to_string(in.channels) + " into " + std::to_string(out.channels) +
                (in.blocked || out.blocked ? " (blocked: multiples of 8)" : ""));
  if (rows <= 0) return;
  const Epilogue e{post_ops.sum, post_ops.activation, post_ops.alpha, post_ops.beta};
  const int64_t tiles = (rows + kTileRows - 1) / kTileRows, panels = panels_.size(0);
  const float* weights = panels_.data_ptr<float>();
  at::parallel_for(0, panels * tiles, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t p = i / tiles, r0 = i % tiles * kTileRows;
      kTiles[std::min(kTileRows, rows - r0)](in, r0, k_, weights + p * k_ * kPanel, out, p * kPanel, oc_, bias, e);
    }
  });
}

}  // namespace fx::onednn::detail
