// Weight-only quantized linear layers (include/fx/decoders/weight_only.h):
// packing, the float reference, argument checks, the product's driver (the
// kernels are in weight_only_kernels.cpp) and the fxcpp::linear_weight_only
// operator.
//
// The driver quantizes the activation rows once, then splits the output
// features among the threads; each thread takes its weight rows in blocks of
// ~32 KB and passes over each block once per tile of 4 activation rows, so a
// weight byte comes from memory once per call and from L2 once per tile.
#include <fx/decoders/weight_only.h>

#include "decoders/weight_only_kernels.h"

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <torch/library.h>

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>

namespace fx::decoders {
namespace weight_only_api {

using detail::WeightOnlyIsa;

[[noreturn]] void fail(const std::string& who, const std::string& what) { throw Error(who + ": " + what); }

void check_scheme(const std::string& who, const WeightOnlyScheme& s) {
  if (s.bits != 8 && s.bits != 4) fail(who, c10::str("bits is ", s.bits, ", expected 8 or 4"));
  const int64_t g = s.group_size;
  if (g != 0 && g != 32 && g != 64 && g != 128)
    fail(who, c10::str("group_size is ", g, ", expected 0 (one scale per output channel), 32, 64 or 128"));
  if (s.bits == 4 && g == 0) fail(who, "int4 needs a group_size of 32, 64 or 128, got 0 (per channel)");
}

void check_group_divides(const std::string& who, const WeightOnlyScheme& s, int64_t k) {
  if (s.group_size && k % s.group_size)
    fail(who, c10::str("group_size ", s.group_size, " does not divide in_features ", k));
}

int64_t groups_of(const WeightOnlyScheme& s, int64_t k) { return s.group_size ? k / s.group_size : 1; }

void check_tensor(const std::string& who, const char* name, const at::Tensor& t, at::ScalarType dtype,
                  at::IntArrayRef sizes) {
  if (!t.defined()) fail(who, c10::str("the packed weight's ", name, " is undefined"));
  if (t.scalar_type() != dtype || t.sizes() != sizes)
    fail(who, c10::str("the packed weight's ", name, " is ", t.scalar_type(), " ", t.sizes(), ", expected ", dtype,
                       " ", sizes));
}

/// The packed weight's tensors agree with its scheme and shape.
void check_packed(const std::string& who, const PackedWeightOnly& w) {
  check_scheme(who, w.scheme);
  const int64_t n = w.out_features, k = w.in_features;
  if (n < 0 || k < 1) fail(who, c10::str("the packed weight is ", n, " x ", k, ", expected in_features >= 1"));
  check_group_divides(who, w.scheme, k);
  const int64_t groups = groups_of(w.scheme, k);
  if (w.scheme.bits == 8)
    check_tensor(who, "data", w.data, at::kChar, {n, k});
  else
    check_tensor(who, "data", w.data, at::kByte, {n, k / 2});
  check_tensor(who, "scales", w.scales, at::kFloat, {n, groups});
  if (w.scheme.symmetric && w.zeros.defined()) fail(who, "the scheme is symmetric but zeros is defined");
  if (!w.scheme.symmetric) {
    if (!w.zeros.defined()) fail(who, "the scheme is asymmetric but zeros is undefined");
    check_tensor(who, "zeros", w.zeros, at::kFloat, {n, groups});
  }
}

/// x's checks: defined, floating, [..., K]; bias [N] floating.
void check_inputs(const std::string& who, const at::Tensor& x, const PackedWeightOnly& w,
                  const c10::optional<at::Tensor>& bias) {
  if (!x.defined()) fail(who, "x is undefined");
  if (!at::isFloatingType(x.scalar_type())) fail(who, c10::str("x is ", x.scalar_type(), ", expected a floating dtype"));
  if (x.dim() == 0) fail(who, c10::str("x is a scalar, expected [..., ", w.in_features, "]"));
  if (x.size(-1) != w.in_features)
    fail(who, c10::str("x's last dimension is ", x.size(-1), ", the weight's in_features ", w.in_features));
  if (bias && bias->defined() &&
      (!at::isFloatingType(bias->scalar_type()) || bias->dim() != 1 || bias->size(0) != w.out_features))
    fail(who, c10::str("bias is ", bias->scalar_type(), " ", bias->sizes(), ", expected a floating [",
                       w.out_features, "]"));
}

detail::WeightOnlyView view_of(const PackedWeightOnly& w) {
  detail::WeightOnlyView v;
  v.bits = w.scheme.bits;
  v.n = w.out_features;
  v.k = w.in_features;
  v.data = static_cast<const uint8_t*>(w.data.data_ptr());
  v.row_bytes = w.scheme.bits == 8 ? w.in_features : w.in_features / 2;
  v.scales = w.scales.data_ptr<float>();
  v.zeros = w.zeros.defined() ? w.zeros.data_ptr<float>() : nullptr;
  v.groups = groups_of(w.scheme, w.in_features);
  v.group_blocks = w.scheme.group_size / 32;
  v.group_shift = v.group_blocks == 4 ? 2 : v.group_blocks == 2 ? 1 : v.group_blocks == 1 ? 0 : 62;
  return v;
}

/// When run() takes the prompt kernel (weight_only_gemm): from
/// kWeightOnlyGemmMinRows rows on a VNNI CPU, never, or for any rows.
enum class Gemm { Auto, Never, Always };

at::Tensor run(WeightOnlyIsa isa, Gemm gemm, const std::string& who, const at::Tensor& x,
               const PackedWeightOnly& packed, const c10::optional<at::Tensor>& bias) {
  check_packed(who, packed);
  check_inputs(who, x, packed, bias);
  std::vector<int64_t> out_sizes = x.sizes().vec();
  out_sizes.back() = packed.out_features;
  const bool has_bias = bias && bias->defined();
  if (x.is_meta() || packed.data.is_meta() || packed.scales.is_meta() || (has_bias && bias->is_meta()))
    return at::empty(out_sizes, x.options().device(at::kMeta));
  // Contiguous tensors (no copy when they are already, as packing makes them).
  PackedWeightOnly w = packed;
  w.data = w.data.contiguous();
  w.scales = w.scales.contiguous();
  if (w.zeros.defined()) w.zeros = w.zeros.contiguous();
  const int64_t k = w.in_features, n = w.out_features, rows = x.numel() / k;
  const at::Tensor x2 = x.reshape({rows, k}).to(at::kFloat).contiguous();
  const at::Tensor b = has_bias ? bias->to(at::kFloat).contiguous() : at::Tensor();
  at::Tensor out = at::empty({rows, n}, x.options().dtype(at::kFloat));
  const bool prompt = isa == WeightOnlyIsa::Avx512Vnni &&
                      (gemm == Gemm::Always || (gemm == Gemm::Auto && rows >= detail::kWeightOnlyGemmMinRows));
  if (rows > 0 && n > 0 && prompt) {
    const detail::WeightOnlyView v = view_of(w);
    // Activations in K's order (the AVX2 kernels' layout), each panel of 16
    // channels unpacked once and run against all of them.
    const detail::WeightOnlyActivations a =
        detail::quantize_activations(WeightOnlyIsa::Avx2, v, x2.data_ptr<float>(), rows, k);
    float* y = out.data_ptr<float>();
    const float* bp = has_bias ? b.data_ptr<float>() : nullptr;
    at::parallel_for(0, (n + 15) / 16, 1, [&](int64_t begin, int64_t end) {
      detail::weight_only_gemm(v, a, begin * 16, std::min(n, end * 16), bp, y, n);
    });
  } else if (rows > 0 && n > 0) {
    const detail::WeightOnlyView v = view_of(w);
    const detail::WeightOnlyActivations a = detail::quantize_activations(isa, v, x2.data_ptr<float>(), rows, k);
    float* y = out.data_ptr<float>();
    const float* bp = has_bias ? b.data_ptr<float>() : nullptr;
    // Weight rows per block: ~32 KB, so that a block stays in L2 across the tiles of activation rows.
    const int64_t block = std::max<int64_t>(1, 32768 / v.row_bytes);
    // At least 64K multiply-adds per task: a small product stays on the calling thread.
    const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / (k * rows));
    at::parallel_for(0, n, grain, [&](int64_t begin, int64_t end) {
      for (int64_t n0 = begin; n0 < end; n0 += block) {
        const int64_t n1 = std::min(end, n0 + block);
        for (int64_t r0 = 0; r0 < rows; r0 += detail::kWeightOnlyTile)
          detail::weight_only_tile(isa, v, a, r0, std::min(detail::kWeightOnlyTile, rows - r0), n0, n1, bp,
                                   y + r0 * n, n);
      }
    });
  }
  out = out.view(out_sizes);
  return x.scalar_type() == at::kFloat ? out : out.to(x.scalar_type());
}

WeightOnlyIsa isa_named(const std::string& who, const std::string& name) {
  if (name == "avx512-vnni-gemm") return isa_named(who, "avx512-vnni");
  for (WeightOnlyIsa isa : {WeightOnlyIsa::Avx512Vnni, WeightOnlyIsa::Avx2, WeightOnlyIsa::Scalar}) {
    if (name != detail::weight_only_isa_name(isa)) continue;
    if (!detail::weight_only_isa_supported(isa)) fail(who, "this CPU cannot run the " + name + " kernel");
    return isa;
  }
  fail(who, "unknown kernel '" + name + "', expected avx512-vnni, avx512-vnni-gemm, avx2 or scalar");
}

/// One group's scale, zero point and integer values (see pack_weight_only's comment).
struct GroupQuantizer {
  int bits;
  bool symmetric;
  int32_t qmin, qmax;

