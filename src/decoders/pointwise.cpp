// The decoder's pointwise kernels (include/fx/decoders/passes.h): RMSNorm,
// the rotary embedding and SiLU-gated products, each one pass over its
// inputs where ATen's unfused graph runs 8, 7 and 2 operators with a tensor
// written between each. Float32, in the order HF's arithmetic rounds.
#include <fx/decoders/passes.h>

#include <fx/error.h>

#include "decoders/convention.h"
#include "decoders/vec_exp.h"

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <immintrin.h>

#include <cmath>
#include <utility>

namespace fx::decoders {

namespace {

[[noreturn]] void fail(const char* who, const std::string& what) { throw Error(std::string(who) + ": " + what); }

void require_float(const char* who, std::initializer_list<const at::Tensor*> ts) {
  for (const at::Tensor* t : ts)
    if (!t->defined() || t->scalar_type() != at::kFloat) fail(who, "expected float32 tensors, got " + detail::described(*t));
}

}  // namespace

at::Tensor rms_norm(const at::Tensor& x_in, const at::Tensor& weight_in, double eps) {
  require_float("rms_norm", {&x_in, &weight_in});
  if (x_in.dim() == 0 || weight_in.dim() != 1 || weight_in.size(0) != x_in.size(-1))
    fail("rms_norm", "the weight must be [" + (x_in.dim() ? std::to_string(x_in.size(-1)) : std::string("?")) +
                         "] for x " + detail::described(x_in) + ", not " + detail::described(weight_in));
  const at::Tensor x = x_in.contiguous(), w = weight_in.contiguous();
  at::Tensor y = at::empty(x.sizes(), x.options());
  const int64_t h = x.size(-1), rows = h ? x.numel() / h : 0;
  const float* xp = x.data_ptr<float>();
  const float* wp = w.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const float e = static_cast<float>(eps);
  at::parallel_for(0, rows, std::max<int64_t>(1, 32768 / std::max<int64_t>(h, 1)), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = xp + r * h;
      float* yr = yp + r * h;
      double sum = 0;  // HF's mean of squares in float32; accumulated wider here, then rounded once
      for (int64_t i = 0; i < h; ++i) sum += static_cast<double>(xr[i]) * xr[i];
      const float inv = 1.f / std::sqrt(static_cast<float>(sum / static_cast<double>(h)) + e);
      for (int64_t i = 0; i < h; ++i) yr[i] = wp[i] * (xr[i] * inv);
    }
  });
  return y;
}

at::Tensor rotary_embedding(const at::Tensor& x_in, const at::Tensor& cos_in, const at::Tensor& sin_in) {
  require_float("rotary_embedding", {&x_in, &cos_in, &sin_in});
  if (x_in.dim() != 4 || cos_in.dim() != 2 || cos_in.sizes() != sin_in.sizes() || cos_in.size(0) != x_in.size(2) ||
      cos_in.size(1) != x_in.size(3) || x_in.size(3) % 2 != 0)
    fail("rotary_embedding", "x must be [B, heads, T, D] (D even) and cos, sin [T, D], not " + detail::described(x_in) + ", " +
                                 detail::described(cos_in) + ", " + detail::described(sin_in));
  const at::Tensor x = x_in.contiguous(), c = cos_in.contiguous(), s = sin_in.contiguous();
  at::Tensor y = at::empty(x.sizes(), x.options());
  const int64_t t = x.size(2), d = x.size(3), half = d / 2, rows = x.numel() / d;
  const float* xp = x.data_ptr<float>();
  const float* cp = c.data_ptr<float>();
  const float* sp = s.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  at::parallel_for(0, rows, std::max<int64_t>(1, 32768 / d), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = xp + r * d;
      const float* cr = cp + (r % t) * d;
      const float* sr = sp + (r % t) * d;
      float* yr = yp + r * d;
      // x * cos + rotate_half(x) * sin, rotate_half(x) = (-x2, x1): HF's two products, then their sum.
      for (int64_t i = 0; i < half; ++i) yr[i] = xr[i] * cr[i] + (-xr[i + half]) * sr[i];
      for (int64_t i = half; i < d; ++i) yr[i] = xr[i] * cr[i] + xr[i - half] * sr[i];
    }
  });
  return y;
}

namespace {

// GCC 12's false positives on the unmasked AVX-512 intrinsics (see weight_only_kernels.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

/// y = gate / (1 + exp(-gate)) * up over [begin, end), HF's SiLU then the product, for one instruction set.
__attribute__((target("avx512f"))) void silu_mul_avx512(const float* g, const float* u, float* y, int64_t begin,
                                                          int64_t end) {
  const __m512 one = _mm512_set1_ps(1.f);
  for (int64_t i = begin; i < end; i += 16) {
    const __mmask16 k = detail::lanes16(end - i);
    const __m512 gv = _mm512_maskz_loadu_ps(k, g + i);
    const __m512 e = detail::exp_avx512(_mm512_sub_ps(_mm512_setzero_ps(), gv));
    _mm512_mask_storeu_ps(y + i, k, _mm512_mul_ps(_mm512_div_ps(gv, _mm512_add_ps(one, e)), _mm512_maskz_loadu_ps(k, u + i)));
  }
}

__attribute__((target("avx2,fma"))) void silu_mul_avx2(const float* g, const float* u, float* y, int64_t begin,
                                                         int64_t end) {
  const __m256 one = _mm256_set1_ps(1.f);
  int64_t i = begin;
  for (; i + 8 <= end; i += 8) {
    const __m256 gv = _mm256_loadu_ps(g + i);
    const __m256 e = detail::exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), gv));
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_div_ps(gv, _mm256_add_ps(one, e)), _mm256_loadu_ps(u + i)));
  }
  for (; i < end; ++i) y[i] = g[i] / (1.f + std::exp(-g[i])) * u[i];
}

