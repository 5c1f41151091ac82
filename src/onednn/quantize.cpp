// fxcpp::onednn_quantize: a float NCHW / NHWC tensor quantized to quint8 in
// channels_last by one oneDNN reorder (scale and zero point applied, layout
// changed in the same pass): the input of a network's first int8
// convolution, which ATen would quantize (a scalar loop in Debian's build,
// no FBGEMM) and then convert to channels_last in a second pass.
#include "onednn/context.h"

#include <fx/error.h>

#include <ATen/ops/_empty_affine_quantized.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/quantize_per_tensor.h>
#include <torch/library.h>

#include <cmath>
#include <tuple>

namespace fx::onednn {
namespace {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

struct Reorder {
  dnnl::reorder primitive;
  dnnl::memory::desc src, dst;
};

/// Sizes, input channels_last, scale, zero point.
using Key = std::tuple<std::vector<int64_t>, bool, double, int64_t>;

at::Tensor quantize(const at::Tensor& input, double scale, int64_t zero_point) {
  if (!(scale > 0) || !std::isfinite(scale) || zero_point < 0 || zero_point > 255)
    throw Error("onednn_quantize: the scale must be > 0 and the zero point in [0, 255], got scale " +
                std::to_string(scale) + ", zero point " + std::to_string(zero_point));
  return detail::quantize_u8(input, scale, zero_point);
}

}  // namespace

namespace detail {

at::Tensor quantize_u8(const at::Tensor& input, double scale, int64_t zero_point) {
  if (!input.defined() || input.dim() != 4 || input.scalar_type() != at::kFloat || input.is_meta())
    return at::quantize_per_tensor(input, scale, zero_point, at::kQUInt8);
  const bool channels_last = input.is_contiguous(at::MemoryFormat::ChannelsLast) && !input.is_contiguous();
  at::Tensor x = channels_last ? input : input.contiguous();
  static KernelCache<Key, Reorder> cache;
  auto r = cache.get(Key{x.sizes().vec(), channels_last, scale, zero_point}, [&] {
    dnnl::memory::dims dims(x.sizes().begin(), x.sizes().end());
    dnnl::memory::desc src(dims, dt::f32, channels_last ? tag::nhwc : tag::nchw);
    dnnl::memory::desc dst(dims, dt::u8, tag::nhwc);
    dnnl::primitive_attr attr;
    attr.set_output_scales(0, {static_cast<float>(1.0 / scale)});
    attr.set_zero_points(DNNL_ARG_DST, 0, {static_cast<int32_t>(zero_point)});
    dnnl::reorder::primitive_desc pd(engine(), src, engine(), dst, attr);
    return Reorder{dnnl::reorder(pd), src, dst};
  });
  at::Tensor out = at::_empty_affine_quantized(x.sizes(), at::TensorOptions().dtype(at::kQUInt8), scale, zero_point,
                                               at::MemoryFormat::ChannelsLast);
  dnnl::memory src = memory_of(r->src, x), dst = memory_of(r->dst, out);
  r->primitive.execute(stream(), src, dst);
  stream().wait();
  return out;
}

at::Tensor dequantize_u8(const at::Tensor& input) {
  if (!input.defined() || input.dim() != 4 || input.scalar_type() != at::kQUInt8 ||
      input.qscheme() != at::kPerTensorAffine || !input.is_contiguous(at::MemoryFormat::ChannelsLast))
    return input.dequantize();
  const double scale = input.q_scale();
  const int64_t zero_point = input.q_zero_point();
  static KernelCache<Key, Reorder> cache;
  auto r = cache.get(Key{input.sizes().vec(), true, scale, zero_point}, [&] {
    dnnl::memory::dims dims(input.sizes().begin(), input.sizes().end());
    dnnl::memory::desc src(dims, dt::u8, tag::nhwc);
    dnnl::memory::desc dst(dims, dt::f32, tag::nhwc);
    dnnl::primitive_attr attr;
    attr.set_output_scales(0, {static_cast<float>(scale)});
    attr.set_zero_points(DNNL_ARG_SRC, 0, {static_cast<int32_t>(zero_point)});
    dnnl::reorder::primitive_desc pd(engine(), src, engine(), dst, attr);
    return Reorder{dnnl::reorder(pd), src, dst};
  });
  at::Tensor out =
      at::empty(input.sizes(), input.options().dtype(at::kFloat).memory_format(at::MemoryFormat::ChannelsLast));
  dnnl::memory src = memory_of(r->src, input), dst = memory_of(r->dst, out);
  r->primitive.execute(stream(), src, dst);
  stream().wait();
  return out;
}

}  // namespace detail

TORCH_LIBRARY_FRAGMENT(fxcpp, m) {
  m.def("onednn_quantize(Tensor input, float scale, int zero_point) -> Tensor", &quantize);
}

}  // namespace fx::onednn
