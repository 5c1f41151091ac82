// The weight-only kernels (see weight_only_kernels.h): activations quantized
// per block of 32, then, per weight row, integer dot products with a tile of
// up to 4 activation rows, each weight byte loaded and unpacked once per tile.
//
//   AVX-512 VNNI: vpdpbusd multiplies unsigned bytes by signed ones. The
//     weights are the unsigned side: int4 nibbles as they are (0..15), int8
//     with its sign bit flipped (w + 128); the activations, in [-127, 127],
//     the signed side. The +128 (and int4's zero point 8) come back out as
//     scale · zero · Σ d·q per group, one short vector dot product per output.
//     64 bytes of int4 (4 blocks of 32) unpack with a shift and two masks: the
//     low nibbles are the first 16 weights of each block, the high ones the
//     last 16, and the activations are laid out in that order when quantized.
//     Both go 16 blocks at a time (tile_vnni): the blocks' int32 sums fold
//     into one vector, the symmetric kernels' offset (128, int4's 8) comes off
//     in int32, and one cvt and one fma per 16 blocks apply steps and scales.
//   AVX2: ggml's mul_sum_i8_pairs: vpmaddubsw on |w| and x with w's sign
//     (int8), or on the nibbles and x (int4), then vpmaddwd by ones.
//   Scalar: the same sums in int32.
// Each block's int32 sum becomes a float times its activation step (and the
// group's scale) in a vector accumulator, reduced once per output.
#include "decoders/weight_only_kernels.h"

