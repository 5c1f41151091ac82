// The prompt kernel of linear_weight_only (see weight_only_kernels.h): many
// activation rows against int8 / int4 weights on AVX-512 VNNI, as an
// outer-product GEMM.
//
// The decode kernels (weight_only_kernels.cpp) read each weight row once and
// reduce its dot products horizontally: right for one row, but for a prompt
// every (row, channel) pair pays a fold of its lanes, and the activations are
// loaded once per vpdpbusd. Here 16 output channels are one vector: a panel
// of 16 weight rows is unpacked once per call into the layout vpdpbusd
// multiplies by a broadcast (for each 4 consecutive k, the 16 channels' 4
// bytes: [block][quad][channel][4]), and each row's 4 activation bytes are
// broadcast against it, so a block of 32 k costs a row 8 vpdpbusd, one cvt
// and one fma, and each weight vector serves kRows rows from registers
// (llama.cpp's repacked Q4_0 GEMMs do the same).
//
//   Σ_g s_g · Σ_b∈g d_b · Σ_k∈b raw_k · q_k  −  Σ_g s_g · z_g · xsum_g
//
// raw: int4 nibbles 0..15 (z: the zero point, 8 when symmetric), int8 with
// its sign bit flipped (w + 128, z: 128 plus its zero point): vpdpbusd's
// unsigned operand; q the activations in [-127, 127], its signed one.
#include "decoders/weight_only_kernels.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

namespace fx::decoders::detail {
namespace weight_only_panels {
namespace {

constexpr int64_t kBlock = 32;
/// Output channels per panel: one vector of 16 floats.
constexpr int64_t kPanel = 16;
/// Activation rows per pass over a panel, each weight vector loaded once for all of them.
constexpr int kRows = 6;
/// The same for two panels at once (32 channels: twice the accumulators).
constexpr int kTwoPanelRows = 4;

std::atomic<size_t> panel_count{0};

#define FX_WO_GEMM __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
// GCC 12's false positives on the unmasked AVX-512 intrinsics (see weight_only_kernels.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

/// One panel: weights in vpdpbusd's layout, scales and zero terms by group.
struct Panel {
  std::vector<uint32_t> w;  // [blocks][8 quads][16 channels]: 4 raw bytes each
  std::vector<float> s;     // [groups][16]
  std::vector<float> sz;    // [groups][16]: s · (zero point + the kernel's offset)
};

/// Packs channels [n0, n0 + count) (count <= 16; the rest zero): per block,
/// each channel's 32 raw bytes unpacked in a 16 x 32 scratch (int4: the low
/// nibbles are the block's first 16 weights, the high ones the last 16), then
/// transposed by dwords with gathers: quad q's vector is dword q of every
/// channel's row.
FX_WO_GEMM void pack(const WeightOnlyView& w, int64_t blocks, int64_t n0, int64_t count, Panel& p) {
  p.w.resize(static_cast<size_t>(blocks * 8 * kPanel));
  p.s.assign(static_cast<size_t>(w.groups * kPanel), 0.f);
  p.sz.assign(static_cast<size_t>(w.groups * kPanel), 0.f);
  const float offset = w.bits == 8 ? 128.f : 0.f, fixed = (w.bits == 4 ? 8.f : 0.f) + offset;
  alignas(64) uint8_t raw[kPanel][kBlock] = {};
  const __m512i channel_rows = _mm512_setr_epi32(0, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120);
  const __m128i m4 = _mm_set1_epi8(15);
  const int64_t block_bytes = w.bits == 4 ? kBlock / 2 : kBlock;
  for (int64_t b = 0; b < blocks; ++b) {
    const bool whole = (b + 1) * block_bytes <= w.row_bytes;
    for (int64_t c = 0; c < count; ++c) {
      const uint8_t* src = w.data + (n0 + c) * w.row_bytes + b * block_bytes;
      alignas(32) uint8_t part[kBlock];
      if (!whole) {  // the row's last, short block: zero weights past K (their activations are zero)
        std::memset(part, w.bits == 8 ? 0x80 : 0, sizeof(part));
        std::memcpy(part, src, static_cast<size_t>(std::max<int64_t>(0, w.row_bytes - b * block_bytes)));
        src = part;
      }
      if (w.bits == 4) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
        _mm_store_si128(reinterpret_cast<__m128i*>(raw[c]), _mm_and_si128(v, m4));
        _mm_store_si128(reinterpret_cast<__m128i*>(raw[c] + 16), _mm_and_si128(_mm_srli_epi16(v, 4), m4));
      } else {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
        _mm256_store_si256(reinterpret_cast<__m256i*>(raw[c]), _mm256_xor_si256(v, _mm256_set1_epi8(char(0x80))));
      }
    }
    uint32_t* dst = p.w.data() + b * 8 * kPanel;
    for (int q = 0; q < 8; ++q)
      _mm512_storeu_si512(dst + q * kPanel,
                          _mm512_i32gather_epi32(_mm512_add_epi32(channel_rows, _mm512_set1_epi32(q)), raw, 4));
  }
  for (int64_t c = 0; c < count; ++c) {
    const int64_t n = n0 + c;
    for (int64_t g = 0; g < w.groups; ++g) {
      const float s = w.scales[n * w.groups + g];
      p.s[g * kPanel + c] = s;
      p.sz[g * kPanel + c] = s * (w.zeros ? w.zeros[n * w.groups + g] + offset : fixed);
    }
  }
}

/// Rows [r0, r0 + R) of the panel's 16 channels into y (count of them stored).
template <int R>
FX_WO_GEMM void rows_panel(const WeightOnlyView& w, const WeightOnlyActivations& a, const Panel& p, int64_t r0,
                           int64_t n0, int64_t count, const float* bias, float* y, int64_t ldy) {
  const int64_t xstride = a.padded_blocks * kBlock, blocks = a.blocks;
  const int shift = w.group_shift;
  const int8_t* xq[R];
  const float* d[R];
  __m512 f[R];
  for (int r = 0; r < R; ++r) {
    xq[r] = a.q.data() + (r0 + r) * xstride;
    d[r] = a.d.data() + (r0 + r) * a.padded_blocks;
    f[r] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < blocks; ++b) {
    const uint32_t* wb = p.w.data() + b * 8 * kPanel;
    __m512i acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int q = 0; q < 8; ++q) {
      const __m512i wv = _mm512_loadu_si512(wb + q * kPanel);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        int32_t x4;
        std::memcpy(&x4, xq[r] + b * kBlock + 4 * q, 4);
        acc[r] = _mm512_dpbusd_epi32(acc[r], wv, _mm512_set1_epi32(x4));
      }
    }
    const __m512 sv = _mm512_loadu_ps(p.s.data() + (b >> shift) * kPanel);
    for (int r = 0; r < R; ++r)
      f[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r]), _mm512_mul_ps(_mm512_set1_ps(d[r][b]), sv), f[r]);
  }
  for (int64_t g = 0; g < w.groups; ++g) {
    const __m512 szv = _mm512_loadu_ps(p.sz.data() + g * kPanel);
    for (int r = 0; r < R; ++r) f[r] = _mm512_fnmadd_ps(szv, _mm512_set1_ps(a.xsum[(r0 + r) * w.groups + g]), f[r]);
  }
  const __mmask16 m = count >= kPanel ? __mmask16(0xFFFF) : __mmask16((1u << count) - 1);
  const __m512 bv = bias ? _mm512_maskz_loadu_ps(m, bias + n0) : _mm512_setzero_ps();
  for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + (r0 + r) * ldy + n0, m, _mm512_add_ps(f[r], bv));
}

