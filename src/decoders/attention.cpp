// fxcpp::decoder_attention (include/fx/decoders/passes.h): softmax(q k^T *
// scale, masked) v over a KV cache read in place, grouped-query heads
// without repeating the cache, cache positions the mask hides never read.
// Per query row: the visible positions' scores into a buffer, their maximum,
// exp and sum vectorised (vec_exp.h), then the value rows weighted in
// registers, 64 columns a pass. AVX-512 / AVX2 / plain loops, chosen once
// from the CPU's features. (A per-position online softmax paid a scalar exp,
// a branch and a load and store of the accumulator for every position.)
#include <fx/decoders/passes.h>

#include <fx/error.h>

#include "decoders/convention.h"
#include "decoders/vec_exp.h"

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace fx::decoders {

namespace {

using detail::exp_avx2;
using detail::exp_avx512;
using detail::lanes16;

#define FX_ATTN_AVX512 __attribute__((target("avx512f")))
#define FX_ATTN_AVX2 __attribute__((target("avx2,fma")))
// GCC 12's false positives on the unmasked AVX-512 intrinsics (see weight_only_kernels.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

FX_ATTN_AVX512 float sum_lanes(__m512 a) {  // not _mm512_reduce_add_ps: GCC 12 warns inside it (its bug 105593)
  __m512 t = _mm512_add_ps(a, _mm512_shuffle_f32x4(a, a, _MM_SHUFFLE(1, 0, 3, 2)));
  t = _mm512_add_ps(t, _mm512_shuffle_f32x4(t, t, _MM_SHUFFLE(2, 3, 0, 1)));
  t = _mm512_add_ps(t, _mm512_permute_ps(t, _MM_SHUFFLE(1, 0, 3, 2)));
  t = _mm512_add_ps(t, _mm512_permute_ps(t, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm512_cvtss_f32(t);
}

FX_ATTN_AVX2 float sum_lanes(__m256 s) {
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}

FX_ATTN_AVX512 float dot_avx512(const float* a, const float* b, int64_t n) {
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
  }
  if (i < n) {  // the rest, at most 31, by masked loads
    const __mmask16 m0 = lanes16(n - i), m1 = lanes16(n - i - 16);
    s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m0, a + i), _mm512_maskz_loadu_ps(m0, b + i), s0);
    s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m1, a + i + 16), _mm512_maskz_loadu_ps(m1, b + i + 16), s1);
  }
  return sum_lanes(_mm512_add_ps(s0, s1));
}

/// The two 256-bit halves of x added.
FX_ATTN_AVX512 __m256 half(__m512 x) {
  return _mm512_castps512_ps256(_mm512_add_ps(x, _mm512_shuffle_f32x4(x, x, _MM_SHUFFLE(1, 0, 3, 2))));
}

/// out[i] = sc · q · k[at[i]] for i < n (rows of d floats): four positions a pass, their four sums
/// folded together (halves added, then two rounds of hadd).
FX_ATTN_AVX512 void scores_avx512(const float* q, const float* k, const int32_t* at, int64_t n, int64_t d, float sc,
                                  float* out) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const float *r0 = k + at[i] * d, *r1 = k + at[i + 1] * d, *r2 = k + at[i + 2] * d, *r3 = k + at[i + 3] * d;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t c = 0; c < d; c += 16) {
      const __mmask16 m = lanes16(d - c);
      const __m512 qv = _mm512_maskz_loadu_ps(m, q + c);
      a0 = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(m, r0 + c), a0);
      a1 = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(m, r1 + c), a1);
      a2 = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(m, r2 + c), a2);
      a3 = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(m, r3 + c), a3);
    }
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(half(a0), half(a1)), _mm256_hadd_ps(half(a2), half(a3)));
    const __m128 sums = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    _mm_storeu_ps(out + i, _mm_mul_ps(sums, _mm_set1_ps(sc)));
  }
  for (; i < n; ++i) out[i] = dot_avx512(q, k + at[i] * d, d) * sc;
}

FX_ATTN_AVX512 float max_avx512(const float* x, int64_t n) {
  __m512 m = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(x + i));
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, m);
  float r = lanes[0];
  for (float l : lanes) r = std::max(r, l);
  for (; i < n; ++i) r = std::max(r, x[i]);
  return r;
}