#include <ATen/Parallel.h>

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace fx::decoders::detail {
// A named namespace: the layer's files are compiled in unity batches, which
// share one anonymous namespace.
namespace weight_only_kernels {
namespace {  // internal linkage, so that the helpers inline (-fPIC would call them through the PLT)

constexpr int64_t kBlock = 32;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// VNNI (tile_vnni): the unit's block (0..15) whose folded sum lands on lane l,
/// int4: lane 4·(i % 4) + i / 4; int8: lane 4·(2·(i / 8) + i % 2) + (i % 8) / 2.
int64_t unit_block(bool int4, int64_t l) {
  const int64_t m = l / 4, j = l % 4;
  return int4 ? 4 * j + m : (m / 2) * 8 + 2 * j + m % 2;
}

/// Block b's lane: its unit's 16 lanes, at the lane whose unit_block is b % 16.
int64_t unit_lane(bool int4, int64_t b) {
  const int64_t i = b % 16;
  return (b / 16) * 16 + (int4 ? 4 * (i % 4) + i / 4 : 4 * (2 * (i / 8) + i % 2) + (i % 8) / 2);
}

/// The zero point the kernel's integer view implies for group g: the stored
/// one (or 8, symmetric int4's) plus the kernel's offset (128: VNNI's int8).
struct ZeroTerm {
  float fixed = 0;   // used when zeros is null
  float offset = 0;  // added to zeros[g]
  bool none = true;  // every zero point 0: nothing to subtract
};

ZeroTerm zero_term_of(WeightOnlyIsa isa, const WeightOnlyView& w) {
  ZeroTerm z;
  z.offset = isa == WeightOnlyIsa::Avx512Vnni && w.bits == 8 ? 128.f : 0.f;
  z.fixed = (w.bits == 4 ? 8.f : 0.f) + z.offset;
  z.none = !w.zeros && z.fixed == 0.f;
  return z;
}

/// Σ_g s_g · zero_g · xsum_g over a row's groups.
float zero_sum_scalar(const float* s, const float* zeros, const ZeroTerm& z, const float* xsum, int64_t groups) {
  float t = 0;
  for (int64_t g = 0; g < groups; ++g) t += s[g] * (zeros ? zeros[g] + z.offset : z.fixed) * xsum[g];
  return t;
}

/// The output from a row's accumulated Σ s · d · raw · x and its zero term.
inline void store(int64_t n, float sum, float zero_sum, const float* bias, float* y) {
  const float v = sum - zero_sum;
  *y = bias ? v + bias[n] : v;
}

// ---- scalar ----------------------------------------------------------------

int32_t block_dot_scalar(int bits, const uint8_t* row, int64_t b, int64_t k, const int8_t* xq) {
  int32_t sum = 0;
  if (bits == 8) {
    const int8_t* wb = reinterpret_cast<const int8_t*>(row) + b * kBlock;
    const int64_t len = std::min(kBlock, k - b * kBlock);
    for (int64_t t = 0; t < len; ++t) sum += int32_t{wb[t]} * xq[b * kBlock + t];
  } else {
    const uint8_t* wb = row + b * (kBlock / 2);
    for (int64_t t = 0; t < kBlock / 2; ++t)
      sum += int32_t{wb[t] & 15} * xq[b * kBlock + t] + int32_t{wb[t] >> 4} * xq[b * kBlock + t + 16];
  }
  return sum;
}

void tile_scalar(const WeightOnlyView& w, const WeightOnlyActivations& a, int64_t r0, int64_t tile, int64_t n0,
                 int64_t n1, const float* bias, float* y, int64_t ldy) {
  const ZeroTerm z = zero_term_of(WeightOnlyIsa::Scalar, w);
  const int shift = w.group_shift;
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* row = w.data + n * w.row_bytes;
    const float* s = w.scales + n * w.groups;
    const float* zeros = w.zeros ? w.zeros + n * w.groups : nullptr;
    for (int64_t r = 0; r < tile; ++r) {
      const int8_t* xq = a.q.data() + (r0 + r) * a.padded_blocks * kBlock;
      const float* d = a.d.data() + (r0 + r) * a.padded_blocks;
      float sum = 0;
      for (int64_t b = 0; b < a.blocks; ++b)
        sum += s[b >> shift] * d[b] * static_cast<float>(block_dot_scalar(w.bits, row, b, w.k, xq));
      const float zs = z.none ? 0.f : zero_sum_scalar(s, zeros, z, a.xsum.data() + (r0 + r) * w.groups, w.groups);
      store(n, sum, zs, bias, y + r * ldy + n);
    }
  }
}

// ---- AVX2 ------------------------------------------------------------------

#define FX_WO_AVX2 __attribute__((target("avx2,fma")))

FX_WO_AVX2 inline float hsum_avx2(__m256 v) {
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}

FX_WO_AVX2 float zero_sum_avx2(const float* s, const float* zeros, const ZeroTerm& z, const float* xsum,
                               int64_t groups) {
  __m256 acc = _mm256_setzero_ps();
  const __m256 off = _mm256_set1_ps(z.offset), fixed = _mm256_set1_ps(z.fixed);
  int64_t g = 0;
  for (; g + 8 <= groups; g += 8) {
    const __m256 zv = zeros ? _mm256_add_ps(_mm256_loadu_ps(zeros + g), off) : fixed;
    acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_loadu_ps(s + g), zv), _mm256_loadu_ps(xsum + g), acc);
  }
  return hsum_avx2(acc) + zero_sum_scalar(s + g, zeros ? zeros + g : nullptr, z, xsum + g, groups - g);
}

/// A block of 32 weights as 32 bytes: int8 as stored (a short last block
/// zero-padded), int4 unpacked to 0..15 in K's order.
FX_WO_AVX2 inline __m256i load_block_avx2(int bits, const uint8_t* row, int64_t b, int64_t k) {
  if (bits == 4) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + b * (kBlock / 2)));
    const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(v), _mm_srli_epi16(v, 4), 1);
    return _mm256_and_si256(both, _mm256_set1_epi8(15));
  }
  if ((b + 1) * kBlock <= k) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + b * kBlock));
  alignas(32) uint8_t last[kBlock] = {};
  std::memcpy(last, row + b * kBlock, static_cast<size_t>(k - b * kBlock));
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(last));
}

