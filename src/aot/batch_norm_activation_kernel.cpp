// The kernels of fxcpp::batch_norm_apply and fxcpp::batch_norm_act_backward
// (batch_norm_activation.cpp registers the operators and picks the kernels
// for the CPU; fuse_batch_norm_activation.cpp is the graph rewrite that
// uses them). Compiled as ATen compiles its CPU kernels: once per
// capability (CMakeLists.txt's fx_cpu_kernel builds this file again with
// CPU_CAPABILITY=AVX2 and AVX512 and their instruction sets), so that
// at::vec::Vectorized is the AVX2 / AVX-512 one and the arithmetic is
// ATen's to the bit: fused multiply-adds where ATen's kernels of that
// capability have them, none in the DEFAULT build.
//
// With the min cut's recomputation (recompute_batch_norm.cpp) the backward
// of conv -> batch norm -> relu redoes the normalisation from the saved
// convolution output x and the batch statistics, as four pointwise
// operators (sub, mul, mul, add) and the relu, each writing a whole
// activation; then threshold_backward writes the masked gradient, which
// native_batch_norm_backward reads twice. Here:
//   apply:        y = clamp(x * alpha + beta [+ residual], lo, hi)
//     one read of x (and of the residual), one write; alpha = invstd * w and
//     beta = b - mean * alpha as ATen's CPU batch norm computes its output,
//     so the recomputed activation is the forward's, bit for bit.
//   act_backward: the batch-norm backward of the gradient masked where the
//     activation passes it (lo < a < hi, `a` the activation's output or
//     input: threshold_backward's and hardtanh_backward's masks), without
//     writing the masked gradient: one pass for the per-channel sums
//     (accumulated in double), one for the input gradient.
#ifndef CPU_CAPABILITY
#define CPU_CAPABILITY DEFAULT
#endif
#include "aot/batch_norm_activation_kernel.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/vec.h>

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

