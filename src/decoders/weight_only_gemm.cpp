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

/// dst[q][c] = dword q of raw[c] (16 channels' rows of 8 dwords): an 8 x 8
/// transpose in each 256-bit half of 8 vectors (channel j in the low half,
/// j + 8 in the high), by unpacks of dwords, then of qwords, then 128-bit
/// lanes paired across vectors. 48 shuffles where 8 gathers of 16 dwords
/// each stood (the pack took a quarter of a 128-row GEMM with them).
FX_WO_GEMM void transpose_16x8(const uint8_t (*raw)[kBlock], uint32_t* dst) {
  __m512i r[8], t[8], u[8];
  for (int j = 0; j < 8; ++j)
    r[j] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_load_si256(reinterpret_cast<const __m256i*>(raw[j]))),
                              _mm256_load_si256(reinterpret_cast<const __m256i*>(raw[j + 8])), 1);
  for (int j = 0; j < 8; j += 2) {
    t[j] = _mm512_unpacklo_epi32(r[j], r[j + 1]);      // per lane: j.d0 j+1.d0 j.d1 j+1.d1
    t[j + 1] = _mm512_unpackhi_epi32(r[j], r[j + 1]);  // j.d2 j+1.d2 j.d3 j+1.d3
  }
  for (int j = 0; j < 8; j += 4) {
    u[j] = _mm512_unpacklo_epi64(t[j], t[j + 2]);          // per lane: dword 0 (lane 1: 4) of rows j .. j+3
    u[j + 1] = _mm512_unpackhi_epi64(t[j], t[j + 2]);      // dword 1 (5)
    u[j + 2] = _mm512_unpacklo_epi64(t[j + 1], t[j + 3]);  // dword 2 (6)
    u[j + 3] = _mm512_unpackhi_epi64(t[j + 1], t[j + 3]);  // dword 3 (7)
  }
  // u[q] (rows 0-3) and u[4 + q] (rows 4-7): lanes 0 / 2 hold dword q of channels (0-3 | 8-11) and
  // (4-7 | 12-15), lanes 1 / 3 dword q + 4. Output q: [u[q].0, u[4+q].0, u[q].2, u[4+q].2].
  for (int q = 0; q < 4; ++q) {
    const __m512i even = _mm512_shuffle_i32x4(u[q], u[4 + q], _MM_SHUFFLE(2, 0, 2, 0));  // u.0 u.2 v.0 v.2
    const __m512i odd = _mm512_shuffle_i32x4(u[q], u[4 + q], _MM_SHUFFLE(3, 1, 3, 1));   // u.1 u.3 v.1 v.3
    _mm512_storeu_si512(dst + q * kPanel, _mm512_shuffle_i32x4(even, even, _MM_SHUFFLE(3, 1, 2, 0)));
    _mm512_storeu_si512(dst + (q + 4) * kPanel, _mm512_shuffle_i32x4(odd, odd, _MM_SHUFFLE(3, 1, 2, 0)));
  }
}