template <int R>
FX_WO_AVX2 void tile_avx2(const WeightOnlyView& w, const WeightOnlyActivations& a, int64_t r0, int64_t n0, int64_t n1,
                          const float* bias, float* y, int64_t ldy) {
  const ZeroTerm z = zero_term_of(WeightOnlyIsa::Avx2, w);
  const int64_t xstride = a.padded_blocks * kBlock, blocks = a.blocks;
  const int shift = w.group_shift;
  const int bits = w.bits;
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* row = w.data + n * w.row_bytes;
    const float* s = w.scales + n * w.groups;
    __m256 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      const __m256i wv = load_block_avx2(bits, row, b, w.k);
      // int8: |w| unsigned, x takes w's sign (x is never -128); int4: the nibbles are unsigned already.
      const __m256i uw = bits == 8 ? _mm256_abs_epi8(wv) : wv;
      const float sb = s[b >> shift];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const int64_t rr = r0 + r;
        __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q.data() + rr * xstride + b * kBlock));
        if (bits == 8) xv = _mm256_sign_epi8(xv, wv);
        const __m256i i32 = _mm256_madd_epi16(_mm256_maddubs_epi16(uw, xv), ones);
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i32), _mm256_set1_ps(sb * a.d[rr * a.padded_blocks + b]), acc[r]);
      }
    }
    const float* zeros = w.zeros ? w.zeros + n * w.groups : nullptr;
    for (int r = 0; r < R; ++r) {
      const float zs = z.none ? 0.f : zero_sum_avx2(s, zeros, z, a.xsum.data() + (r0 + r) * w.groups, w.groups);
      store(n, hsum_avx2(acc[r]), zs, bias, y + r * ldy + n);
    }
  }
}

// ---- AVX-512 VNNI ----------------------------------------------------------

#define FX_WO_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
// Weight bytes ahead of the chunk being read that are prefetched: one thread's
// stream from DRAM is bound by the misses in flight. Measured on the 32000 x
// 2048 GEMV (65 MB int8, 37 MB int4: past the 32 MB L3), one thread, process
// CPU time on a shared Zen 5: 1 KB ahead 17.5 GB/s (int8), 4 KB 22, 16 KB
// 28-36; int4 13.5 -> 27-30 GB/s once its scales are prefetched as far ahead.
constexpr int64_t kPrefetchBytes = 16384;
// GCC 12 warns that the unmasked AVX-512 intrinsics' _mm512_undefined_*()
// pass-through "may be used uninitialized" (its bug 105593, fixed in 13), or
// "is used uninitialized" inlined into _mm512_reduce_add_ps.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

FX_WO_VNNI float zero_sum_vnni(const float* s, const float* zeros, const ZeroTerm& z, const float* xsum,
                               int64_t groups) {
  __m512 acc = _mm512_setzero_ps();
  const __m512 off = _mm512_set1_ps(z.offset), fixed = _mm512_set1_ps(z.fixed);
  for (int64_t g = 0; g < groups; g += 16) {
    const __mmask16 m = groups - g >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (groups - g)) - 1);
    const __m512 zv = zeros ? _mm512_add_ps(_mm512_maskz_loadu_ps(m, zeros + g), off) : fixed;
    acc = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, s + g), zv), _mm512_maskz_loadu_ps(m, xsum + g), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

/// Lane 4·l + j: the sum of t_j's 128-bit lane l.
FX_WO_VNNI inline __m512i fold4(__m512i t0, __m512i t1, __m512i t2, __m512i t3) {
  const __m512i t01 = _mm512_add_epi32(_mm512_unpacklo_epi32(t0, t1), _mm512_unpackhi_epi32(t0, t1));
  const __m512i t23 = _mm512_add_epi32(_mm512_unpacklo_epi32(t2, t3), _mm512_unpackhi_epi32(t2, t3));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(t01, t23), _mm512_unpackhi_epi64(t01, t23));
}