/// x = exp(x - m) over n values; returns their sum.
FX_ATTN_AVX512 float exp_sum_avx512(float* x, int64_t n, float m) {
  const __m512 vm = _mm512_set1_ps(m);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = lanes16(n - i);
    const __m512 e = exp_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), vm));
    _mm512_mask_storeu_ps(x + i, k, e);
    sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(k, e));
  }
  return sum_lanes(sum);
}

/// out[0, d) = scale · Σ_i p[i] · v[at[i]] (rows of d floats): 64 columns a pass, in registers
/// (written out: GCC keeps an array of accumulators on the stack), even and odd rows in two chains
/// for the adder's latency.
FX_ATTN_AVX512 void weighted_sum_avx512(const float* p, const int32_t* at, int64_t n, const float* v, int64_t d,
                                        float scale, float* out) {
  for (int64_t d0 = 0; d0 < d; d0 += 64) {
    const __mmask16 m0 = lanes16(d - d0), m1 = lanes16(d - d0 - 16), m2 = lanes16(d - d0 - 32), m3 = lanes16(d - d0 - 48);
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    int64_t i = 0;
    for (; i + 2 <= n; i += 2) {
      const __m512 w0 = _mm512_set1_ps(p[i]), w1 = _mm512_set1_ps(p[i + 1]);
      const float* r0 = v + at[i] * d + d0;
      const float* r1 = v + at[i + 1] * d + d0;
      a0 = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(m0, r0), a0);
      a1 = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(m1, r0 + 16), a1);
      a2 = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(m2, r0 + 32), a2);
      a3 = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(m3, r0 + 48), a3);
      b0 = _mm512_fmadd_ps(w1, _mm512_maskz_loadu_ps(m0, r1), b0);
      b1 = _mm512_fmadd_ps(w1, _mm512_maskz_loadu_ps(m1, r1 + 16), b1);
      b2 = _mm512_fmadd_ps(w1, _mm512_maskz_loadu_ps(m2, r1 + 32), b2);
      b3 = _mm512_fmadd_ps(w1, _mm512_maskz_loadu_ps(m3, r1 + 48), b3);
    }
    if (i < n) {
      const __m512 w0 = _mm512_set1_ps(p[i]);
      const float* r0 = v + at[i] * d + d0;
      a0 = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(m0, r0), a0);
      a1 = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(m1, r0 + 16), a1);
      a2 = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(m2, r0 + 32), a2);
      a3 = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(m3, r0 + 48), a3);
    }
    const __m512 sc = _mm512_set1_ps(scale);
    _mm512_mask_storeu_ps(out + d0, m0, _mm512_mul_ps(_mm512_add_ps(a0, b0), sc));
    _mm512_mask_storeu_ps(out + d0 + 16, m1, _mm512_mul_ps(_mm512_add_ps(a1, b1), sc));
    _mm512_mask_storeu_ps(out + d0 + 32, m2, _mm512_mul_ps(_mm512_add_ps(a2, b2), sc));
    _mm512_mask_storeu_ps(out + d0 + 48, m3, _mm512_mul_ps(_mm512_add_ps(a3, b3), sc));
  }
}

FX_ATTN_AVX2 __m256 mask_of(int64_t left) {  // the first `left` (0..8) lanes
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(left)), lanes));
}

FX_ATTN_AVX2 float dot_avx2(const float* a, const float* b, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
  }
  for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
  float r = sum_lanes(_mm256_add_ps(s0, s1));
  for (; i < n; ++i) r += a[i] * b[i];
  return r;
}

FX_ATTN_AVX2 void scores_avx2(const float* q, const float* k, const int32_t* at, int64_t n, int64_t d, float sc,
                              float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = dot_avx2(q, k + at[i] * d, d) * sc;
}

FX_ATTN_AVX2 float max_avx2(const float* x, int64_t n) {
  __m256 m = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m);
  float r = lanes[0];
  for (float l : lanes) r = std::max(r, l);
  for (; i < n; ++i) r = std::max(r, x[i]);
  return r;
}

