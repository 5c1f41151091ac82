// fxcpp::suggest_memory_format / fxcpp::restore_layout: the memory format a
// value had before optimize_for_inference chose channels_last for it, and a
// copy of the value in that format (see fx/optimize/lower_to_onednn.h);
// copy_in_format, the oneDNN reorder both directions use.
#include "onednn/context.h"

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

TORCH_LIBRARY_FRAGMENT(fxcpp, m) {
  m.def("suggest_memory_format(Tensor self) -> int", &suggest_memory_format);
  m.def("restore_layout(Tensor self, int memory_format) -> Tensor", &restore_layout);
}

}  // namespace fx::onednn::detail