  explicit GroupQuantizer(const WeightOnlyScheme& s)
      : bits(s.bits), symmetric(s.symmetric), qmin(s.symmetric || s.bits == 8 ? -(1 << (s.bits - 1)) : 0),
        qmax(qmin + (1 << s.bits) - 1) {}

  /// Scale and zero point of w[0, len): the scale is 0 for an all-zero group, NaN for a non-finite one.
  std::pair<float, float> params(const float* w, int64_t len) const {
    float lo = 0, hi = 0;
    bool finite = true;
    for (int64_t i = 0; i < len; ++i) {
      lo = std::min(lo, w[i]);
      hi = std::max(hi, w[i]);
      finite = finite && std::isfinite(w[i]);
    }
    if (!finite) return {std::nanf(""), 0.f};
    if (symmetric) return {std::max(-lo / static_cast<float>(-qmin), hi / static_cast<float>(qmax)), 0.f};
    const float scale = (hi - lo) / static_cast<float>(qmax - qmin);
    if (scale == 0) return {0.f, static_cast<float>(std::max(qmin, 0))};
    return {scale, std::clamp(std::nearbyint(static_cast<float>(qmin) - lo / scale), static_cast<float>(qmin),
                              static_cast<float>(qmax))};
  }

  int32_t quantize(float w, float scale, float zero) const {
    const float q = scale == 0 ? zero : std::nearbyint(w / scale) + zero;
    return static_cast<int32_t>(std::clamp(q, static_cast<float>(qmin), static_cast<float>(qmax)));
  }
};

}  // namespace weight_only_api

