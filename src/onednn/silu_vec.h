#pragma once
// Internal: SiLU of eight floats in AVX2 registers (silu8) and the
// polynomial's constants, shared by silu.cpp's kernels and the epilogues
// that apply SiLU to values still in registers (panel_gemm.cpp). How and
// how exactly it computes: silu.cpp.
#include <immintrin.h>

namespace fx::onednn::detail::silu_vec {

constexpr float kLog2e = 0x1.715476p0f, kMinusLn2 = -0x1.62E43p-1f;
constexpr float kC5 = 0x1.0F9F9Cp-7f, kC4 = 0x1.573A1Ap-5f, kC3 = 0x1.555A80p-3f, kC2 = 0x1.FFFDC6p-2f,
                kC1 = 0x1.FFFFF6p-1f;
// z below: sigmoid taken as 0 (|x · sigmoid(x)| < 88 · 2^-126 = 1.0e-36 there).
constexpr float kDenormCutoff = -0x1.5D589Ep+6f;  // -87.34: exp(z) would be below 2^-126
// 2^23 + 2^22: adding it rounds z · log2 e to an integer in the low bits; + 127, the
// float exponent's bias, so that shifting those bits by 23 gives 2^n.
constexpr float kMagicBias = 0x1.8000FEp23f;

// silu.cpp's silu16 in AVX2: 2^n through the exponent field (no scalef), so
// e = 2^n + (t · 2^n) · p with p's constant term left out.
__attribute__((target("avx2,fma"))) inline __m256 silu8(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.f), magic = _mm256_set1_ps(kMagicBias);
  const __m256 z = _mm256_or_ps(x, _mm256_set1_ps(-0.f));
  __m256 n = _mm256_fmadd_ps(z, _mm256_set1_ps(kLog2e), magic);
  const __m256 s = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(n), 23));  // 2^n
  n = _mm256_sub_ps(n, magic);
  __m256 t = _mm256_fmadd_ps(n, _mm256_set1_ps(kMinusLn2), z);
  __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(kC5), t, _mm256_set1_ps(kC4));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(kC3));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(kC2));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(kC1));
  t = _mm256_mul_ps(t, s);
  const __m256 e = _mm256_fmadd_ps(t, p, s);
  const __m256 d = _mm256_add_ps(e, one);
  __m256 r = _mm256_rcp_ps(d);
  r = _mm256_fmadd_ps(_mm256_fnmadd_ps(r, d, one), r, r);
  __m256 f = _mm256_mul_ps(e, r);
  f = _mm256_andnot_ps(_mm256_cmp_ps(z, _mm256_set1_ps(kDenormCutoff), _CMP_LT_OS), f);
  f = _mm256_blendv_ps(_mm256_sub_ps(one, f), f, x);  // by x's sign bit
  return _mm256_mul_ps(x, f);
}

}  // namespace fx::onednn::detail::silu_vec
