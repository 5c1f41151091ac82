// gemv (see gemv.h): one output at a time, its weight row read once
// sequentially into four AVX2 accumulators (32 floats per step), so that
// each thread streams one contiguous block of rows.
#include "onednn/gemv.h"

#include "onednn/context.h"

#include <ATen/Parallel.h>

#include <immintrin.h>

#include <algorithm>

namespace fx::onednn::detail {
namespace {

__attribute__((target("avx2,fma"))) float dot_avx2(const float* w, const float* x, int64_t k) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= k; i += 32) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
    a2 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 16), _mm256_loadu_ps(x + i + 16), a2);
    a3 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 24), _mm256_loadu_ps(x + i + 24), a3);
  }
  for (; i + 8 <= k; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), a0);
  const __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  float sum = _mm_cvtss_f32(h);
  for (; i < k; ++i) sum += w[i] * x[i];
  return sum;
}

float dot_plain(const float* w, const float* x, int64_t k) {
  float sum = 0;
  for (int64_t i = 0; i < k; ++i) sum += w[i] * x[i];
  return sum;
}

}  // namespace

void gemv(const float* w, int64_t n, int64_t k, const float* x, float* y, float beta) {
  static const auto dot = cpu_has_avx2_fma() ? dot_avx2 : dot_plain;
  // At least 64K weights per task: a smaller product stays on the calling thread.
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(k, 1));
  at::parallel_for(0, n, grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float d = dot(w + i * k, x, k);
      y[i] = beta != 0.f ? d + y[i] : d;
    }
  });
}

}  // namespace fx::onednn::detail