namespace fx::detail {
namespace {

/// b - m * a as ATen's kernels of this capability compute it (GCC contracts
/// theirs into one fused multiply-add where they are built with FMA).
template <typename T>
T minus_product(T b, T m, T a) {
#if defined(CPU_CAPABILITY_AVX2) || defined(CPU_CAPABILITY_AVX512)
  return std::fma(-m, a, b);
#else
  return b - m * a;
#endif
}

/// How the kernels walk x: by rows of `len` values with a coefficient per
/// lane (lane j in channel j / spread: channels-last or [N, C] rows of C
/// values, spread 1; or a contiguous image of small planes as one row,
/// spread = the plane), or plane by plane (contiguous, large planes: one
/// coefficient per plane).
struct Walk {
  bool by_rows = false, channels_last = false;
  int64_t batch = 0, channels = 0, plane = 0;  // x is [batch, channels, plane...]
  int64_t n_rows = 0, len = 0, spread = 1;     // by rows
};

/// Planes smaller than this are walked as rows (per-plane loops would be mostly tails).
constexpr int64_t kSmallPlane = 64;

Walk walk_of(const at::Tensor& x) {
  Walk w;
  w.batch = x.size(0);
  w.channels = x.size(1);
  w.plane = w.batch > 0 && w.channels > 0 ? x.numel() / (w.batch * w.channels) : 0;
  w.channels_last = x.dim() == 4 && !x.is_contiguous() && x.is_contiguous(c10::MemoryFormat::ChannelsLast);
  if (x.dim() == 2 || w.channels_last) {
    w.by_rows = true;
    w.n_rows = w.batch * w.plane;
    w.len = w.channels;
  } else if (w.plane < kSmallPlane) {
    w.by_rows = true;
    w.n_rows = w.batch;
    w.len = w.channels * w.plane;
    w.spread = w.plane;
  }
  return w;
}

/// `t` laid out as the walk reads x (no copy when it already is).
at::Tensor like(const at::Tensor& t, const at::Tensor& x, const Walk& w) {
  TORCH_CHECK(t.sizes() == x.sizes(), "fxcpp batch norm: a tensor of shape ", t.sizes(), " where ", x.sizes(),
              " was expected");
  return w.channels_last ? t.contiguous(c10::MemoryFormat::ChannelsLast) : t.contiguous();
}

/// Per-channel values as per-lane ones: each repeated `spread` times.
template <typename T>
std::vector<T> per_lane(const std::vector<T>& v, int64_t spread) {
  if (spread == 1) return v;
  std::vector<T> out;
  out.reserve(v.size() * static_cast<size_t>(spread));
  for (const T& e : v) out.insert(out.end(), static_cast<size_t>(spread), e);
  return out;
}

/// A per-channel vector of `c` values as scalar_t (ones when undefined).
template <typename scalar_t>
std::vector<scalar_t> channel_values(const c10::optional<at::Tensor>& t, int64_t c, scalar_t fill, const char* what) {
  std::vector<scalar_t> out(static_cast<size_t>(c), fill);
  if (!t || !t->defined()) return out;
  TORCH_CHECK(t->dim() == 1 && t->numel() == c, "fxcpp batch norm: ", what, " has shape ", t->sizes(), ", expected [",
              c, "]");
  const at::Tensor v = t->to(c10::CppTypeToScalarType<scalar_t>::value).contiguous();
  const scalar_t* p = v.data_ptr<scalar_t>();
  for (int64_t i = 0; i < c; ++i) out[static_cast<size_t>(i)] = p[i];
  return out;
}

// ---- batch_norm_apply ------------------------------------------------------

template <typename scalar_t>
void apply_kernel(const at::Tensor& x, const at::Tensor& residual, at::Tensor& y, const std::vector<scalar_t>& alpha,
                  const std::vector<scalar_t>& beta, c10::optional<double> lo, c10::optional<double> hi,
                  const Walk& w) {
  using Vec = at::vec::Vectorized<scalar_t>;
  const int64_t c = w.channels;
  const scalar_t* xp = x.data_ptr<scalar_t>();
  const scalar_t* rp = residual.defined() ? residual.data_ptr<scalar_t>() : nullptr;
  scalar_t* yp = y.data_ptr<scalar_t>();
  const Vec vlo(lo ? static_cast<scalar_t>(*lo) : -std::numeric_limits<scalar_t>::infinity());
  const Vec vhi(hi ? static_cast<scalar_t>(*hi) : std::numeric_limits<scalar_t>::infinity());
  const bool clamp = lo.has_value() || hi.has_value();
  // y[i] = x[i] * a + b (+ r[i]), clamped, over `len` contiguous values.
  auto run = [&](int64_t off, int64_t len, const scalar_t* a, const scalar_t* b, bool per_lane) {
    int64_t d = 0;
    auto one = [&](int64_t at, int64_t count) {
      const Vec va = per_lane ? Vec::loadu(a + at, count) : Vec(*a);
      const Vec vb = per_lane ? Vec::loadu(b + at, count) : Vec(*b);
      Vec v = at::vec::fmadd(Vec::loadu(xp + off + at, count), va, vb);
      if (rp) v = v + Vec::loadu(rp + off + at, count);
      if (clamp) v = at::vec::minimum(at::vec::maximum(v, vlo), vhi);
      v.store(yp + off + at, count);
    };
    for (; d + Vec::size() <= len; d += Vec::size()) one(d, Vec::size());
    if (d < len) one(d, len - d);
  };
  if (w.by_rows) {
    const std::vector<scalar_t> al = per_lane(alpha, w.spread), bl = per_lane(beta, w.spread);
    at::parallel_for(0, w.n_rows, 16, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) run(i * w.len, w.len, al.data(), bl.data(), true);
    });
  } else {
    at::parallel_for(0, w.batch * c, 1, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        const size_t ch = static_cast<size_t>(p % c);
        run(p * w.plane, w.plane, &alpha[ch], &beta[ch], false);
      }
    });
  }
}