FX_ATTN_AVX2 float exp_sum_avx2(float* x, int64_t n, float m) {
  const __m256 vm = _mm256_set1_ps(m);
  __m256 sum = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 k = mask_of(std::min<int64_t>(8, n - i));
    const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_maskload_ps(x + i, _mm256_castps_si256(k)), vm));
    _mm256_maskstore_ps(x + i, _mm256_castps_si256(k), e);
    sum = _mm256_add_ps(sum, _mm256_and_ps(e, k));
  }
  return sum_lanes(sum);
}

FX_ATTN_AVX2 void weighted_sum_avx2(const float* p, const int32_t* at, int64_t n, const float* v, int64_t d,
                                    float scale, float* out) {
  for (int64_t d0 = 0; d0 < d; d0 += 32) {
    __m256i m[4];
    for (int k = 0; k < 4; ++k) m[k] = _mm256_castps_si256(mask_of(std::clamp<int64_t>(d - d0 - 8 * k, 0, 8)));
    __m256 a[4], b[4];
    for (int k = 0; k < 4; ++k) a[k] = b[k] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= n; i += 2) {
      const __m256 w0 = _mm256_set1_ps(p[i]), w1 = _mm256_set1_ps(p[i + 1]);
      const float* r0 = v + at[i] * d + d0;
      const float* r1 = v + at[i + 1] * d + d0;
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        a[k] = _mm256_fmadd_ps(w0, _mm256_maskload_ps(r0 + 8 * k, m[k]), a[k]);
        b[k] = _mm256_fmadd_ps(w1, _mm256_maskload_ps(r1 + 8 * k, m[k]), b[k]);
      }
    }
    if (i < n) {
      const __m256 w0 = _mm256_set1_ps(p[i]);
      const float* r0 = v + at[i] * d + d0;
      for (int k = 0; k < 4; ++k) a[k] = _mm256_fmadd_ps(w0, _mm256_maskload_ps(r0 + 8 * k, m[k]), a[k]);
    }
    for (int k = 0; k < 4; ++k)
      _mm256_maskstore_ps(out + d0 + 8 * k, m[k], _mm256_mul_ps(_mm256_add_ps(a[k], b[k]), _mm256_set1_ps(scale)));
  }
}

#pragma GCC diagnostic pop

float dot_plain(const float* a, const float* b, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

void scores_plain(const float* q, const float* k, const int32_t* at, int64_t n, int64_t d, float sc, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = dot_plain(q, k + at[i] * d, d) * sc;
}

float max_plain(const float* x, int64_t n) {
  float r = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) r = std::max(r, x[i]);
  return r;
}

float exp_sum_plain(float* x, int64_t n, float m) {
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i] = std::exp(x[i] - m);
  return sum;
}

void weighted_sum_plain(const float* p, const int32_t* at, int64_t n, const float* v, int64_t d, float scale,
                        float* out) {
  std::fill(out, out + d, 0.f);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < d; ++c) out[c] += p[i] * v[at[i] * d + c];
  for (int64_t c = 0; c < d; ++c) out[c] *= scale;
}

/// The four loops of one query row, for one instruction set.
struct Kernels {
  void (*scores)(const float*, const float*, const int32_t*, int64_t, int64_t, float, float*);
  float (*max)(const float*, int64_t);
  float (*exp_sum)(float*, int64_t, float);
  void (*weighted_sum)(const float*, const int32_t*, int64_t, const float*, int64_t, float, float*);
  const char* name;
};

const Kernels& kernels() {
  static const Kernels k = [] {
    switch (detail::decoder_isa()) {
      case detail::DecoderIsa::Avx512: return Kernels{scores_avx512, max_avx512, exp_sum_avx512, weighted_sum_avx512, "avx512"};
      case detail::DecoderIsa::Avx2: return Kernels{scores_avx2, max_avx2, exp_sum_avx2, weighted_sum_avx2, "avx2"};
      case detail::DecoderIsa::Plain: break;
    }
    return Kernels{scores_plain, max_plain, exp_sum_plain, weighted_sum_plain, "plain"};
  }();
  return k;
}

[[noreturn]] void fail(const std::string& what) { throw Error("decoder_attention: " + what); }

}  // namespace

std::string decoder_attention_kernel() { return kernels().name; }

