// The operators fxcpp::batch_norm_apply and fxcpp::batch_norm_act_backward:
// a batch norm with the activation after it in one pass over memory, for
// the backward of a training step (fuse_batch_norm_activation.cpp rewrites
// graphs to use them; batch_norm_activation_kernel.cpp has the kernels and
// what they compute). Each call runs the kernels built for the capability
// ATen's own kernels run with here, so the values are ATen's.
#include "aot/batch_norm_activation_kernel.h"
#include "onednn/cpu_capability.h"

#include <torch/library.h>

namespace fx::detail {
namespace {

const BatchNormActivationKernels& kernels() {
  static const BatchNormActivationKernels* const k = [] {
    switch (aten_cpu_capability()) {
      case CpuCapability::Avx512: return &batch_norm_activation_kernels_AVX512();
      case CpuCapability::Avx2: return &batch_norm_activation_kernels_AVX2();
      case CpuCapability::Default: break;
    }
    return &batch_norm_activation_kernels_DEFAULT();
  }();
  return *k;
}

at::Tensor apply(const at::Tensor& input, const at::Tensor& mean, const at::Tensor& invstd,
                 const c10::optional<at::Tensor>& weight, const c10::optional<at::Tensor>& bias,
                 const c10::optional<at::Tensor>& residual, c10::optional<double> min, c10::optional<double> max) {
  return kernels().apply(input, mean, invstd, weight, bias, residual, min, max);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> act_backward(
    const at::Tensor& grad_out, const c10::optional<at::Tensor>& act, c10::optional<double> min,
    c10::optional<double> max, const at::Tensor& input, const c10::optional<at::Tensor>& weight,
    const at::Tensor& save_mean, const at::Tensor& save_invstd, std::array<bool, 3> output_mask) {
  return kernels().act_backward(grad_out, act, min, max, input, weight, save_mean, save_invstd, output_mask);
}

TORCH_LIBRARY_FRAGMENT(fxcpp, m) {
  m.def(
      "batch_norm_apply(Tensor input, Tensor mean, Tensor invstd, Tensor? weight, Tensor? bias, Tensor? residual=None, "
      "float? min=None, float? max=None) -> Tensor",
      &apply);
  m.def(
      "batch_norm_act_backward(Tensor grad_out, Tensor? act, float? min, float? max, Tensor input, Tensor? weight, "
      "Tensor save_mean, Tensor save_invstd, bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
      &act_backward);
}

}  // namespace
}  // namespace fx::detail