at::Tensor batch_norm_apply(const at::Tensor& input, const at::Tensor& mean, const at::Tensor& invstd,
                            const c10::optional<at::Tensor>& weight, const c10::optional<at::Tensor>& bias,
                            const c10::optional<at::Tensor>& residual, c10::optional<double> lo,
                            c10::optional<double> hi) {
  TORCH_CHECK(input.dim() >= 2, "fxcpp::batch_norm_apply: expected an input of at least 2 dimensions, got ",
              input.dim());
  TORCH_CHECK(input.device().is_cpu(), "fxcpp::batch_norm_apply: CPU tensors only");
  const Walk w = walk_of(input);
  const at::Tensor x = like(input, input, w);
  at::Tensor r = residual && residual->defined() ? like(*residual, x, w) : at::Tensor();
  at::Tensor y = at::empty_like(x);
  const int64_t c = x.size(1);
  if (x.numel() == 0) return y;
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "fxcpp::batch_norm_apply", [&] {
    const auto m = channel_values<scalar_t>(mean, c, 0, "mean");
    const auto s = channel_values<scalar_t>(invstd, c, 1, "invstd");
    const auto wt = channel_values<scalar_t>(weight, c, 1, "weight");
    const auto b = channel_values<scalar_t>(bias, c, 0, "bias");
    std::vector<scalar_t> alpha(static_cast<size_t>(c)), beta(static_cast<size_t>(c));
    for (size_t i = 0; i < alpha.size(); ++i) {
      alpha[i] = s[i] * wt[i];  // as ATen's batch_norm_cpu_collect_linear_and_constant_terms
      beta[i] = minus_product(b[i], m[i], alpha[i]);
    }
    if (r.defined()) r = r.to(x.scalar_type());
    apply_kernel<scalar_t>(x, r, y, alpha, beta, lo, hi, w);
  });
  return y;
}

// ---- batch_norm_act_backward -----------------------------------------------

/// The activation's mask the backward applies, as threshold_backward and
/// hardtanh_backward write it: none; the gradient stopped where a <= lo;
/// stopped where a <= lo or a >= hi. NaN passes, as there.
enum class Mask { None, Below, Outside };

/// The masked gradient g' of the vector g at `off`.
template <typename scalar_t, Mask M>
struct Masker {
  using Vec = at::vec::Vectorized<scalar_t>;
  const scalar_t* a;  // the tested activation (unused for Mask::None)
  Vec lo, hi;

  /// `g` with the lanes the activation stopped set to 0 (`count` lanes valid).
  Vec operator()(const Vec& g, int64_t off, int64_t count = Vec::size()) const {
    if constexpr (M == Mask::None) {
      return g;
    } else {
      const Vec av = count == Vec::size() ? Vec::loadu(a + off) : Vec::loadu(a + off, count);
      Vec stop = av <= lo;
      if constexpr (M == Mask::Outside) stop = stop | (av >= hi);
      return Vec::blendv(g, Vec(0), stop);
    }
  }
};

template <typename Vec>
Vec load(const typename Vec::value_type* p, int64_t count) {
  return count == Vec::size() ? Vec::loadu(p) : Vec::loadu(p, count);
}

/// Adds the first `count` lanes of each of the K vector pairs into sum / dotp (doubles).
template <typename Vec, int K>
void flush(const Vec (&s)[K], const Vec (&p)[K], int64_t count, double* sum, double* dotp) {
  using T = typename Vec::value_type;
  T ls[Vec::size()], lp[Vec::size()];
  for (int j = 0; j < K; ++j) {
    s[j].store(ls);
    p[j].store(lp);
    for (int64_t l = 0; l < count; ++l) {
      sum[j * Vec::size() + l] += static_cast<double>(ls[l]);
      dotp[j * Vec::size() + l] += static_cast<double>(lp[l]);
    }
  }
}