at::Tensor decoder_attention(const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in,
                             const at::Tensor& mask_in, double scale) {
  if (q_in.dim() != 4 || k_in.dim() != 4 || v_in.dim() != 4)
    fail("q, k and v must be [B, heads, T, D], [B, kv_heads, S, D], not " + detail::described(q_in) + ", " + detail::described(k_in) +
         ", " + detail::described(v_in));
  const int64_t b = q_in.size(0), h = q_in.size(1), t = q_in.size(2), d = q_in.size(3);
  const int64_t kvh = k_in.size(1), s = k_in.size(2);
  if (k_in.sizes() != v_in.sizes() || k_in.size(0) != b || k_in.size(3) != d || kvh == 0 || h % kvh != 0)
    fail("k and v must be [" + std::to_string(b) + ", kv_heads dividing " + std::to_string(h) + ", S, " +
         std::to_string(d) + "], not " + detail::described(k_in) + ", " + detail::described(v_in));
  if (q_in.scalar_type() != at::kFloat || k_in.scalar_type() != at::kFloat || v_in.scalar_type() != at::kFloat)
    fail("q, k and v must be float32, not " + detail::described(q_in) + ", " + detail::described(k_in) + ", " + detail::described(v_in));
  if (mask_in.scalar_type() != at::kBool || mask_in.dim() != 2 || mask_in.size(0) != t || mask_in.size(1) != s)
    fail("the mask must be bool [" + std::to_string(t) + ", " + std::to_string(s) + "] (true: hidden), not " +
         detail::described(mask_in));
  const at::Tensor q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous(), mask = mask_in.contiguous();
  at::Tensor out = at::empty({b, h, t, d}, q.options());
  const float* qp = q.data_ptr<float>();
  const float* kp = k.data_ptr<float>();
  const float* vp = v.data_ptr<float>();
  const bool* mp = mask.data_ptr<bool>();
  float* op = out.data_ptr<float>();
  const int64_t group = h / kvh;
  const float sc = static_cast<float>(scale);
  const Kernels& kern = kernels();
  // One task a query row of one head: about S * D * 4 multiply-adds each.
  const int64_t rows = b * h * t;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, s * d));
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    // Per row: the visible positions, their scores, the maximum, exp and sum, then the weighted
    // sum of the value rows (softmax in two passes over a buffer of S scores).
    std::vector<float> scores(static_cast<size_t>(s));
    std::vector<int32_t> at(static_cast<size_t>(s));
    int64_t n = 0, listed_row = -1;  // `at` lists mask row listed_row's n visible positions
    for (int64_t r = begin; r < end; ++r) {
      const int64_t ti = r % t, hi = (r / t) % h, bi = r / (t * h);
      const int64_t kv = bi * kvh + hi / group;
      const float* qrow = qp + r * d;
      const float* kbase = kp + kv * s * d;
      const float* vbase = vp + kv * s * d;
      const bool* hidden = mp + ti * s;
      float* acc = op + r * d;
      if (ti != listed_row) {  // the heads of a row share its mask: one decoded token lists it once
        n = 0;
        for (int64_t j = 0; j < s; ++j)
          if (!hidden[j]) at[n++] = static_cast<int32_t>(j);
        listed_row = ti;
      }
      if (n == 0) {  // no visible position: NaN, as softmax over -inf gives
        std::fill(acc, acc + d, std::numeric_limits<float>::quiet_NaN());
        continue;
      }
      kern.scores(qrow, kbase, at.data(), n, d, sc, scores.data());
      const float m = kern.max(scores.data(), n);
      const float l = kern.exp_sum(scores.data(), n, m);
      kern.weighted_sum(scores.data(), at.data(), n, vbase, d, 1.f / l, acc);
    }
  });
  return out;
}

namespace {

at::Tensor decoder_attention_meta(const at::Tensor& q, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                  double) {
  return at::empty(q.sizes(), q.options());
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(fxcpp, m) {
  m.def("decoder_attention(Tensor q, Tensor k, Tensor v, Tensor mask, float scale) -> Tensor");
  m.impl("decoder_attention", c10::DispatchKey::CPU, TORCH_FN(decoder_attention));
  m.impl("decoder_attention", c10::DispatchKey::Meta, TORCH_FN(decoder_attention_meta));
}

}  // namespace fx::decoders