namespace wo_api = weight_only_api;

at::Tensor detail::weight_stream_empty(at::IntArrayRef sizes, at::ScalarType dtype) {
  constexpr size_t kHuge = size_t{2} << 20;
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  const size_t bytes = static_cast<size_t>(numel) * c10::elementSize(dtype);
  if (bytes < kHuge) return at::empty(sizes, at::TensorOptions(dtype));
  const size_t padded = (bytes + kHuge - 1) / kHuge * kHuge;
  void* p = std::aligned_alloc(kHuge, padded);
  if (!p) throw Error("weight_stream_empty: cannot allocate " + std::to_string(padded) + " bytes");
  ::madvise(p, padded, MADV_HUGEPAGE);  // a hint: where transparent huge pages are off, 4 KB pages as before
  return at::from_blob(p, sizes, [](void* q) { std::free(q); }, at::TensorOptions(dtype));
}

namespace weight_only_api {

/// pack_weight_only's checks of the scheme and the weight.
void check_weight(const std::string& who, const at::Tensor& weight, const WeightOnlyScheme& scheme) {
  check_scheme(who, scheme);
  if (!weight.defined()) fail(who, "weight is undefined");
  if (!at::isFloatingType(weight.scalar_type()))
    fail(who, c10::str("weight is ", weight.scalar_type(), ", expected a floating dtype"));
  if (weight.dim() != 2 || weight.size(1) < 1)
    fail(who, c10::str("weight has shape ", weight.sizes(), ", expected [out_features, in_features >= 1]"));
  check_group_divides(who, scheme, weight.size(1));
}

}  // namespace weight_only_api

