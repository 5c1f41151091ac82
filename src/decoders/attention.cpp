// fxcpp::decoder_attention (include/fx/decoders/passes.h): softmax(q k^T *
// scale, masked) v over a KV cache read in place, grouped-query heads
// without repeating the cache, one pass per query row with an online
// softmax (flash attention's running maximum and sum), cache positions the
// mask hides never read. AVX-512 / AVX2 / plain loops for the two inner
// products, chosen once from the CPU's features.
#include <fx/decoders/passes.h>

#include <fx/error.h>

#include "decoders/convention.h"

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <immintrin.h>

#include <cmath>
#include <limits>
#include <vector>

namespace fx::decoders {

namespace {

__attribute__((target("avx512f"))) float dot_avx512(const float* a, const float* b, int64_t n) {
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
  }
  for (; i + 16 <= n; i += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
  alignas(64) float lanes[16];  // not _mm512_reduce_add_ps: GCC 12 warns inside it (its bug 105593)
  _mm512_store_ps(lanes, _mm512_add_ps(s0, s1));
  float s = 0;
  for (float lane : lanes) s += lane;
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

/// acc = acc * c + w * v.
__attribute__((target("avx512f"))) void scale_add_avx512(float* acc, float c, float w, const float* v, int64_t n) {
  const __m512 vc = _mm512_set1_ps(c), vw = _mm512_set1_ps(w);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(acc + i, _mm512_fmadd_ps(vw, _mm512_loadu_ps(v + i), _mm512_mul_ps(vc, _mm512_loadu_ps(acc + i))));
  for (; i < n; ++i) acc[i] = acc[i] * c + w * v[i];
}

__attribute__((target("avx2,fma"))) float dot_avx2(const float* a, const float* b, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
  }
  for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
  const __m256 s = _mm256_add_ps(s0, s1);
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  float r = _mm_cvtss_f32(h);
  for (; i < n; ++i) r += a[i] * b[i];
  return r;
}

__attribute__((target("avx2,fma"))) void scale_add_avx2(float* acc, float c, float w, const float* v, int64_t n) {
  const __m256 vc = _mm256_set1_ps(c), vw = _mm256_set1_ps(w);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(vw, _mm256_loadu_ps(v + i), _mm256_mul_ps(vc, _mm256_loadu_ps(acc + i))));
  for (; i < n; ++i) acc[i] = acc[i] * c + w * v[i];
}

float dot_plain(const float* a, const float* b, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

void scale_add_plain(float* acc, float c, float w, const float* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc[i] = acc[i] * c + w * v[i];
}

struct Kernels {
  float (*dot)(const float*, const float*, int64_t);
  void (*scale_add)(float*, float, float, const float*, int64_t);
  const char* name;
};

const Kernels& kernels() {
  static const Kernels k = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return Kernels{dot_avx512, scale_add_avx512, "avx512"};
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Kernels{dot_avx2, scale_add_avx2, "avx2"};
    return Kernels{dot_plain, scale_add_plain, "plain"};
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
    for (int64_t r = begin; r < end; ++r) {
      const int64_t ti = r % t, hi = (r / t) % h, bi = r / (t * h);
      const int64_t kv = bi * kvh + hi / group;
      const float* qrow = qp + r * d;
      const float* kbase = kp + kv * s * d;
      const float* vbase = vp + kv * s * d;
      const bool* hidden = mp + ti * s;
      float* acc = op + r * d;
      std::fill(acc, acc + d, 0.f);
      float m = -std::numeric_limits<float>::infinity(), l = 0.f;
      for (int64_t j = 0; j < s; ++j) {
        if (hidden[j]) continue;
        const float score = kern.dot(qrow, kbase + j * d, d) * sc;
        if (score > m) {  // a new maximum: what was summed so far shrinks by exp(m - score)
          const float c = std::exp(m - score);
          l = l * c + 1.f;
          kern.scale_add(acc, c, 1.f, vbase + j * d, d);
          m = score;
        } else {
          const float w = std::exp(score - m);
          l += w;
          kern.scale_add(acc, 1.f, w, vbase + j * d, d);
        }
      }
      const float inv = 1.f / l;  // no visible position: 0 / 0, NaN, as softmax over -inf gives
      for (int64_t i = 0; i < d; ++i) acc[i] = l > 0 ? acc[i] * inv : std::numeric_limits<float>::quiet_NaN();
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