/// By units of 16 blocks of 32 (512 bytes of int8, 8 chunks of 64; 256 of
/// int4, 4 chunks): the unit's chunks' vpdpbusd sums (4 lanes per int4 block,
/// 8 per int8 block) fold into one int32 lane per block (fold4, and for int8
/// the two halves of each block added), block i of the unit on lane
/// unit_lane(i); the symmetric kernels take the +128 (int8) or the zero point
/// 8 (int4) off in int32 (offset · Σq per block, quantize_row's `qz`), and one
/// cvt and one fma per unit and row apply the steps d (the activations'
/// `lanes`, in the same order) and the scales. Asymmetric zero points: the
/// per-group term as the other kernels.
template <int R, bool Int4, bool Sym>
FX_WO_VNNI void tile_vnni(const WeightOnlyView& w, const WeightOnlyActivations& a, int64_t r0, int64_t n0, int64_t n1,
                           const float* bias, float* y, int64_t ldy) {
  const ZeroTerm z = zero_term_of(WeightOnlyIsa::Avx512Vnni, w);
  const int shift = w.group_shift;
  alignas(64) int32_t index[16];
  for (int l = 0; l < 16; ++l) index[l] = shift <= 4 ? static_cast<int32_t>(unit_block(Int4, l) >> shift) : 0;
  const __m512i scale_index = _mm512_load_si512(index);
  const int64_t groups_per_unit = shift <= 4 ? 16 >> shift : 1;
  const int8_t* xq[R];
  const float* dl[R];
  const int32_t* qz[R];
  for (int r = 0; r < R; ++r) {
    xq[r] = a.q.data() + (r0 + r) * a.padded_blocks * kBlock;
    dl[r] = a.lanes.data() + (r0 + r) * a.padded_blocks;
    qz[r] = a.qz.data() + (r0 + r) * a.padded_blocks;
  }
  constexpr int64_t kUnitBytes = Int4 ? 256 : 512, kChunks = kUnitBytes / 64;
  const int64_t row_bytes = w.row_bytes, units = ceil_div(row_bytes, kUnitBytes), full_units = row_bytes / kUnitBytes;
  const int64_t scales_ahead = kPrefetchBytes / kUnitBytes * 16 * 4 >> (shift <= 4 ? shift : 4);
  const __m512i m4 = _mm512_set1_epi8(15);
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* row = w.data + n * row_bytes;
    const float* s = w.scales + n * w.groups;
    const float* zeros = w.zeros ? w.zeros + n * w.groups : nullptr;
    __m512 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t u = 0; u < units; ++u) {
      const uint8_t* p = row + u * kUnitBytes;
#pragma GCC unroll 8
      for (int j = 0; j < kChunks; ++j)
        _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchBytes + 64 * j), _MM_HINT_T0);
      const int64_t g0 = (u * 16) >> shift;
      if (w.group_blocks) _mm_prefetch(reinterpret_cast<const char*>(s + g0) + scales_ahead, _MM_HINT_T0);
      __m512i lo[kChunks], hi[Int4 ? kChunks : 1];
#pragma GCC unroll 8
      for (int j = 0; j < kChunks; ++j) {
        __m512i v;
        if (u < full_units) {
          v = _mm512_loadu_si512(p + 64 * j);
        } else {
          const int64_t left = std::clamp<int64_t>(row_bytes - u * kUnitBytes - 64 * j, 0, 64);
          v = _mm512_maskz_loadu_epi8(left == 64 ? ~__mmask64(0) : (__mmask64(1) << left) - 1, p + 64 * j);
        }
        if (Int4) {
          lo[j] = _mm512_and_si512(v, m4);
          hi[Int4 ? j : 0] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        } else {
          lo[j] = _mm512_xor_si512(v, _mm512_set1_epi8(char(0x80)));  // w + 128
        }
      }
      const int64_t ng = std::min(groups_per_unit, w.groups - g0);
      const __m512 sv = _mm512_permutexvar_ps(scale_index, _mm512_maskz_loadu_ps(__mmask16((1u << ng) - 1), s + g0));
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const int8_t* x = xq[r] + u * 512;
        __m512i t[kChunks];
