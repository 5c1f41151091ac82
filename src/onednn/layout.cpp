// fxcpp::suggest_memory_format / fxcpp::restore_layout: the memory format a
// value had before optimize_for_inference chose channels_last for it, and a
// copy of the value in that format (see fx/optimize/lower_to_onednn.h);
// copy_in_format, the oneDNN reorder both directions use.
// fxcpp::to_blocked / fxcpp::from_blocked: a 4-d value into oneDNN's nChw8c
// layout ([N, C/8, H, W, 8]) and back to channels_last, where
// block_activations starts and ends a run of blocked kernels.
#include "onednn/packed_ops.h"

#include <fx/error.h>

#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace fx::onednn::detail {
namespace {

/// Sizes, source strides, destination strides, dtype.
using ReorderKey = std::tuple<std::vector<int64_t>, std::vector<int64_t>, std::vector<int64_t>, c10::ScalarType>;

struct LayoutReorder {
  dnnl::reorder primitive;
  dnnl::memory::desc from, to;
};

/// The memory format eager ATen gives a convolution's output for this input
/// (contiguous weights): channels_last for a channels_last input, else contiguous.
int64_t suggest_memory_format(const at::Tensor& self) {
  return static_cast<int64_t>(self.suggest_memory_format());
}

/// A new tensor with self's values and the canonical strides of
/// `memory_format` (channels_last only for 4-d values; others contiguous), as
/// the unoptimised program's ATen ops made them.
at::Tensor restore_layout(const at::Tensor& self, int64_t memory_format) {
  auto format = static_cast<c10::MemoryFormat>(memory_format);
  if (format != c10::MemoryFormat::ChannelsLast || self.dim() != 4) format = c10::MemoryFormat::Contiguous;
  return copy_in_format(self, format);
}

}  // namespace

at::Tensor copy_in_format(const at::Tensor& src, at::MemoryFormat format) {
  at::Tensor out = at::empty(src.sizes(), src.options().memory_format(format));
  const c10::ScalarType t = src.scalar_type();
  if (src.dim() != 4 || src.is_meta() || !src.device().is_cpu() || src.numel() == 0 ||
      (t != at::kFloat && t != at::kBFloat16) || !src.is_non_overlapping_and_dense()) {
    out.copy_(src);
    return out;
  }
  static KernelCache<ReorderKey, LayoutReorder> cache;
  auto r = cache.get({src.sizes().vec(), src.strides().vec(), out.strides().vec(), t}, [&] {
    LayoutReorder k{{}, strided_desc(src), strided_desc(out)};
    k.primitive = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), k.from, engine(), k.to));
    return k;
  });
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_FROM, memory_of(r->from, src)},
                                             {DNNL_ARG_TO, memory_of(r->to, out)}};
  execute(r->primitive, args, 0);
  return out;
}

std::vector<int64_t> blocked_sizes(at::IntArrayRef s) {
  return {s[0], s[1] / 8, s[2], s[3], 8};
}

std::vector<int64_t> unblocked_sizes(const at::Tensor& t, const char* op) {
  if (!t.defined() || t.dim() != 5 || t.size(4) != 8)
    throw Error(std::string(op) + ": expected a blocked tensor [N, C/8, H, W, 8], got " +
                (t.defined() ? sizes_str(t.sizes()) : std::string("None")));
  return {t.size(0), t.size(1) * 8, t.size(2), t.size(3)};
}

dnnl::memory::desc layout_desc(at::IntArrayRef s, dnnl::memory::data_type dt, Layout layout) {
  using format = dnnl::memory::format_tag;
  const format t = layout == Layout::Blocked ? format::nChw8c : layout == Layout::Nhwc ? format::nhwc : format::nchw;
  return dnnl::memory::desc(dnnl::memory::dims(s.begin(), s.end()), dt, t);
}

namespace {

/// One oneDNN reorder of a float [N, C, H, W] value between two layouts, cached per sizes.
void reorder_layout(const at::Tensor& from, Layout from_layout, const at::Tensor& to, Layout to_layout,
                    at::IntArrayRef nchw) {
  using Key = std::tuple<std::vector<int64_t>, Layout, Layout>;
  static KernelCache<Key, LayoutReorder> cache;
  auto r = cache.get({nchw.vec(), from_layout, to_layout}, [&] {
    const auto f32 = dnnl::memory::data_type::f32;
    LayoutReorder k{{}, layout_desc(nchw, f32, from_layout), layout_desc(nchw, f32, to_layout)};
    k.primitive = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), k.from, engine(), k.to));
    return k;
  });
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_FROM, memory_of(r->from, from)},
                                             {DNNL_ARG_TO, memory_of(r->to, to)}};
  execute(r->primitive, args, 0);
}

/// A float [N, C, H, W] value (C a multiple of 8) as a blocked [N, C/8, H, W, 8] tensor.
at::Tensor to_blocked(const at::Tensor& self) {
  if (!self.defined() || self.dim() != 4 || self.size(1) % 8 != 0 || self.scalar_type() != at::kFloat)
    throw Error("to_blocked: expected a float32 tensor [N, C, H, W] with C a multiple of 8, got " +
                (self.defined() ? sizes_str(self.sizes()) + " " + c10::toString(self.scalar_type())
                                : std::string("None")));
  at::Tensor out = at::empty(blocked_sizes(self.sizes()), self.options().memory_format(at::MemoryFormat::Contiguous));
  if (self.is_meta() || self.numel() == 0) return out;
  at::Tensor x = self;
  Layout from = Layout::Nhwc;
  if (self.is_contiguous()) from = Layout::Nchw;
  else if (!self.is_contiguous(at::MemoryFormat::ChannelsLast)) x = copy_in_format(self, at::MemoryFormat::ChannelsLast);
  reorder_layout(x, from, out, Layout::Blocked, self.sizes());
  return out;
}

/// A blocked [N, C/8, H, W, 8] tensor as the channels_last [N, C, H, W] value it holds.
at::Tensor from_blocked(const at::Tensor& self) {
  const std::vector<int64_t> nchw = unblocked_sizes(self, "from_blocked");
  if (self.scalar_type() != at::kFloat)
    throw Error(std::string("from_blocked: expected a float32 tensor, got ") + c10::toString(self.scalar_type()));
  at::Tensor out = at::empty(nchw, self.options().memory_format(at::MemoryFormat::ChannelsLast));
  if (self.is_meta() || self.numel() == 0) return out;
  reorder_layout(self.contiguous(), Layout::Blocked, out, Layout::Nhwc, nchw);
  return out;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(fxcpp, m) {
  m.def("suggest_memory_format(Tensor self) -> int", &suggest_memory_format);
  m.def("restore_layout(Tensor self, int memory_format) -> Tensor", &restore_layout);
  m.def("to_blocked(Tensor self) -> Tensor", &to_blocked);
  m.def("from_blocked(Tensor self) -> Tensor", &from_blocked);
}

}  // namespace fx::onednn::detail