PackedWeightOnly detail::empty_packed_weight_only(int64_t n, int64_t k, const WeightOnlyScheme& scheme) {
  wo_api::check_scheme("pack_weight_only", scheme);  // the allocation of pack_weight_only's result
  wo_api::check_group_divides("pack_weight_only", scheme, k);
  const int64_t groups = wo_api::groups_of(scheme, k);
  PackedWeightOnly p;
  p.out_features = n;
  p.in_features = k;
  p.scheme = scheme;
  p.data = weight_stream_empty({n, scheme.bits == 8 ? k : k / 2}, scheme.bits == 8 ? at::kChar : at::kByte);
  p.scales = at::empty({n, groups}, at::kFloat);
  if (!scheme.symmetric) p.zeros = at::empty({n, groups}, at::kFloat);
  return p;
}

PackedWeightOnly detail::packed_rows(const PackedWeightOnly& w, int64_t first, int64_t rows) {
  PackedWeightOnly p = w;
  p.out_features = rows;
  p.data = w.data.narrow(0, first, rows);
  p.scales = w.scales.narrow(0, first, rows);
  if (w.zeros.defined()) p.zeros = w.zeros.narrow(0, first, rows);
  return p;
}

void detail::pack_weight_only_into(const at::Tensor& weight, PackedWeightOnly& into, int64_t first_row) {
  const std::string who = "pack_weight_only";
  const WeightOnlyScheme& scheme = into.scheme;
  wo_api::check_weight(who, weight, scheme);
  const int64_t n = weight.size(0), k = weight.size(1);
  const int64_t group = scheme.group_size ? scheme.group_size : k, groups = k / group;
  if (into.out_features != n || into.in_features != k || !into.data.is_contiguous() || !into.scales.is_contiguous() ||
      (!scheme.symmetric && !into.zeros.is_contiguous()))
    wo_api::fail(who, c10::str("the packed rows to fill are ", into.out_features, " x ", into.in_features,
                               ", the weight ", weight.sizes(), " (or not contiguous)"));
  wo_api::check_packed(who, into);
  const at::Tensor w = weight.to(at::kFloat).contiguous();
  const wo_api::GroupQuantizer quantizer(scheme);
  const float* src = w.data_ptr<float>();
  uint8_t* data = static_cast<uint8_t*>(into.data.data_ptr());
  float* scales = into.scales.data_ptr<float>();
  float* zeros = scheme.symmetric ? nullptr : into.zeros.data_ptr<float>();
  std::atomic<int64_t> bad_row{-1};
  at::parallel_for(0, n, std::max<int64_t>(1, 65536 / k), [&](int64_t begin, int64_t end) {
    std::vector<int32_t> q(static_cast<size_t>(group));
    for (int64_t r = begin; r < end; ++r) {
      for (int64_t g = 0; g < groups; ++g) {
        const float* wg = src + r * k + g * group;
        auto [scale, zero] = quantizer.params(wg, group);
        for (int64_t seen = bad_row.load(); !std::isfinite(scale) && (seen < 0 || r < seen);)
          bad_row.compare_exchange_weak(seen, r);  // the first such row
        scales[r * groups + g] = scale;
        if (zeros) zeros[r * groups + g] = zero;
        // Symmetric int4 keeps q + 8 (0..15), as llama.cpp's Q4_0.
        const int32_t offset = scheme.bits == 4 && scheme.symmetric ? 8 : 0;
        for (int64_t i = 0; i < group; ++i) q[i] = quantizer.quantize(wg[i], scale, zero) + offset;
        if (scheme.bits == 8) {
          for (int64_t i = 0; i < group; ++i) data[r * k + g * group + i] = static_cast<uint8_t>(int8_t(q[i]));
        } else {
          // Per block of 32: byte j holds weight j (low nibble) and weight j + 16 (high nibble).
          uint8_t* out = data + (r * k + g * group) / 2;
          for (int64_t b = 0; b < group / 32; ++b)
            for (int64_t j = 0; j < 16; ++j)
              out[b * 16 + j] = static_cast<uint8_t>(q[b * 32 + j] | (q[b * 32 + j + 16] << 4));
        }
      }
    }
  });
  if (bad_row >= 0)
    wo_api::fail(who, c10::str("weight's row ", first_row + bad_row.load(), " has a non-finite value"));
}