#pragma GCC unroll 8
        for (int j = 0; j < kChunks; ++j)
          t[j] = Int4 ? _mm512_dpbusd_epi32(
                            _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo[j], _mm512_loadu_si512(x + 128 * j)),
                            hi[Int4 ? j : 0], _mm512_loadu_si512(x + 128 * j + 64))
                      : _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo[j], _mm512_loadu_si512(x + 64 * j));
        __m512i sum = fold4(t[0], t[1], t[2], t[3]);
        if (!Int4) {
          // int8: 128-bit lane l of chunk j holds half l % 2 of block 2j + l / 2; add the halves.
          const __m512i b = fold4(t[Int4 ? 0 : 4], t[Int4 ? 1 : 5], t[Int4 ? 2 : 6], t[Int4 ? 3 : 7]);
          sum = _mm512_add_epi32(_mm512_shuffle_i32x4(sum, b, 0x88), _mm512_shuffle_i32x4(sum, b, 0xDD));
        }
        if (Sym) sum = _mm512_sub_epi32(sum, _mm512_loadu_si512(qz[r] + u * 16));
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(_mm512_loadu_ps(dl[r] + u * 16), sv), acc[r]);
      }
    }
    for (int r = 0; r < R; ++r) {
      const float zs = Sym ? 0.f : zero_sum_vnni(s, zeros, z, a.xsum.data() + (r0 + r) * w.groups, w.groups);
      store(n, _mm512_reduce_add_ps(acc[r]), zs, bias, y + r * ldy + n);
    }
  }
}

#pragma GCC diagnostic pop

// ---- activations -----------------------------------------------------------

/// Where value t (0..31) of block b goes in a row of quantized activations.
int64_t position(WeightOnlyIsa isa, int bits, int64_t b, int64_t t) {
  if (isa != WeightOnlyIsa::Avx512Vnni || bits != 4) return b * kBlock + t;
  // Per 4 blocks: the first 16 values of each block, then the last 16.
  return (b / 4) * 128 + (t < 16 ? 0 : 64) + (b % 4) * 16 + t % 16;
}

void quantize_row(WeightOnlyIsa isa, const WeightOnlyView& w, const float* x, int64_t k, int64_t blocks,
                  int8_t* q, float* d, float* lanes, int32_t* qz, float* xsum) {
  // VNNI (qz set): the step at the block's unit_lane, and offset · Σ q (the
  // kernel's +128 for int8, symmetric int4's zero point 8) for the symmetric kernels.
  const int32_t offset = w.bits == 4 ? 8 : 128;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t len = std::min(kBlock, k - b * kBlock);
    const float* xb = x + b * kBlock;
    float amax = 0;
    bool finite = true;
    for (int64_t t = 0; t < len; ++t) {
      amax = std::max(amax, std::fabs(xb[t]));
      finite = finite && std::isfinite(xb[t]);
    }
    // A non-finite activation makes its block's step NaN: the outputs are NaN, as a float product's.
    const float step = finite ? amax / 127.f : std::nanf("");
    const float inv = finite && amax > 0 ? 127.f / amax : 0.f;
    int32_t qsum = 0;
    for (int64_t t = 0; t < len; ++t) {
      // Rounded to nearest, ties to even, by the float adder (|x · inv| <= 127): std::nearbyint is a libm call.
      const int32_t v = static_cast<int32_t>((xb[t] * inv + 12582912.f) - 12582912.f);
      const int32_t qv = std::clamp(v, -127, 127);
      q[position(isa, w.bits, b, t)] = static_cast<int8_t>(qv);
      qsum += qv;
    }
    d[b] = step;
    if (qz) {
      lanes[unit_lane(w.bits == 4, b)] = step;
      qz[unit_lane(w.bits == 4, b)] = offset * qsum;
    }
    xsum[b >> w.group_shift] += step * static_cast<float>(qsum);
  }
}