#pragma GCC diagnostic pop

void silu_mul_plain(const float* g, const float* u, float* y, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) y[i] = g[i] / (1.f + std::exp(-g[i])) * u[i];
}

using SiluMulFn = void (*)(const float*, const float*, float*, int64_t, int64_t);

SiluMulFn silu_mul_kernel() {
  static const SiluMulFn fn = [] {
    switch (detail::decoder_isa()) {
      case detail::DecoderIsa::Avx512: return &silu_mul_avx512;
      case detail::DecoderIsa::Avx2: return &silu_mul_avx2;
      case detail::DecoderIsa::Plain: break;
    }
    return &silu_mul_plain;
  }();
  return fn;
}

}  // namespace

namespace {

/// `t` as rows of its last dimension, each contiguous, evenly spaced (its leading dimensions
/// collapse into one), and the distance between rows: merge_projections' narrow halves of one
/// GEMM's output are read where they are; anything else (overlapping rows too) is made contiguous.
std::pair<at::Tensor, int64_t> as_rows(const at::Tensor& t) {
  const int64_t h = t.dim() ? t.size(-1) : 1;
  bool even = t.dim() == 0 || h <= 1 || t.stride(-1) == 1;
  int64_t stride = h, expected = -1;
  for (int64_t d = t.dim() - 2; d >= 0 && even; --d) {
    if (t.size(d) == 1) continue;
    if (expected < 0)
      stride = expected = t.stride(d);
    else
      even = t.stride(d) == expected;
    expected *= t.size(d);
  }
  if (!even || stride < h) return {t.contiguous(), h};
  return {t, stride};
}

}  // namespace

at::Tensor silu_mul(const at::Tensor& gate_in, const at::Tensor& up_in) {
  require_float("silu_mul", {&gate_in, &up_in});
  if (gate_in.sizes() != up_in.sizes())
    fail("silu_mul", "gate and up must have one shape, not " + detail::described(gate_in) + " and " + detail::described(up_in));
  const auto [g, gs] = as_rows(gate_in);
  const auto [u, us] = as_rows(up_in);
  const int64_t h = g.dim() ? g.size(-1) : 1, rows = h ? g.numel() / h : 0;
  at::Tensor y = at::empty(g.sizes(), g.options());
  const float* gp = g.data_ptr<float>();
  const float* up = u.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const SiluMulFn fn = silu_mul_kernel();
  if (gs == h && us == h) {
    at::parallel_for(0, g.numel(), 32768, [&](int64_t begin, int64_t end) { fn(gp, up, yp, begin, end); });
  } else {
    at::parallel_for(0, rows, std::max<int64_t>(1, 32768 / std::max<int64_t>(h, 1)), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) fn(gp + r * gs, up + r * us, yp + r * h, 0, h);
    });
  }
  return y;
}

namespace {

at::Tensor like_first(const at::Tensor& x) { return at::empty(x.sizes(), x.options()); }
at::Tensor rms_norm_meta(const at::Tensor& x, const at::Tensor&, double) { return like_first(x); }
at::Tensor rotary_meta(const at::Tensor& x, const at::Tensor&, const at::Tensor&) { return like_first(x); }
at::Tensor silu_mul_meta(const at::Tensor& g, const at::Tensor&) { return like_first(g); }

}  // namespace

TORCH_LIBRARY_FRAGMENT(fxcpp, m) {
  m.def("rms_norm(Tensor x, Tensor weight, float eps) -> Tensor");
  m.impl("rms_norm", c10::DispatchKey::CPU, TORCH_FN(rms_norm));
  m.impl("rms_norm", c10::DispatchKey::Meta, TORCH_FN(rms_norm_meta));
  m.def("rotary_embedding(Tensor x, Tensor cos, Tensor sin) -> Tensor");
  m.impl("rotary_embedding", c10::DispatchKey::CPU, TORCH_FN(rotary_embedding));
  m.impl("rotary_embedding", c10::DispatchKey::Meta, TORCH_FN(rotary_meta));
  m.def("silu_mul(Tensor gate, Tensor up) -> Tensor");
  m.impl("silu_mul", c10::DispatchKey::CPU, TORCH_FN(silu_mul));
  m.impl("silu_mul", c10::DispatchKey::Meta, TORCH_FN(silu_mul_meta));
}

}  // namespace fx::decoders
