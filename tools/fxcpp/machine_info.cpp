// Loaded BLAS and matmul roofline (see machine_info.h).
#include "machine_info.h"

#include <ATen/ATen.h>

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>

namespace fx::cli {

BlasInfo loaded_blas() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    const size_t slash = line.find('/');
    if (slash == std::string::npos || line.find("/libblas.so.3", slash) == std::string::npos) continue;
    BlasInfo info{"other", line.substr(slash), "", ""};
    const std::string& p = info.path;
    if (p.find("openblas") != std::string::npos) info.kind = "openblas";
    else if (p.find("/blas/") != std::string::npos) info.kind = "reference";
    else if (p.find("mkl") != std::string::npos) info.kind = "mkl";
    else if (p.find("blis") != std::string::npos) info.kind = "blis";
    else if (p.find("atlas") != std::string::npos) info.kind = "atlas";
    if (info.kind == "openblas") {
      // An OpenBLAS extension, not in the BLAS interface: looked up, not linked.
      using CoreName = char* (*)();
      if (auto corename = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename")))
        if (const char* name = corename()) info.core = name;
      const bool avx2 = __builtin_cpu_supports("avx2"), avx512 = __builtin_cpu_supports("avx512f");
      if (info.core == "Prescott" && avx2)
        info.warning = "OpenBLAS runs its generic Prescott kernels on this CPU (it does not know the model): ATen's "
                       "float32 matmuls are slow; OPENBLAS_CORETYPE=" +
                       std::string(avx512 ? "SkylakeX" : "Haswell") + " selects its " +
                       (avx512 ? "AVX-512" : "AVX2") + " ones";
    }
    return info;
  }
  return {"none", "", "", ""};
}

namespace {

// Best GFLOP/s of `run` (one n x n x n matmul) over about `seconds`, at least 3 runs after a warm-up.
MatmulRate time_matmul(const std::string& dtype, const std::string& path, int64_t n, double seconds,
                       const std::function<void()>& run) {
  using Clock = std::chrono::steady_clock;
  run();
  MatmulRate rate{dtype, path, 0, 0};
  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  const auto start = Clock::now();
  while (rate.reps < 3 || std::chrono::duration<double>(Clock::now() - start).count() < seconds) {
    const auto t0 = Clock::now();
    run();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    rate.gflops = std::max(rate.gflops, flops / s / 1e9);
    ++rate.reps;
  }
  return rate;
}

}  // namespace

std::vector<MatmulRate> matmul_roofline(int64_t n, double seconds) {
  at::NoGradGuard no_grad;
  std::vector<MatmulRate> rates;
  const at::Tensor a = at::randn({n, n}), b = at::randn({n, n});
  for (at::ScalarType type : {at::kFloat, at::kBFloat16}) {
    const std::string dtype = type == at::kFloat ? "fp32" : "bf16";
    const at::Tensor x = a.to(type), w = b.to(type);
    try {
      rates.push_back(time_matmul(dtype, "at::mm", n, seconds, [&] { at::mm(x, w); }));
    } catch (const std::exception&) {  // no such kernel on this CPU: not part of its roofline
    }
    try {
      const at::Tensor xm = x.to_mkldnn();  // y = x w^T through oneDNN's inner product
      rates.push_back(time_matmul(dtype, "oneDNN mkldnn_linear", n, seconds, [&] { at::mkldnn_linear(xm, w); }));
    } catch (const std::exception&) {
    }
  }
  return rates;
}

double best_rate(const std::vector<MatmulRate>& rates, const std::string& dtype) {
  double best = 0;
  for (const MatmulRate& r : rates)
    if (r.dtype == dtype) best = std::max(best, r.gflops);
  return best;
}

}  // namespace fx::cli
