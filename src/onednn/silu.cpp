// SiLU in place (see silu.h): exp(-x) = 2^k · p(r), k = round(-x · log2 e),
// r = -x - k · ln 2 (ln 2 in two parts, Cody and Waite), p Cephes' expf
// polynomial; sigmoid = 1 / (1 + exp(-x)) by rcp and one Newton step. -x is
// clamped to [-88, 88] first, where exp stays a normal float: beyond, the
// sigmoid is 1 to float precision above, and taken as 0 below -87.
#include "onednn/silu.h"

#include <fx/onednn.h>

#include <ATen/Parallel.h>

#include <immintrin.h>

#include <cmath>

namespace fx::onednn::detail {
namespace {

constexpr float kLog2e = 1.44269504088896341f, kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
constexpr float kC6 = 1.9875691500e-4f, kC5 = 1.3981999507e-3f, kC4 = 8.3334519073e-3f, kC3 = 4.1665795894e-2f,
                kC2 = 1.6666665459e-1f, kC1 = 5.0000001201e-1f, kClamp = 88.f;
// Below, sigmoid(x) is taken as 0: |x · sigmoid(x)| < 87 · e^-87 = 1.4e-36
// there, and 1 / (1 + exp(-x)) would be a denormal that rcp does not give
// reliably (x = -3e38 times it made -1.8).
constexpr float kZeroBelow = -87.f;

float silu_scalar(float x) { return x / (1.f + std::exp(-x)); }

// GCC 12 warns that the unmasked AVX-512 intrinsics' _mm512_undefined_ps()
// pass-through "may be used uninitialized" (its bug 105593, fixed in 13).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f"))) inline __m512 silu16(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.f);
  const __m512 t = _mm512_min_ps(_mm512_max_ps(_mm512_sub_ps(_mm512_setzero_ps(), x), _mm512_set1_ps(-kClamp)),
                                 _mm512_set1_ps(kClamp));
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(t, _mm512_set1_ps(kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(kLn2Hi), t);
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(kLn2Lo), r);
  __m512 q = _mm512_fmadd_ps(_mm512_set1_ps(kC6), r, _mm512_set1_ps(kC5));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(kC4));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(kC3));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(kC2));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(kC1));
  q = _mm512_fmadd_ps(q, _mm512_mul_ps(r, r), _mm512_add_ps(r, one));
  const __m512 d = _mm512_add_ps(_mm512_scalef_ps(q, k), one);  // 1 + exp(-x)
  __m512 y = _mm512_rcp14_ps(d);
  y = _mm512_fmadd_ps(_mm512_fnmadd_ps(d, y, one), y, y);
  // sigmoid 0 below kZeroBelow (and for NaN): x · y is then -0, or NaN for -inf and NaN
  return _mm512_mul_ps(x, _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(kZeroBelow), _CMP_GT_OQ), y));
}

__attribute__((target("avx512f"))) void silu_avx512(float* p, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(p + i, silu16(_mm512_loadu_ps(p + i)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(p + i, m, silu16(_mm512_maskz_loadu_ps(m, p + i)));
  }
}
#pragma GCC diagnostic pop

// silu16's steps in AVX2 (2^k through the exponent field: no scalef there).
__attribute__((target("avx2,fma"))) inline __m256 silu8(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.f);
  const __m256 t = _mm256_min_ps(_mm256_max_ps(_mm256_sub_ps(_mm256_setzero_ps(), x), _mm256_set1_ps(-kClamp)),
                                 _mm256_set1_ps(kClamp));
  const __m256 k = _mm256_round_ps(_mm256_mul_ps(t, _mm256_set1_ps(kLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(kLn2Hi), t);
  r = _mm256_fnmadd_ps(k, _mm256_set1_ps(kLn2Lo), r);
  __m256 q = _mm256_fmadd_ps(_mm256_set1_ps(kC6), r, _mm256_set1_ps(kC5));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(kC4));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(kC3));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(kC2));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(kC1));
  q = _mm256_fmadd_ps(q, _mm256_mul_ps(r, r), _mm256_add_ps(r, one));
  // 2^k for k in [-127, 127]: the exponent field k + 127 (k = -127: 0, exp(-x) flushed to zero)
  const __m256 pow2k = _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23));
  const __m256 d = _mm256_fmadd_ps(q, pow2k, one);  // 1 + exp(-x)
  __m256 y = _mm256_rcp_ps(d);
  y = _mm256_fmadd_ps(_mm256_fnmadd_ps(d, y, one), y, y);
  return _mm256_mul_ps(x, _mm256_and_ps(_mm256_cmp_ps(x, _mm256_set1_ps(kZeroBelow), _CMP_GT_OQ), y));
}

__attribute__((target("avx2,fma"))) void silu_avx2(float* p, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(p + i, silu8(_mm256_loadu_ps(p + i)));
  for (; i < n; ++i) p[i] = silu_scalar(p[i]);
}

void silu_plain(float* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i) p[i] = silu_scalar(p[i]);
}

using Kernel = void (*)(float*, int64_t);

Kernel pick() {
  if (has_avx512_core()) return silu_avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return silu_avx2;
  return silu_plain;
}

}  // namespace

void silu_(float* x, int64_t n) {
  static const Kernel kernel = pick();
  at::parallel_for(0, n, 1 << 15, [&](int64_t begin, int64_t end) { kernel(x + begin, end - begin); });
}

}  // namespace fx::onednn::detail