/// rows_panel for two panels at once (32 channels): each activation
/// broadcast serves two weight vectors.
template <int R>
FX_WO_GEMM void rows_two_panels(const WeightOnlyView& w, const WeightOnlyActivations& a, const Panel& p0,
                                const Panel& p1, int64_t r0, int64_t n0, int64_t count, const float* bias, float* y,
                                int64_t ldy) {
  const int64_t xstride = a.padded_blocks * kBlock, blocks = a.blocks;
  const int shift = w.group_shift;
  const int8_t* xq[R];
  const float* d[R];
  __m512 f0[R], f1[R];
  for (int r = 0; r < R; ++r) {
    xq[r] = a.q.data() + (r0 + r) * xstride;
    d[r] = a.d.data() + (r0 + r) * a.padded_blocks;
    f0[r] = f1[r] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < blocks; ++b) {
    const uint32_t* wb0 = p0.w.data() + b * 8 * kPanel;
    const uint32_t* wb1 = p1.w.data() + b * 8 * kPanel;
    __m512i acc0[R], acc1[R];
    for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int q = 0; q < 8; ++q) {
      const __m512i wv0 = _mm512_loadu_si512(wb0 + q * kPanel), wv1 = _mm512_loadu_si512(wb1 + q * kPanel);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        int32_t x4;
        std::memcpy(&x4, xq[r] + b * kBlock + 4 * q, 4);
        const __m512i xb = _mm512_set1_epi32(x4);
        acc0[r] = _mm512_dpbusd_epi32(acc0[r], wv0, xb);
        acc1[r] = _mm512_dpbusd_epi32(acc1[r], wv1, xb);
      }
    }
    const __m512 sv0 = _mm512_loadu_ps(p0.s.data() + (b >> shift) * kPanel);
    const __m512 sv1 = _mm512_loadu_ps(p1.s.data() + (b >> shift) * kPanel);
    for (int r = 0; r < R; ++r) {
      const __m512 ds = _mm512_set1_ps(d[r][b]);
      f0[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc0[r]), _mm512_mul_ps(ds, sv0), f0[r]);
      f1[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc1[r]), _mm512_mul_ps(ds, sv1), f1[r]);
    }
  }
  for (int64_t g = 0; g < w.groups; ++g) {
    const __m512 sz0 = _mm512_loadu_ps(p0.sz.data() + g * kPanel), sz1 = _mm512_loadu_ps(p1.sz.data() + g * kPanel);
    for (int r = 0; r < R; ++r) {
      const __m512 xs = _mm512_set1_ps(a.xsum[(r0 + r) * w.groups + g]);
      f0[r] = _mm512_fnmadd_ps(sz0, xs, f0[r]);
      f1[r] = _mm512_fnmadd_ps(sz1, xs, f1[r]);
    }
  }
  const int64_t c1 = count - kPanel;  // the second panel's channels (1..16)
  const __mmask16 m1 = c1 >= kPanel ? __mmask16(0xFFFF) : __mmask16((1u << c1) - 1);
  const __m512 b0 = bias ? _mm512_loadu_ps(bias + n0) : _mm512_setzero_ps();
  const __m512 b1 = bias ? _mm512_maskz_loadu_ps(m1, bias + n0 + kPanel) : _mm512_setzero_ps();
  for (int r = 0; r < R; ++r) {
    _mm512_storeu_ps(y + (r0 + r) * ldy + n0, _mm512_add_ps(f0[r], b0));
    _mm512_mask_storeu_ps(y + (r0 + r) * ldy + n0 + kPanel, m1, _mm512_add_ps(f1[r], b1));
  }
}