/// Rows [r0, r1) of [n, c]: per-channel sums of g' and g' * (x - mean) added
/// into sum / dotp. Channels in chunks of four vectors, rows inner (the
/// accumulators stay in registers), flushed to double every 256 rows.
template <typename scalar_t, Mask M>
void row_sums(const scalar_t* g, const Masker<scalar_t, M>& mask, const scalar_t* x, const scalar_t* mean, int64_t r0,
              int64_t r1, int64_t c, double* sum, double* dotp) {
  using Vec = at::vec::Vectorized<scalar_t>;
  constexpr int64_t V = Vec::size();
  constexpr int64_t kBlock = 256;
  for (int64_t b0 = r0; b0 < r1; b0 += kBlock) {
    const int64_t b1 = std::min(r1, b0 + kBlock);
    int64_t d = 0;
    for (; d + 4 * V <= c; d += 4 * V) {
      Vec s[4], p[4], m[4];
      for (int k = 0; k < 4; ++k) {
        s[k] = p[k] = Vec(0);
        m[k] = Vec::loadu(mean + d + k * V);
      }
      for (int64_t i = b0; i < b1; ++i) {
        const int64_t off = i * c + d;
        for (int k = 0; k < 4; ++k) {
          const Vec gv = mask(Vec::loadu(g + off + k * V), off + k * V);
          s[k] = s[k] + gv;
          p[k] = at::vec::fmadd(gv, Vec::loadu(x + off + k * V) - m[k], p[k]);
        }
      }
      flush<Vec, 4>(s, p, V, sum + d, dotp + d);
    }
    for (; d < c; d += V) {
      const int64_t count = std::min(V, c - d);
      Vec s[1] = {Vec(0)}, p[1] = {Vec(0)};
      const Vec m = load<Vec>(mean + d, count);
      for (int64_t i = b0; i < b1; ++i) {
        const int64_t off = i * c + d;
        const Vec gv = mask(load<Vec>(g + off, count), off, count);
        s[0] = s[0] + gv;
        p[0] = at::vec::fmadd(gv, load<Vec>(x + off, count) - m, p[0]);
      }
      flush<Vec, 1>(s, p, count, sum + d, dotp + d);
    }
  }
}

/// One plane of `len` values of one channel: its sums added into *sum / *dotp.
template <typename scalar_t, Mask M>
void plane_sums(const scalar_t* g, const Masker<scalar_t, M>& mask, const scalar_t* x, scalar_t mean, int64_t off,
                int64_t len, double* sum, double* dotp) {
  using Vec = at::vec::Vectorized<scalar_t>;
  constexpr int64_t V = Vec::size();
  const Vec m(mean);
  Vec s[2] = {Vec(0), Vec(0)}, p[2] = {Vec(0), Vec(0)};
  int64_t d = 0;
  for (; d + 2 * V <= len; d += 2 * V)
    for (int k = 0; k < 2; ++k) {
      const Vec gv = mask(Vec::loadu(g + off + d + k * V), off + d + k * V);
      s[k] = s[k] + gv;
      p[k] = at::vec::fmadd(gv, Vec::loadu(x + off + d + k * V) - m, p[k]);
    }
  for (; d < len; d += V) {
    const int64_t count = std::min(V, len - d);
    const Vec gv = mask(load<Vec>(g + off + d, count), off + d, count);
    s[0] = s[0] + gv;
    p[0] = at::vec::fmadd(gv, load<Vec>(x + off + d, count) - m, p[0]);
  }
  Vec st[1] = {s[0] + s[1]}, pt[1] = {p[0] + p[1]};
  double ls[V], lp[V];
  for (int64_t l = 0; l < V; ++l) ls[l] = lp[l] = 0;
  flush<Vec, 1>(st, pt, V, ls, lp);
  for (int64_t l = 0; l < V; ++l) {
    *sum += ls[l];
    *dotp += lp[l];
  }
}

/// gx = (g' - (x - mean) * k - grad_mean) * scale over `len` values at `off`
/// (ATen's expression, in its order: the gradient of a value feeding only
/// the batch norm, a convolution's bias, sums to zero as closely as ATen's),
/// the coefficients per lane (rows) or one for all (a plane).
template <typename scalar_t, Mask M>
void input_grad_run(const scalar_t* g, const Masker<scalar_t, M>& mask, const scalar_t* x, scalar_t* gx, int64_t off,
                    int64_t len, const scalar_t* mean, const scalar_t* k, const scalar_t* grad_mean,
                    const scalar_t* scale, bool per_lane) {
  using Vec = at::vec::Vectorized<scalar_t>;
  constexpr int64_t V = Vec::size();
  auto coeff = [&](const scalar_t* v, int64_t d, int64_t count) { return per_lane ? load<Vec>(v + d, count) : Vec(*v); };
  for (int64_t d = 0; d < len; d += V) {
    const int64_t count = std::min(V, len - d);
    const Vec gv = mask(load<Vec>(g + off + d, count), off + d, count);
    const Vec xm = load<Vec>(x + off + d, count) - coeff(mean, d, count);
    const Vec r = (gv - xm * coeff(k, d, count) - coeff(grad_mean, d, count)) * coeff(scale, d, count);
    if (count == V)
      r.store(gx + off + d);
    else
      r.store(gx + off + d, count);
  }
}

