// time_linear: oneDNN's linear kernel against ATen's (BLAS) on one shape,
// on this CPU (see fx/onednn.h). lower_to_onednn asks it where the answer
// depends on the CPU (oneDNN below AVX-512), and blas_has_own_threads
// whether it may ask on more than one thread.
#include "onednn/context.h"
#include "onednn/packed_ops.h"

#include <fx/error.h>

#include <ATen/core/Generator.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/randn.h>

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <limits>

namespace fx::onednn {

bool blas_has_own_threads() {
  static const bool own = [] {
    // OpenBLAS's openblas_get_parallel: 0 sequential, 1 its own pthreads, 2 OpenMP's.
    using GetParallel = int (*)();
    auto get = reinterpret_cast<GetParallel>(dlsym(RTLD_DEFAULT, "openblas_get_parallel"));
    return get && get() == 1;
  }();
  return own;
}

LinearTiming time_linear(const at::Tensor& weight, const c10::optional<at::Tensor>& bias, const PostOps& post_ops,
                         at::IntArrayRef input_sizes) {
  if (!weight.defined() || weight.dim() != 2 || weight.scalar_type() != at::kFloat)
    throw Error("time_linear: the weight must be a float32 tensor [out_features, in_features]");
  if (input_sizes.empty() || input_sizes.back() != weight.size(1))
    throw Error("time_linear: an input of " + detail::sizes_str(input_sizes) + " does not fit a weight of " +
                detail::sizes_str(weight.sizes()));
  // A generator of its own: timing leaves the global random state alone.
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(0);
  const at::Tensor x = at::randn(input_sizes, gen, weight.options());
  std::vector<int64_t> out_sizes = input_sizes.vec();
  out_sizes.back() = weight.size(0);
  const c10::optional<at::Tensor> residual =
      post_ops.sum ? c10::optional<at::Tensor>(at::randn(out_sizes, gen, weight.options())) : c10::nullopt;
  PostOps fused = post_ops;
  fused.residual_inplace = false;  // the residual is read again by every round
  const c10::IValue packed = pack_linear(weight, bias, fused, c10::ScalarType::Float);
  const auto& linear = *packed.toCustomClass<detail::PackedLinear>();

  auto run_onednn = [&] { return linear.run(x, residual); };
  auto run_aten = [&] {
    at::Tensor y = at::linear(x, weight, bias);
    if (residual) y.add_(*residual);
    return detail::apply_activation(y, post_ops);
  };
  auto ms = [](auto&& run) {
    const auto start = std::chrono::steady_clock::now();
    run();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  };
  // The first calls make the kernel and pack the weights; not timed.
  run_onednn();
  run_aten();
  LinearTiming t;
  t.onednn_ms = t.aten_ms = std::numeric_limits<double>::infinity();
  double spent = 0;
  while (t.rounds < 3 || (t.rounds < 15 && spent < 40)) {
    const double a = ms(run_onednn), b = ms(run_aten);
    t.onednn_ms = std::min(t.onednn_ms, a);
    t.aten_ms = std::min(t.aten_ms, b);
    spent += a + b;
    ++t.rounds;
  }
  return t;
}

}  // namespace fx::onednn
