// GemmWinograd: a float32 3×3 convolution as Winograd's F(2×2, 3×3) on
// oneDNN's packed GEMMs (see gemm_winograd.h). The tiles of the batch are
// rows: their transforms V (16 × [rows, IC]) and the GEMMs' results M
// (16 × [rows, OC]). Shallow layers take blocks of rows, each on one thread
// from the input transform through the 16 GEMMs to the output transform;
// deep ones take chunks of whole images, each in three parallel passes (the
// GEMMs, one per image and ξ, split between threads). Every GEMM is packed
// and run on one thread. The transforms are AVX2 + FMA code (the functions'
// target attribute), called only where gemm_winograd_available().
#include "onednn/gemm_winograd.h"

#include <fx/error.h>

#include <ATen/Parallel.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <optional>

namespace fx::onednn::detail {
namespace {

/// A block's V and M stay within this many bytes each: both within a
/// core's L2 cache (512 KiB on an AMD EPYC Zen 3).
constexpr int64_t kBlockBytes = int64_t(192) << 10;
/// Blocks of one thread each only where the weights' transforms (read once
/// per block) are at most this large, and the batch has kMinBlocks blocks.
constexpr int64_t kBlockWeightBytes = int64_t(1) << 20, kMinBlocks = 4;
/// Blocks of a multiple of this many rows are split in halves between
/// threads (see run()).
constexpr int64_t kHalvable = 24;
/// Otherwise chunks of whole images whose V and M stay within this.
constexpr int64_t kChunkBytes = int64_t(16) << 20;

// F(2×2, 3×3) (Lavin and Gray): 2×2 output tiles from 4×4 input tiles, 16
// products per tile and channel pair where the direct convolution has 36.
// Not F(4×4, 3×3) (36 where it has 144): in float32 its outputs are an
// order of magnitude further from float64's (2.7e-6 of the largest output
// at Toom-Cook's most accurate points 0, ±1, 2, -1/2, 5.7e-6 at Lavin's,
// against 3.5e-7 here and ~1e-7 for the direct kernel; 128 channels of
// ReLU'd N(0, 1) inputs), too far for an ill-conditioned model: inception_v3
// optimised then strayed from its float64 result by 2.1x eager's float32
// error (it is held to 2x). oneDNN's AVX-512 Winograd takes F(2×2, 3×3)
// below batch 4 too.
constexpr int kOut = 2, kIn = 4, kPositions = kIn * kIn;
// G, the weights' transform U = G g Gᵀ (4×3).
constexpr double kG[kIn][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};

/// y = Bᵀ x for four vectors x: [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1].
__attribute__((target("avx2,fma"))) inline void input_1d(const __m256* x, __m256* y) {
  y[0] = _mm256_sub_ps(x[0], x[2]);
  y[1] = _mm256_add_ps(x[1], x[2]);
  y[2] = _mm256_sub_ps(x[2], x[1]);
  y[3] = _mm256_sub_ps(x[1], x[3]);
}

/// y = Aᵀ m for four vectors m: [1 1 1 0; 0 1 -1 -1].
__attribute__((target("avx2,fma"))) inline void output_1d(const __m256* m, __m256* y) {
  y[0] = _mm256_add_ps(_mm256_add_ps(m[0], m[1]), m[2]);
  y[1] = _mm256_sub_ps(_mm256_sub_ps(m[1], m[2]), m[3]);
}

/// One tile's input transform: the 4×4 pixels from (y0, x0) (zero outside
/// the image) → 16 vectors written to v + ξ · stride.
__attribute__((target("avx2,fma"))) void input_tile(const float* src, bool blocked, int64_t n, int64_t block,
                                                    int64_t y0, int64_t x0, int64_t h, int64_t w, int64_t channels,
                                                    float* v, int64_t stride) {
  __m256 d[kIn][kIn], t[kIn][kIn];
  for (int y = 0; y < kIn; ++y)
    for (int x = 0; x < kIn; ++x) {
      const int64_t iy = y0 + y, ix = x0 + x;
      d[x][y] = iy < 0 || iy >= h || ix < 0 || ix >= w
                    ? _mm256_setzero_ps()
                    : _mm256_loadu_ps(src + pixel(blocked, n, block, iy, ix, h, w, channels));
    }
  // Bᵀ d along the columns (d[x] is column x), then · B along the rows.
  for (int x = 0; x < kIn; ++x) input_1d(d[x], t[x]);  // t[x][k] = (Bᵀ d)[k][x]
  for (int k = 0; k < kIn; ++k) {
    __m256 row[kIn], out[kIn];
    for (int x = 0; x < kIn; ++x) row[x] = t[x][k];
    input_1d(row, out);
    for (int l = 0; l < kIn; ++l) _mm256_storeu_ps(v + (k * kIn + l) * stride, out[l]);
  }
}

/// One tile's output transform: 16 vectors at m + ξ · stride → the 2×2
/// outputs from (y0, x0) that are inside the oh × ow image, + bias (+ dst),
/// ReLU.
__attribute__((target("avx2,fma"))) void output_tile(const float* m, int64_t stride, float* dst, bool blocked,
                                                     int64_t n, int64_t block, int64_t y0, int64_t x0, int64_t oh,
                                                     int64_t ow, int64_t channels, const float* bias, bool sum,
                                                     bool relu) {
  __m256 t[kIn][kOut];  // t[x] = Aᵀ column x
  for (int x = 0; x < kIn; ++x) {
    __m256 col[kIn];
    for (int k = 0; k < kIn; ++k) col[k] = _mm256_loadu_ps(m + (k * kIn + x) * stride);
    output_1d(col, t[x]);
  }
  const __m256 b = bias ? _mm256_loadu_ps(bias + block * 8) : _mm256_setzero_ps();
  for (int k = 0; k < kOut && y0 + k < oh; ++k) {
    __m256 row[kIn], out[kOut];
    for (int x = 0; x < kIn; ++x) row[x] = t[x][k];
    output_1d(row, out);
    for (int l = 0; l < kOut && x0 + l < ow; ++l) {
      float* p = dst + pixel(blocked, n, block, y0 + k, x0 + l, oh, ow, channels);
      __m256 o = _mm256_add_ps(out[l], b);
      if (sum) o = _mm256_add_ps(o, _mm256_loadu_ps(p));
      if (relu) o = _mm256_max_ps(o, _mm256_setzero_ps());
      _mm256_storeu_ps(p, o);
    }
  }
}

}  // namespace

bool gemm_winograd_available() {
  static const bool yes =
      packed_gemm_available() && dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx2 && cpu_has_avx2_fma();
  return yes;
}

bool GemmWinograd::fits(const ConvParams& params, int64_t kh, int64_t kw, at::IntArrayRef in_sizes,
                        at::IntArrayRef out_sizes, Layout in, bool float32) {
  return params.winograd && float32 && params.groups == 1 && kh == 3 && kw == 3 &&
         params.stride == std::vector<int64_t>{1, 1} && params.dilation == std::vector<int64_t>{1, 1} &&
         in_sizes[1] % 8 == 0 && out_sizes[1] % 8 == 0 && in_sizes[1] >= 16 && out_sizes[1] >= 16 &&
         out_sizes[2] * out_sizes[3] > 64 && (in == Layout::Nhwc || in == Layout::Blocked) && gemm_winograd_available();
}

GemmWinograd::GemmWinograd(const at::Tensor& weight, const ConvParams& params, at::IntArrayRef in, at::IntArrayRef out)
    : n_(in[0]),
      c_(in[1]),
      h_(in[2]),
      w_(in[3]),
      oc_(out[1]),
      oh_(out[2]),
      ow_(out[3]),
      pad_h_(params.padding[0]),
      pad_w_(params.padding[1]),
      tiles_h_((oh_ + kOut - 1) / kOut),
      tiles_w_((ow_ + kOut - 1) / kOut),
      weight_(weight) {
  if (weight.scalar_type() != at::kFloat || weight.sizes() != at::IntArrayRef{oc_, c_, 3, 3} || !weight.is_contiguous())
    throw Error("onednn_conv2d: the Winograd convolution takes contiguous float32 weights [" + std::to_string(oc_) +
                ", " + std::to_string(c_) + ", 3, 3], got " + sizes_str(weight.sizes()));
  rows_ = n_ * tiles_h_ * tiles_w_;
  const int64_t row_bytes = kPositions * std::max(c_, oc_) * int64_t(sizeof(float));  // of V or M
  // Blocks of one thread each (block_rows_ rows whose V and M fit kBlockBytes)
  // where the weights' transforms are small enough to be read once per
  // block and there are blocks enough for the threads; else (deep layers,
  // few tiles) chunks of whole images, each in three parallel passes, whose
  // GEMMs (one per image and ξ) are split between threads. Neither depends
  // on the thread count: the bits do not either.
  block_rows_ = std::max<int64_t>(16, kBlockBytes / row_bytes);
  // ... rounded down to a multiple of 24 rows (kHalvable), for the bits:
  // oneDNN's packed sgemm computes every row of such a block alike, and of
  // half of one too (run() shares an odd number of blocks by halving one),
  // but not every row of a block of 32 (96 channels), 38 (80) or 44, where a
  // row's bits depended on its place in the block, so on the batch
  // (ChunksOfImagesAndBlocksOfTilesGiveEachImagesOwnResult). So blocks are
  // not resized to an even number per image either (18 of 44 tiles at 56×56
  // in place of 17 of 48: resnet18 and resnet50 0.95-0.98 of their time at
  // 2 threads, AMD EPYC Zen 5 held at AVX2, but other bits by batch).
  if (block_rows_ >= kHalvable) block_rows_ -= block_rows_ % kHalvable;
  per_thread_blocks_ =
      kPositions * c_ * oc_ * int64_t(sizeof(float)) <= kBlockWeightBytes && rows_ >= kMinBlocks * block_rows_;
  if (!per_thread_blocks_) {
    const int64_t tiles = tiles_h_ * tiles_w_;
    int64_t images = 1;  // the most images per chunk that divide the batch and keep V and M within kChunkBytes
    for (int64_t d = n_; d >= 1; --d)
      if (n_ % d == 0 && d * tiles * row_bytes <= kChunkBytes) {
        images = d;
        break;
      }
    block_rows_ = images * tiles;
  }
  block_rows_ = std::min(block_rows_, rows_);
}

std::vector<PackedGemm> GemmWinograd::pack(int64_t rows) const {
  // U_ξ[o][i] = (G g_oi Gᵀ)_ξ in double, then float32. Made on the
  // kernel's first run: outside ATen's allocator (unplanned_empty), whose
  // allocations in a forward the memory plan records.
  at::Tensor u = unplanned_empty({kPositions, oc_, c_}, at::kFloat);
  const float* g = weight_.data_ptr<float>();
  float* up = u.data_ptr<float>();
  at::parallel_for(0, oc_ * c_, 256, [&](int64_t begin, int64_t end) {
    for (int64_t oi = begin; oi < end; ++oi) {
      const float* k = g + oi * 9;
      double gk[kIn][3];  // G g
      for (int a = 0; a < kIn; ++a)
        for (int j = 0; j < 3; ++j) gk[a][j] = kG[a][0] * k[j] + kG[a][1] * k[3 + j] + kG[a][2] * k[6 + j];
      for (int a = 0; a < kIn; ++a)
        for (int b = 0; b < kIn; ++b)
          up[(a * kIn + b) * oc_ * c_ + oi] =
              static_cast<float>(gk[a][0] * kG[b][0] + gk[a][1] * kG[b][1] + gk[a][2] * kG[b][2]);
    }
  });
  // Packed inside a parallel region (or on one thread), where oneDNN runs
  // on one thread, as run() computes them: whatever the thread count, so one
  // set serves every thread count. The GEMMs are split between threads by
  // run()'s loops, not by oneDNN.
  std::vector<std::optional<PackedGemm>> packed(kPositions);
  at::parallel_for(0, kPositions, 1, [&](int64_t begin, int64_t end) {
    for (int64_t xi = begin; xi < end; ++xi) packed[xi].emplace(u[xi], rows, "onednn_conv2d");
  });
  std::vector<PackedGemm> gemms;
  gemms.reserve(kPositions);
  for (auto& p : packed) gemms.push_back(std::move(*p));
  return gemms;
}

void GemmWinograd::input_rows(const float* src, bool blocked_in, int64_t row0, int64_t begin, int64_t end,
                              int64_t slice, float* v) const {
  const int64_t tiles = tiles_h_ * tiles_w_;
  for (int64_t r = begin; r < end; ++r) {
    const int64_t n = (row0 + r) / tiles, t = (row0 + r) % tiles;
    for (int64_t block = 0; block < c_ / 8; ++block)
      input_tile(src, blocked_in, n, block, t / tiles_w_ * kOut - pad_h_, t % tiles_w_ * kOut - pad_w_, h_, w_, c_,
                 v + r * c_ + block * 8, slice * c_);
  }
}

void GemmWinograd::output_rows(const float* m, int64_t row0, int64_t begin, int64_t end, int64_t slice, float* dst,
                               bool blocked_out, const float* bias, bool sum, bool relu) const {
  const int64_t tiles = tiles_h_ * tiles_w_;
  for (int64_t r = begin; r < end; ++r) {
    const int64_t n = (row0 + r) / tiles, t = (row0 + r) % tiles;
    for (int64_t block = 0; block < oc_ / 8; ++block)
      output_tile(m + r * oc_ + block * 8, slice * oc_, dst, blocked_out, n, block, t / tiles_w_ * kOut,
                  t % tiles_w_ * kOut, oh_, ow_, oc_, bias, sum, relu);
  }
}

void GemmWinograd::block(const std::vector<PackedGemm>& gemms, const float* src, bool blocked_in, int64_t row0,
                         int64_t rows, int64_t slice, float* v, float* m, float* dst, bool blocked_out,
                         const float* bias, bool sum, bool relu) const {
  input_rows(src, blocked_in, row0, 0, rows, slice, v);
  // Rows past the end: zeros (the GEMMs read them; their results are not used).
  if (rows < slice)
    for (int xi = 0; xi < kPositions; ++xi)
      std::memset(v + (xi * slice + rows) * c_, 0, (slice - rows) * c_ * sizeof(float));
  for (int xi = 0; xi < kPositions; ++xi) gemms[xi].compute(v + xi * slice * c_, m + xi * slice * oc_, 0.f);
  output_rows(m, row0, 0, rows, slice, dst, blocked_out, bias, sum, relu);
}

void GemmWinograd::run(const float* src, Layout in_layout, at::Tensor& dst, bool blocked_out, const at::Tensor& bias,
                       const PostOps& post_ops) const {
  if (n_ == 0 || oh_ <= 0 || ow_ <= 0) return;
  check_run_args(dst, blocked_out, bias, oc_, "Winograd");
  const int64_t tiles = tiles_h_ * tiles_w_;
  // Packed for a block's rows, or (chunks) for one image's: see below.
  const std::vector<PackedGemm>& gemms = *gemms_.get(0, [&] { return pack(per_thread_blocks_ ? block_rows_ : tiles); });
  const bool relu = post_ops.activation == Activation::Relu, blocked_in = in_layout == Layout::Blocked;
  float* out = dst.data_ptr<float>();
  const float* b = bias.defined() ? bias.data_ptr<float>() : nullptr;
  const size_t v_bytes = kPositions * block_rows_ * c_ * sizeof(float),
               m_bytes = kPositions * block_rows_ * oc_ * sizeof(float);
  if (per_thread_blocks_) {
    // Each block on one thread from its input tiles to its outputs, in that
    // thread's scratchpads: the transformed tiles stay in its core's caches.
    // The work is counted in half blocks where block_rows_ is a multiple of
    // 24 (kHalvable): a thread whose range starts or ends inside a block
    // runs that half alone, on GEMMs packed for half as many rows, so two
    // threads share an odd number of blocks equally (at 56×56 and 64
    // channels, 17 blocks of 48 tiles: 9 and 8 whole ones before). oneDNN's
    // packed sgemm gives a row the same bits in a GEMM of 24 rows as of 48
    // (fxcpp run of resnet18, blocks of 48, 24 and 12: the same output,
    // byte for byte; of 44: another), so the bits still do not depend on
    // the thread count. Measured on the AMD EPYC Zen 5 held at AVX2, batch 1,
    // 2 threads, paired fxcpp bench runs: resnet18 0.978-0.985 of its time
    // (four series of 10-12 pairs), resnet50 0.997 (its 1×1 layers take
    // most of its time).
    const int64_t blocks = (rows_ + block_rows_ - 1) / block_rows_, half = block_rows_ / 2;
    const bool halves = block_rows_ % kHalvable == 0 && blocks % 2 && at::get_num_threads() > 1;
    const std::shared_ptr<const std::vector<PackedGemm>> half_gemms =
        halves ? gemms_.get(1, [&] { return pack(half); }) : nullptr;
    at::parallel_for(0, halves ? 2 * blocks : blocks, 1, [&](int64_t begin, int64_t end) {
      float* v = static_cast<float*>(scratchpad(v_bytes, 1));
      float* m = static_cast<float*>(scratchpad(m_bytes, 2));
      for (int64_t u = begin; u < end;) {
        const bool whole = !halves || (u % 2 == 0 && u + 1 < end);  // else the half of a block the range cuts
        const int64_t row0 = halves ? u * half : u * block_rows_, slice = whole ? block_rows_ : half;
        if (row0 < rows_)
          block(whole ? gemms : *half_gemms, src, blocked_in, row0, std::min(slice, rows_ - row0), slice, v, m, out,
                blocked_out, b, post_ops.sum, relu);
        u += whole && halves ? 2 : 1;
      }
    });
  } else {
    // Chunks of whole images (rows_ a multiple of block_rows_), each pass
    // parallel. The GEMMs run image by image, each on its own tiles as if
    // the image were alone: oneDNN's packed sgemm does not compute every row
    // of one GEMM over the chunk alike, so an image's bits then depended on
    // its place in the batch (3 images of 160 channels at 30×30:
    // ChunksOfImagesAndBlocksOfTilesGiveEachImagesOwnResult). A thread's
    // GEMMs share their ξ where they can, so its packed weights stay in cache.
    float* v = static_cast<float*>(scratchpad(v_bytes, 1));
    float* m = static_cast<float*>(scratchpad(m_bytes, 2));
    const int64_t images = block_rows_ / tiles;
    for (int64_t row0 = 0; row0 < rows_; row0 += block_rows_) {
      at::parallel_for(0, block_rows_, 4, [&](int64_t begin, int64_t end) {
        input_rows(src, blocked_in, row0, begin, end, block_rows_, v);
      });
      at::parallel_for(0, kPositions * images, 1, [&](int64_t begin, int64_t end) {
        for (int64_t q = begin; q < end; ++q) {
          const int64_t xi = q / images, first = xi * block_rows_ + q % images * tiles;
          gemms[xi].compute(v + first * c_, m + first * oc_, 0.f);
        }
      });
      at::parallel_for(0, block_rows_, 4, [&](int64_t begin, int64_t end) {
        output_rows(m, row0, begin, end, block_rows_, out, blocked_out, b, post_ops.sum, relu);
      });
    }
  }
  if (!relu) apply_activation_(dst, post_ops);
}

}  // namespace fx::onednn::detail
