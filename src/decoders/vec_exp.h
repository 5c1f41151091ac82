#pragma once
// The decoder's vector loops' shared pieces (attention's softmax, SiLU):
// the mask of a tail's lanes, the instruction set chosen once, and exp over
// vectors of floats: Cephes' expf (a degree-6 polynomial on [-ln2/2, ln2/2] times 2^n),
// within 2 ulp of libm's over the range, for AVX-512 and AVX2 in functions
// compiled for those targets only (the library's baseline stays x86-64).
// Arguments at or below -87.3 (past the smallest normal float) give 0, NaN
// stays NaN, +inf and anything past 88.7 give +inf.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace fx::decoders::detail {

/// The mask of the first `left` of 16 lanes (none for left <= 0, all from 16 on): a loop's tail.
inline __mmask16 lanes16(int64_t left) {
  return left >= 16 ? __mmask16(0xFFFF) : left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1);
}

#define FX_EXP_AVX512 __attribute__((target("avx512f"), always_inline)) inline
#define FX_EXP_AVX2 __attribute__((target("avx2,fma"), always_inline)) inline

/// Cephes expf's constants: ln 2 split in two for an exact n · ln 2, the polynomial's coefficients.
struct ExpConstants {
  static constexpr float kLog2e = 1.44269504088896341f, kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  static constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f,
                         kP3 = 4.1665795894e-2f, kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;
  /// Below it the result is 0; above kMax, +inf.
  static constexpr float kMin = -87.3365447f, kMax = 88.7228391f;
};

FX_EXP_AVX512 __m512 exp_avx512(__m512 x) {
  using C = ExpConstants;
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(C::kMin), _CMP_GE_OQ);
  const __mmask16 big = _mm512_cmp_ps_mask(x, _mm512_set1_ps(C::kMax), _CMP_GT_OQ);
  const __m512 c = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(C::kMin)), _mm512_set1_ps(C::kMax));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(c, _mm512_set1_ps(C::kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(C::kLn2Hi), c);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(C::kLn2Lo), r);
  __m512 p = _mm512_set1_ps(C::kP0);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(C::kP1));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(C::kP2));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(C::kP3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(C::kP4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(C::kP5));
  p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.f)));
  __m512 y = _mm512_maskz_mov_ps(keep, _mm512_scalef_ps(p, n));
  y = _mm512_mask_mov_ps(y, big, _mm512_set1_ps(std::numeric_limits<float>::infinity()));
  return _mm512_mask_mov_ps(y, nan, x);
}

FX_EXP_AVX2 __m256 exp_avx2(__m256 x) {
  using C = ExpConstants;
  const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  const __m256 keep = _mm256_cmp_ps(x, _mm256_set1_ps(C::kMin), _CMP_GE_OQ);
  const __m256 big = _mm256_cmp_ps(x, _mm256_set1_ps(C::kMax), _CMP_GT_OQ);
  const __m256 c = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(C::kMin)), _mm256_set1_ps(C::kMax));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(c, _mm256_set1_ps(C::kLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(C::kLn2Hi), c);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(C::kLn2Lo), r);
  __m256 p = _mm256_set1_ps(C::kP0);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(C::kP1));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(C::kP2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(C::kP3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(C::kP4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(C::kP5));
  p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.f)));
  // 2^n (n within [-126, 128]) as 2^(n >> 1) · 2^(n - (n >> 1)), each a normal float built in its exponent bits.
  const __m256i ni = _mm256_cvtps_epi32(n), n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
  const __m256 e1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23));
  const __m256 e2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23));
  __m256 y = _mm256_and_ps(_mm256_mul_ps(_mm256_mul_ps(p, e1), e2), keep);
  y = _mm256_blendv_ps(y, _mm256_set1_ps(std::numeric_limits<float>::infinity()), big);
  return _mm256_blendv_ps(y, x, nan);
}

/// The vector width the decoder's own loops (attention, SiLU) run at on this CPU.
enum class DecoderIsa { Avx512, Avx2, Plain };

/// Chosen once from the CPU's features: AVX-512F, else AVX2 with FMA, else plain loops.
inline DecoderIsa decoder_isa() {
  static const DecoderIsa isa = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return DecoderIsa::Avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return DecoderIsa::Avx2;
    return DecoderIsa::Plain;
  }();
  return isa;
}

}  // namespace fx::decoders::detail