PackedWeightOnly pack_weight_only(const at::Tensor& weight, const WeightOnlyScheme& scheme) {
  wo_api::check_weight("pack_weight_only", weight, scheme);
  PackedWeightOnly p = detail::empty_packed_weight_only(weight.size(0), weight.size(1), scheme);
  detail::pack_weight_only_into(weight, p);
  return p;
}

at::Tensor dequantize_weight_only(const PackedWeightOnly& w) {
  wo_api::check_packed("dequantize_weight_only", w);
  const int64_t n = w.out_features, k = w.in_features, groups = wo_api::groups_of(w.scheme, k);
  at::Tensor q;
  if (w.scheme.bits == 8) {
    q = w.data.to(at::kFloat);
  } else {
    // [n, k / 32, 16] bytes -> their low nibbles then their high ones: K's order.
    const at::Tensor bytes = w.data.reshape({n, k / 32, 16});
    q = at::cat({at::bitwise_and(bytes, 15), at::bitwise_right_shift(bytes, 4)}, -1).to(at::kFloat);
  }
  q = q.reshape({n, groups, k / groups});
  const at::Tensor zero = w.zeros.defined() ? w.zeros : at::full({n, groups}, w.scheme.bits == 4 ? 8.f : 0.f);
  return ((q - zero.unsqueeze(-1)) * w.scales.unsqueeze(-1)).reshape({n, k});
}

at::Tensor linear_weight_only(const at::Tensor& x, const PackedWeightOnly& w, const c10::optional<at::Tensor>& bias) {
  return wo_api::run(detail::weight_only_best_isa(), wo_api::Gemm::Auto, "linear_weight_only", x, w, bias);
}

at::Tensor embedding_weight_only(const at::Tensor& indices, const PackedWeightOnly& packed) {
  const std::string who = "embedding_weight_only";
  wo_api::check_packed(who, packed);
  if (!indices.defined()) wo_api::fail(who, "indices is undefined");
  if (!at::isIntegralType(indices.scalar_type(), /*includeBool=*/false))
    wo_api::fail(who, c10::str("indices is ", indices.scalar_type(), ", expected an integer dtype"));
  const int64_t n = packed.out_features, k = packed.in_features;
  std::vector<int64_t> out_sizes = indices.sizes().vec();
  out_sizes.push_back(k);
  if (indices.is_meta() || packed.data.is_meta() || packed.scales.is_meta())
    return at::empty(out_sizes, at::TensorOptions(at::kFloat).device(at::kMeta));
  const at::Tensor ids = indices.to(at::kLong).contiguous();
  const int64_t* id = ids.data_ptr<int64_t>();
  for (int64_t i = 0; i < ids.numel(); ++i)
    if (id[i] < 0 || id[i] >= n)
      wo_api::fail(who, c10::str("index ", id[i], " at position ", i, " is outside the table's ", n, " rows"));
  PackedWeightOnly w = packed;
  w.data = w.data.contiguous();
  w.scales = w.scales.contiguous();
  if (w.zeros.defined()) w.zeros = w.zeros.contiguous();
  const detail::WeightOnlyView v = wo_api::view_of(w);
  const int64_t group = k / v.groups;
  const float default_zero = w.scheme.bits == 4 && w.scheme.symmetric ? 8.f : 0.f;
  at::Tensor out = at::empty(out_sizes, at::kFloat);
  float* dst = out.data_ptr<float>();
  at::parallel_for(0, ids.numel(), std::max<int64_t>(1, 16384 / k), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t r = id[i];
      const uint8_t* row = v.data + r * v.row_bytes;
      float* o = dst + i * k;
      for (int64_t j = 0; j < k; ++j) {
        // int4: block b of 32 weights is 16 bytes, weight j of it in byte j % 16's low (j < 16) or high nibble.
        const float q = v.bits == 8 ? static_cast<float>(static_cast<int8_t>(row[j]))
                                    : static_cast<float>((row[j / 32 * 16 + j % 16] >> (j % 32 < 16 ? 0 : 4)) & 15);
        const int64_t g = r * v.groups + j / group;
        o[j] = (q - (v.zeros ? v.zeros[g] : default_zero)) * v.scales[g];
      }
    }
  });
  return out;
}

