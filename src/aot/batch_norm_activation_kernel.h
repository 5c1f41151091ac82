// The kernels of fxcpp::batch_norm_apply / fxcpp::batch_norm_act_backward,
// one set per CPU capability (batch_norm_activation_kernel.cpp, built once
// for each by CMakeLists.txt's fx_cpu_kernel); batch_norm_activation.cpp
// registers the operators and calls the set ATen would use here.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <tuple>

namespace fx::detail {

/// The two operators' implementations, for one CPU capability.
struct BatchNormActivationKernels {
  /// fxcpp::batch_norm_apply: clamp(input * alpha + beta [+ residual], min, max).
  at::Tensor (*apply)(const at::Tensor& input, const at::Tensor& mean, const at::Tensor& invstd,
                      const c10::optional<at::Tensor>& weight, const c10::optional<at::Tensor>& bias,
                      const c10::optional<at::Tensor>& residual, c10::optional<double> min,
                      c10::optional<double> max);
  /// fxcpp::batch_norm_act_backward: native_batch_norm_backward of the masked gradient.
  std::tuple<at::Tensor, at::Tensor, at::Tensor> (*act_backward)(
      const at::Tensor& grad_out, const c10::optional<at::Tensor>& act, c10::optional<double> min,
      c10::optional<double> max, const at::Tensor& input, const c10::optional<at::Tensor>& weight,
      const at::Tensor& save_mean, const at::Tensor& save_invstd, std::array<bool, 3> output_mask);
};

/// The kernels built without vector extensions (ATen's DEFAULT capability).
const BatchNormActivationKernels& batch_norm_activation_kernels_DEFAULT();
/// The kernels built for AVX2 + FMA.
const BatchNormActivationKernels& batch_norm_activation_kernels_AVX2();
/// The kernels built for AVX-512 (F, BW, VL, DQ) + FMA.
const BatchNormActivationKernels& batch_norm_activation_kernels_AVX512();

}  // namespace fx::detail