#pragma GCC diagnostic pop

}  // namespace
}  // namespace weight_only_panels

namespace wog = weight_only_panels;

void weight_only_gemm(const WeightOnlyView& w, const WeightOnlyActivations& a, int64_t n0, int64_t n1,
                      const float* bias, float* y, int64_t ldy) {
  thread_local wog::Panel panel, second;
  int64_t p0 = n0;
  // Two panels (32 channels) a pass while more than 16 are left.
  for (; n1 - p0 > wog::kPanel; p0 += 2 * wog::kPanel) {
    const int64_t count = std::min(2 * wog::kPanel, n1 - p0);
    wog::pack(w, a.blocks, p0, wog::kPanel, panel);
    wog::pack(w, a.blocks, p0 + wog::kPanel, count - wog::kPanel, second);
    int64_t r0 = 0;
    for (; r0 + wog::kTwoPanelRows <= a.rows; r0 += wog::kTwoPanelRows)
      wog::rows_two_panels<wog::kTwoPanelRows>(w, a, panel, second, r0, p0, count, bias, y, ldy);
    switch (a.rows - r0) {
      case 3: wog::rows_two_panels<3>(w, a, panel, second, r0, p0, count, bias, y, ldy); break;
      case 2: wog::rows_two_panels<2>(w, a, panel, second, r0, p0, count, bias, y, ldy); break;
      case 1: wog::rows_two_panels<1>(w, a, panel, second, r0, p0, count, bias, y, ldy); break;
      default: break;
    }
    wog::panel_count.fetch_add(2, std::memory_order_relaxed);
  }
  for (; p0 < n1; p0 += wog::kPanel) {
    const int64_t count = std::min(wog::kPanel, n1 - p0);
    wog::pack(w, a.blocks, p0, count, panel);
    int64_t r0 = 0;
    for (; r0 + wog::kRows <= a.rows; r0 += wog::kRows)
      wog::rows_panel<wog::kRows>(w, a, panel, r0, p0, count, bias, y, ldy);
    switch (a.rows - r0) {
      case 5: wog::rows_panel<5>(w, a, panel, r0, p0, count, bias, y, ldy); break;
      case 4: wog::rows_panel<4>(w, a, panel, r0, p0, count, bias, y, ldy); break;
      case 3: wog::rows_panel<3>(w, a, panel, r0, p0, count, bias, y, ldy); break;
      case 2: wog::rows_panel<2>(w, a, panel, r0, p0, count, bias, y, ldy); break;
      case 1: wog::rows_panel<1>(w, a, panel, r0, p0, count, bias, y, ldy); break;
      default: break;
    }
    wog::panel_count.fetch_add(1, std::memory_order_relaxed);
  }
}

size_t weight_only_gemm_panels() { return wog::panel_count.load(std::memory_order_relaxed); }

}  // namespace fx::decoders::detail