/// Packs channels [n0, n0 + count) (count <= 16; the rest zero): per block,
/// each channel's 32 raw bytes unpacked in a 16 x 32 scratch (int4: the low
/// nibbles are the block's first 16 weights, the high ones the last 16), then
/// transposed by dwords (transpose_16x8): quad q's vector is dword q of every
/// channel's row.
FX_WO_GEMM void pack(const WeightOnlyView& w, int64_t blocks, int64_t n0, int64_t count, Panel& p) {
  p.w.resize(static_cast<size_t>(blocks * 8 * kPanel));
  p.s.assign(static_cast<size_t>(w.groups * kPanel), 0.f);
  p.sz.assign(static_cast<size_t>(w.groups * kPanel), 0.f);
  const float offset = w.bits == 8 ? 128.f : 0.f, fixed = (w.bits == 4 ? 8.f : 0.f) + offset;
  alignas(64) uint8_t raw[kPanel][kBlock] = {};
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
    transpose_16x8(raw, p.w.data() + b * 8 * kPanel);
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

/// Rows [r0, r0 + R) against P panels (16 · P channels from n0, `count` of
/// them stored; P = 2: each activation broadcast serves two weight vectors).
template <int P, int R>
FX_WO_GEMM void rows_panels(const WeightOnlyView& w, const WeightOnlyActivations& a, const Panel* const* panels,
                            int64_t r0, int64_t n0, int64_t count, const float* bias, float* y, int64_t ldy) {
  const int64_t xstride = a.padded_blocks * kBlock, blocks = a.blocks;
  const int shift = w.group_shift;
  const int8_t* xq[R];
  const float* d[R];
  const uint32_t* wp[P];
  const float *sp[P], *szp[P];
  for (int i = 0; i < P; ++i) {
    wp[i] = panels[i]->w.data();
    sp[i] = panels[i]->s.data();
    szp[i] = panels[i]->sz.data();
  }
  __m512 f[P][R];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    xq[r] = a.q.data() + (r0 + r) * xstride;
    d[r] = a.d.data() + (r0 + r) * a.padded_blocks;
#pragma GCC unroll 2
    for (int i = 0; i < P; ++i) f[i][r] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < blocks; ++b) {
    __m512i acc[P][R];
#pragma GCC unroll 2
    for (int i = 0; i < P; ++i)
#pragma GCC unroll 6
      for (int r = 0; r < R; ++r) acc[i][r] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int q = 0; q < 8; ++q) {
      __m512i wv[P];
#pragma GCC unroll 2
      for (int i = 0; i < P; ++i) wv[i] = _mm512_loadu_si512(wp[i] + (b * 8 + q) * kPanel);
#pragma GCC unroll 6
      for (int r = 0; r < R; ++r) {
        int32_t x4;
        std::memcpy(&x4, xq[r] + b * kBlock + 4 * q, 4);
        const __m512i xb = _mm512_set1_epi32(x4);
#pragma GCC unroll 2
        for (int i = 0; i < P; ++i) acc[i][r] = _mm512_dpbusd_epi32(acc[i][r], wv[i], xb);
      }
    }
    // Every loop over rows and panels unrolled: the accumulators f stay in registers (GCC kept them
    // on the stack when these loops stayed loops).
    __m512 sv[P];
#pragma GCC unroll 2
    for (int i = 0; i < P; ++i) sv[i] = _mm512_loadu_ps(sp[i] + (b >> shift) * kPanel);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m512 ds = _mm512_set1_ps(d[r][b]);
#pragma GCC unroll 2
      for (int i = 0; i < P; ++i)
        f[i][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[i][r]), _mm512_mul_ps(ds, sv[i]), f[i][r]);
    }
  }
  for (int64_t g = 0; g < w.groups; ++g) {
    __m512 sz[P];
#pragma GCC unroll 2
    for (int i = 0; i < P; ++i) sz[i] = _mm512_loadu_ps(szp[i] + g * kPanel);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m512 xs = _mm512_set1_ps(a.xsum[(r0 + r) * w.groups + g]);
#pragma GCC unroll 2
      for (int i = 0; i < P; ++i) f[i][r] = _mm512_fnmadd_ps(sz[i], xs, f[i][r]);
    }
  }
#pragma GCC unroll 2
  for (int i = 0; i < P; ++i) {
    const int64_t c = std::min(kPanel, count - i * kPanel);  // this panel's channels (1..16)
    const __mmask16 m = c >= kPanel ? __mmask16(0xFFFF) : __mmask16((1u << c) - 1);
    const int64_t n = n0 + i * kPanel;
    const __m512 bv = bias ? _mm512_maskz_loadu_ps(m, bias + n) : _mm512_setzero_ps();
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + (r0 + r) * ldy + n, m, _mm512_add_ps(f[i][r], bv));
  }
}

/// Rows [r0, a.rows) of `a` against P packed panels: R rows a pass, then
/// the fewer than R left in one pass of their number.
template <int P, int R>
void all_rows(const WeightOnlyView& w, const WeightOnlyActivations& a, const Panel* const* panels, int64_t r0,
              int64_t n0, int64_t count, const float* bias, float* y, int64_t ldy) {
  for (; r0 + R <= a.rows; r0 += R) rows_panels<P, R>(w, a, panels, r0, n0, count, bias, y, ldy);
  if constexpr (R > 1) {
    if (a.rows > r0) all_rows<P, R - 1>(w, a, panels, r0, n0, count, bias, y, ldy);
  }
}

#pragma GCC diagnostic pop

}  // namespace
}  // namespace weight_only_panels

namespace wog = weight_only_panels;

void weight_only_gemm(const WeightOnlyView& w, const WeightOnlyActivations& a, int64_t n0, int64_t n1,
                      const float* bias, float* y, int64_t ldy) {
  thread_local wog::Panel first, second;
  const wog::Panel* panels[2] = {&first, &second};
  for (int64_t p0 = n0; p0 < n1;) {
    const int64_t count = std::min(2 * wog::kPanel, n1 - p0);
    wog::pack(w, a.blocks, p0, std::min(wog::kPanel, count), first);
    if (count > wog::kPanel) {  // two panels (32 channels) a pass while more than 16 are left
      wog::pack(w, a.blocks, p0 + wog::kPanel, count - wog::kPanel, second);
      wog::all_rows<2, wog::kTwoPanelRows>(w, a, panels, 0, p0, count, bias, y, ldy);
      wog::panel_count.fetch_add(2, std::memory_order_relaxed);
    } else {
      wog::all_rows<1, wog::kRows>(w, a, panels, 0, p0, count, bias, y, ldy);
      wog::panel_count.fetch_add(1, std::memory_order_relaxed);
    }
    p0 += count;
  }
}

size_t weight_only_gemm_panels() { return wog::panel_count.load(std::memory_order_relaxed); }

}  // namespace fx::decoders::detail