std::string weight_only_kernel(int bits) {
  if (bits != 8 && bits != 4) wo_api::fail("weight_only_kernel", c10::str("bits is ", bits, ", expected 8 or 4"));
  return detail::weight_only_isa_name(detail::weight_only_best_isa());
}

at::Tensor detail::linear_weight_only_with(const std::string& kernel, const at::Tensor& x, const PackedWeightOnly& w,
                                           const c10::optional<at::Tensor>& bias) {
  return wo_api::run(wo_api::isa_named("linear_weight_only_with", kernel),
                     kernel == "avx512-vnni-gemm" ? wo_api::Gemm::Always : wo_api::Gemm::Never, "linear_weight_only", x,
                     w, bias);
}

namespace weight_only_api {

/// The packed weight an operator's arguments describe (out_features: data's first dimension).
PackedWeightOnly packed_from(const at::Tensor& data, const at::Tensor& scales, const c10::optional<at::Tensor>& zeros,
                             int64_t bits, int64_t group_size, int64_t in_features) {
  PackedWeightOnly w;
  w.data = data;
  w.scales = scales;
  if (zeros && zeros->defined()) w.zeros = *zeros;
  w.out_features = data.defined() && data.dim() >= 1 ? data.size(0) : 0;
  w.in_features = in_features;
  w.scheme.bits = static_cast<int>(bits);
  w.scheme.group_size = group_size;
  w.scheme.symmetric = !w.zeros.defined();
  return w;
}

/// fxcpp::linear_weight_only.
at::Tensor linear_weight_only_op(const at::Tensor& x, const at::Tensor& data, const at::Tensor& scales,
                                 const c10::optional<at::Tensor>& zeros, int64_t bits, int64_t group_size,
                                 int64_t in_features, const c10::optional<at::Tensor>& bias) {
  return linear_weight_only(x, packed_from(data, scales, zeros, bits, group_size, in_features), bias);
}

/// fxcpp::embedding_weight_only.
at::Tensor embedding_weight_only_op(const at::Tensor& indices, const at::Tensor& data, const at::Tensor& scales,
                                    const c10::optional<at::Tensor>& zeros, int64_t bits, int64_t group_size,
                                    int64_t embedding_dim) {
  return embedding_weight_only(indices, packed_from(data, scales, zeros, bits, group_size, embedding_dim));
}

}  // namespace weight_only_api

TORCH_LIBRARY_FRAGMENT(fxcpp, m) {
  m.def("embedding_weight_only(Tensor indices, Tensor data, Tensor scales, Tensor? zeros, int bits, int group_size, "
        "int embedding_dim) -> Tensor",
        &wo_api::embedding_weight_only_op);
  m.def("linear_weight_only(Tensor x, Tensor data, Tensor scales, Tensor? zeros, int bits, int group_size, "
        "int in_features, Tensor? bias=None) -> Tensor",
        &wo_api::linear_weight_only_op);
}

}  // namespace fx::decoders