#define FX_WO_QUANT __attribute__((target("avx512f,avx512bw,avx512vl")))
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

/// quantize_row for K's order without VNNI's lanes (the AVX2 and scalar
/// kernels', and the prompt GEMM's layout), 32 values a step: the same
/// values to the bit (round to nearest even by cvtps_epi32 under the default
/// rounding mode, as the scalar path's float-adder trick), where the scalar
/// loop cost a prompt's linear layer a tenth of its time.
FX_WO_QUANT void quantize_row_avx512(WeightOnlyIsa isa, const WeightOnlyView& w, const float* x, int64_t k,
                                     int64_t blocks, int8_t* q, float* d, float* lanes, int32_t* qz, float* xsum) {
  const int32_t offset = w.bits == 4 ? 8 : 128;  // as quantize_row: the VNNI kernels' +128 or zero point 8
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t len = std::min(kBlock, k - b * kBlock);
    const __mmask16 m0 = len >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << len) - 1);
    const __mmask16 m1 = len >= 32 ? __mmask16(0xFFFF) : len > 16 ? __mmask16((1u << (len - 16)) - 1) : __mmask16(0);
    const __m512 v0 = _mm512_maskz_loadu_ps(m0, x + b * kBlock), v1 = _mm512_maskz_loadu_ps(m1, x + b * kBlock + 16);
    // Any NaN or infinity makes 0 * v NaN.
    const float nonfinite = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_mul_ps(v0, _mm512_setzero_ps()),
                                                               _mm512_mul_ps(v1, _mm512_setzero_ps())));
    const bool finite = nonfinite == 0.f;
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float step = finite ? amax / 127.f : std::nanf("");
    const float inv = finite && amax > 0 ? 127.f / amax : 0.f;
    const __m512 iv = _mm512_set1_ps(inv);
    const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
    const __m512i q0 = _mm512_min_epi32(_mm512_max_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(v0, iv)), lo), hi);
    const __m512i q1 = _mm512_min_epi32(_mm512_max_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(v1, iv)), lo), hi);
    // Each half of the block where position() puts it (VNNI int4: per 4 blocks, the first halves, then the second).
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + position(isa, w.bits, b, 0)), _mm512_cvtsepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + position(isa, w.bits, b, 16)), _mm512_cvtsepi32_epi8(q1));
    const int32_t qsum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
    d[b] = step;
    if (qz) {
      lanes[unit_lane(w.bits == 4, b)] = step;
      qz[unit_lane(w.bits == 4, b)] = offset * qsum;
    }
    // Rounded apart, as the scalar loop (built without FMA) rounds it: no contraction into one fma.
    float term = step * static_cast<float>(qsum);
    asm("" : "+v"(term));
    xsum[b >> w.group_shift] += term;
  }
}

#pragma GCC diagnostic pop

using TileFn = void (*)(const WeightOnlyView&, const WeightOnlyActivations&, int64_t, int64_t, int64_t,
                        const float*, float*, int64_t);

template <int R>
TileFn tile_of(WeightOnlyIsa isa, int bits, bool symmetric) {
  if (isa == WeightOnlyIsa::Avx512Vnni)
    return bits == 4 ? (symmetric ? &tile_vnni<R, true, true> : &tile_vnni<R, true, false>)
                     : (symmetric ? &tile_vnni<R, false, true> : &tile_vnni<R, false, false>);
  return &tile_avx2<R>;
}

}  // namespace
}  // namespace weight_only_kernels

namespace wok = weight_only_kernels;

const char* weight_only_isa_name(WeightOnlyIsa isa) {
  static const char* const names[] = {"scalar", "avx2", "avx512-vnni"};  // WeightOnlyIsa's order
  return names[static_cast<int>(isa)];
}

