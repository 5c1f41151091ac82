// SiLU in place (see silu.h) as x · f, f = sigmoid(x), from z = -|x| alone,
// which leaves exp nothing to overflow: e = exp(z) in (0, 1] as 2^n · p(t),
// n = round(z · log2 e), t = z - n · ln 2 (|t| <= ln2/2; ln 2 as one float,
// whose rounding, 1.9e-9, times |n| <= 126 moves t by at most 2.4e-7), p a
// degree-5 minimax polynomial (XNNPACK's rr1-p5 coefficients, from its f32
// sigmoid kernels); then f = e / (1 + e) by rcp and one Newton step, taken
// as 0 where z is below ln(2^-126) (e would be denormal, and rcp does not
// give it reliably) and replaced by 1 - f where x's sign bit is clear.
#include "onednn/silu.h"

#include "onednn/context.h"
#include "onednn/silu_vec.h"

#include <fx/onednn.h>

#include <ATen/Parallel.h>

#include <immintrin.h>

#include <climits>
#include <cmath>

namespace fx::onednn::detail {
namespace {

using namespace silu_vec;

float silu_scalar(float x) { return x / (1.f + std::exp(-x)); }

// GCC 12 warns that the unmasked AVX-512 intrinsics' _mm512_undefined_ps()
// pass-through "may be used uninitialized" (its bug 105593, fixed in 13).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f"))) inline __m512 silu16(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.f);
  const __m512i sign = _mm512_set1_epi32(INT_MIN);
  const __m512 z = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(x), sign));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(z, _mm512_set1_ps(kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 t = _mm512_fmadd_ps(n, _mm512_set1_ps(kMinusLn2), z);
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(kC5), t, _mm512_set1_ps(kC4));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(kC3));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(kC2));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(kC1));
  const __m512 e = _mm512_scalef_ps(_mm512_fmadd_ps(p, t, one), n);
  const __m512 d = _mm512_add_ps(e, one);
  __m512 r = _mm512_rcp14_ps(d);
  r = _mm512_fmadd_ps(_mm512_fnmadd_ps(r, d, one), r, r);
  __m512 f = _mm512_maskz_mul_ps(_mm512_cmp_ps_mask(z, _mm512_set1_ps(kDenormCutoff), _CMP_GE_OQ), e, r);
  f = _mm512_mask_sub_ps(f, _mm512_testn_epi32_mask(_mm512_castps_si512(x), sign), one, f);
  return _mm512_mul_ps(x, f);  // NaN stays NaN (z, hence f, NaN); -inf · 0: NaN
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
  if (cpu_has_avx2_fma()) return silu_avx2;
  return silu_plain;
}

}  // namespace

void silu_(float* x, int64_t n) {
  static const Kernel kernel = pick();
  at::parallel_for(0, n, 1 << 15, [&](int64_t begin, int64_t end) { kernel(x + begin, end - begin); });
}

}  // namespace fx::onednn::detail
