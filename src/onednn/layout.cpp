// fxcpp::suggest_memory_format / fxcpp::restore_layout: the memory format a
// value had before optimize_for_inference chose channels_last for it, and a
// copy of the value in that format (see fx/passes/lower_to_onednn.h).
#include <ATen/ATen.h>
#include <torch/library.h>

namespace fx::onednn::detail {
namespace {

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
  at::Tensor out = at::empty(self.sizes(), self.options().memory_format(format));
  out.copy_(self);
  return out;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(fxcpp, m) {
  m.def("suggest_memory_format(Tensor self) -> int", &suggest_memory_format);
  m.def("restore_layout(Tensor self, int memory_format) -> Tensor", &restore_layout);
}

}  // namespace fx::onednn::detail