/// The per-channel values the backward needs, as scalar_t.
template <typename scalar_t>
struct BackwardTerms {
  std::vector<scalar_t> mean, invstd, weight;
  std::vector<double> sum, dotp;
};

template <typename scalar_t, Mask M>
void act_backward_kernel(const at::Tensor& g, const at::Tensor& a, double lo, double hi, const at::Tensor& x,
                         BackwardTerms<scalar_t>& t, at::Tensor& gx, at::Tensor& gw, at::Tensor& gb, const Walk& w) {
  using Vec = at::vec::Vectorized<scalar_t>;
  const Masker<scalar_t, M> mask{a.defined() ? a.data_ptr<scalar_t>() : nullptr, Vec(static_cast<scalar_t>(lo)),
                                 Vec(static_cast<scalar_t>(hi))};
  const scalar_t* gp = g.data_ptr<scalar_t>();
  const scalar_t* xp = x.data_ptr<scalar_t>();
  const int64_t c = w.channels, n = w.batch * w.plane;
  // Pass 1: the sums (by rows: per lane, then folded into channels).
  if (w.by_rows) {
    const std::vector<scalar_t> mean = per_lane(t.mean, w.spread);
    const int threads = at::get_num_threads();
    std::vector<double> acc(static_cast<size_t>(2 * threads * w.len), 0.0);
    at::parallel_for(0, w.n_rows, w.spread == 1 ? 64 : 1, [&](int64_t begin, int64_t end) {
      double* s = acc.data() + static_cast<size_t>(2 * at::get_thread_num() * w.len);
      row_sums<scalar_t, M>(gp, mask, xp, mean.data(), begin, end, w.len, s, s + w.len);
    });
    for (int th = 0; th < threads; ++th)
      for (int64_t j = 0; j < w.len; ++j) {
        const size_t ch = static_cast<size_t>(j / w.spread);
        t.sum[ch] += acc[static_cast<size_t>(2 * th * w.len + j)];
        t.dotp[ch] += acc[static_cast<size_t>((2 * th + 1) * w.len + j)];
      }
  } else {
    at::parallel_for(0, c, 1, [&](int64_t begin, int64_t end) {
      for (int64_t ch = begin; ch < end; ++ch)
        for (int64_t b = 0; b < w.batch; ++b)
          plane_sums<scalar_t, M>(gp, mask, xp, t.mean[static_cast<size_t>(ch)], (b * c + ch) * w.plane, w.plane,
                                  &t.sum[static_cast<size_t>(ch)], &t.dotp[static_cast<size_t>(ch)]);
    });
  }
  if (gw.defined())
    for (int64_t i = 0; i < c; ++i)
      gw.data_ptr<scalar_t>()[i] = static_cast<scalar_t>(t.dotp[static_cast<size_t>(i)]) * t.invstd[static_cast<size_t>(i)];
  if (gb.defined())
    for (int64_t i = 0; i < c; ++i) gb.data_ptr<scalar_t>()[i] = static_cast<scalar_t>(t.sum[static_cast<size_t>(i)]);
  if (!gx.defined()) return;
  // Pass 2: gx = (g' - (x - mean) * k - sum / n) * invstd * w, k = dotp * invstd^2 / n, as ATen's
  // training backward computes it.
  std::vector<scalar_t> k(static_cast<size_t>(c)), gm(k.size()), scale(k.size());
  for (size_t i = 0; i < k.size(); ++i) {
    const scalar_t s = t.invstd[i];
    k[i] = static_cast<scalar_t>(t.dotp[i]) * s * s / static_cast<scalar_t>(n);
    gm[i] = static_cast<scalar_t>(t.sum[i]) / static_cast<scalar_t>(n);
    scale[i] = s * t.weight[i];
  }
  scalar_t* gxp = gx.data_ptr<scalar_t>();
  if (w.by_rows) {
    const std::vector<scalar_t> mean = per_lane(t.mean, w.spread), kl = per_lane(k, w.spread),
                                gml = per_lane(gm, w.spread), sl = per_lane(scale, w.spread);
    at::parallel_for(0, w.n_rows, w.spread == 1 ? 16 : 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        input_grad_run<scalar_t, M>(gp, mask, xp, gxp, i * w.len, w.len, mean.data(), kl.data(), gml.data(),
                                    sl.data(), true);
    });
  } else {
    at::parallel_for(0, w.batch * c, 1, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        const size_t ch = static_cast<size_t>(p % c);
        input_grad_run<scalar_t, M>(gp, mask, xp, gxp, p * w.plane, w.plane, &t.mean[ch], &k[ch], &gm[ch],
                                    &scale[ch], false);
      }
    });
  }
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_act_backward(
    const at::Tensor& grad_out, const c10::optional<at::Tensor>& act, c10::optional<double> lo,
    c10::optional<double> hi, const at::Tensor& input, const c10::optional<at::Tensor>& weight, const at::Tensor& mean,
    const at::Tensor& invstd, std::array<bool, 3> output_mask) {
  TORCH_CHECK(input.dim() >= 2, "fxcpp::batch_norm_act_backward: expected an input of at least 2 dimensions, got ",
              input.dim());
  TORCH_CHECK(input.device().is_cpu(), "fxcpp::batch_norm_act_backward: CPU tensors only");
  const Walk w = walk_of(input);
  const at::Tensor x = like(input, input, w);
  const at::Tensor g = like(grad_out, x, w).to(x.scalar_type());
  const bool masked = act && act->defined();
  TORCH_CHECK(!masked || lo.has_value(), "fxcpp::batch_norm_act_backward: an activation needs its lower bound");
  const at::Tensor a = masked ? like(*act, x, w).to(x.scalar_type()) : at::Tensor();
  const int64_t c = x.size(1);
  at::Tensor gx = output_mask[0] ? at::empty_like(x) : at::Tensor();
  at::Tensor gw = output_mask[1] ? at::empty({c}, x.options()) : at::Tensor();
  at::Tensor gb = output_mask[2] ? at::empty({c}, x.options()) : at::Tensor();
  if (x.numel() == 0) {  // no values: no gradient (as ATen's)
    if (gw.defined()) gw.zero_();
    if (gb.defined()) gb.zero_();
    return {gx, gw, gb};
  }
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "fxcpp::batch_norm_act_backward", [&] {
    BackwardTerms<scalar_t> t{channel_values<scalar_t>(mean, c, 0, "save_mean"),
                              channel_values<scalar_t>(invstd, c, 1, "save_invstd"),
                              channel_values<scalar_t>(weight, c, 1, "weight"), std::vector<double>(c, 0.0),
                              std::vector<double>(c, 0.0)};
    const double l = lo.value_or(0), h = hi.value_or(0);
    if (!masked)
      act_backward_kernel<scalar_t, Mask::None>(g, a, l, h, x, t, gx, gw, gb, w);
    else if (!hi)
      act_backward_kernel<scalar_t, Mask::Below>(g, a, l, h, x, t, gx, gw, gb, w);
    else
      act_backward_kernel<scalar_t, Mask::Outside>(g, a, l, h, x, t, gx, gw, gb, w);
  });
  return {gx, gw, gb};
}

}  // namespace

#define FX_KERNELS_NAME(cap) FX_KERNELS_NAME_(cap)
#define FX_KERNELS_NAME_(cap) batch_norm_activation_kernels_##cap
const BatchNormActivationKernels& FX_KERNELS_NAME(CPU_CAPABILITY)() {
  static const BatchNormActivationKernels kernels{&batch_norm_apply, &batch_norm_act_backward};
  return kernels;
}

}  // namespace fx::detail