bool weight_only_isa_supported(WeightOnlyIsa isa) {
  __builtin_cpu_init();
  switch (isa) {
    case WeightOnlyIsa::Avx512Vnni:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
    case WeightOnlyIsa::Avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case WeightOnlyIsa::Scalar: break;
  }
  return true;
}

WeightOnlyIsa weight_only_best_isa() {
  static const WeightOnlyIsa best = weight_only_isa_supported(WeightOnlyIsa::Avx512Vnni) ? WeightOnlyIsa::Avx512Vnni
                                     : weight_only_isa_supported(WeightOnlyIsa::Avx2)     ? WeightOnlyIsa::Avx2
                                                                                          : WeightOnlyIsa::Scalar;
  return best;
}

WeightOnlyActivations quantize_activations(WeightOnlyIsa isa, const WeightOnlyView& w, const float* x, int64_t rows,
                                           int64_t k) {
  WeightOnlyActivations a;
  a.rows = rows;
  a.k = k;
  a.blocks = wok::ceil_div(k, wok::kBlock);
  const bool vnni = isa == WeightOnlyIsa::Avx512Vnni;
  a.padded_blocks = wok::ceil_div(a.blocks, vnni ? 16 : 4) * (vnni ? 16 : 4);
  a.q.assign(static_cast<size_t>(rows * a.padded_blocks * wok::kBlock), 0);
  a.d.assign(static_cast<size_t>(rows * a.padded_blocks), 0.f);
  a.xsum.assign(static_cast<size_t>(rows * w.groups), 0.f);
  if (vnni) a.lanes.assign(static_cast<size_t>(rows * a.padded_blocks), 0.f);
  if (vnni) a.qz.assign(static_cast<size_t>(rows * a.padded_blocks), 0);
  // Rows of at least 16K values per task.
  // On an AVX-512 CPU, the AVX2 layout (its kernels' and the prompt GEMM's) and the VNNI kernels' own:
  // the vector loop, the same values (the scalar kernel keeps the scalar loop).
  static const bool avx512 = weight_only_isa_supported(WeightOnlyIsa::Avx512Vnni);
  const bool fast = (isa == WeightOnlyIsa::Avx2 || vnni) && avx512;
  at::parallel_for(0, rows, std::max<int64_t>(1, 16384 / k), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      if (fast)
        wok::quantize_row_avx512(isa, w, x + r * k, k, a.blocks, a.q.data() + r * a.padded_blocks * wok::kBlock,
                                 a.d.data() + r * a.padded_blocks,
                                 vnni ? a.lanes.data() + r * a.padded_blocks : nullptr,
                                 vnni ? a.qz.data() + r * a.padded_blocks : nullptr, a.xsum.data() + r * w.groups);
      else
        wok::quantize_row(isa, w, x + r * k, k, a.blocks, a.q.data() + r * a.padded_blocks * wok::kBlock,
                   a.d.data() + r * a.padded_blocks,
                   vnni ? a.lanes.data() + r * a.padded_blocks : nullptr,
                   vnni ? a.qz.data() + r * a.padded_blocks : nullptr,
                   a.xsum.data() + r * w.groups);
  });
  return a;
}

void weight_only_tile(WeightOnlyIsa isa, const WeightOnlyView& w, const WeightOnlyActivations& a, int64_t r0,
                      int64_t tile, int64_t n0, int64_t n1, const float* bias, float* y, int64_t ldy) {
  if (isa == WeightOnlyIsa::Scalar) return wok::tile_scalar(w, a, r0, tile, n0, n1, bias, y, ldy);
  wok::TileFn fn = tile == 4 ? wok::tile_of<4>(isa, w.bits, !w.zeros)
              : tile == 3 ? wok::tile_of<3>(isa, w.bits, !w.zeros)
              : tile == 2 ? wok::tile_of<2>(isa, w.bits, !w.zeros)
                          : wok::tile_of<1>(isa, w.bits, !w.zeros);
  fn(w, a, r0, n0, n1, bias, y, ldy);
}

}  // namespace fx::decoders::detail
