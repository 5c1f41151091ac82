#pragma once
// What `fxcpp bench` says about the machine beside its timings: which BLAS
// library the process loaded, and the matmul roofline (the GFLOP/s a large
// matrix multiply reaches here), so a model's GFLOP/s can be read as a
// fraction of what the hardware does.

#include <cstdint>
#include <string>
#include <vector>

namespace fx::cli {

/// The libblas.so.3 this process loaded (/proc/self/maps).
struct BlasInfo {
  /// "openblas", "reference" (Debian's netlib build), "mkl", "blis", "atlas",
  /// "other", or "none" when no libblas.so.3 is mapped.
  std::string kind;
  /// Its resolved path ("" for none).
  std::string path;
  /// OpenBLAS's kernel set (openblas_get_corename(): "Haswell", "SkylakeX",
  /// "Prescott" ...; OPENBLAS_CORETYPE chooses it), "" for other libraries.
  std::string core;
  /// One line when OpenBLAS runs its generic Prescott (SSE3) kernels on a CPU
  /// with AVX2 (OpenBLAS 0.3.21 does not know the CPU: an Intel Xeon of
  /// family 6 model 207), naming the OPENBLAS_CORETYPE that picks fast ones;
  /// else "".
  std::string warning;
};

/// Reads /proc/self/maps for the mapped libblas.so.3 (and asks OpenBLAS its core).
BlasInfo loaded_blas();

/// One way of running an N x N x N matmul and the rate it reached.
struct MatmulRate {
  std::string dtype;  ///< "fp32" or "bf16"
  std::string path;   ///< "at::mm" (BLAS for fp32, oneDNN for bf16) or "oneDNN mkldnn_linear"
  double gflops = 0;  ///< best of the timed repetitions
  int reps = 0;       ///< timed repetitions
};

/// Times N x N x N matmuls (fp32 and bf16, through at::mm and through oneDNN's
/// inner product) on the current thread settings, each for about `seconds`
/// (at least 3 repetitions after one warm-up); the roofline of a dtype is
/// the best of its paths. A path the CPU cannot run (bf16 without AVX-512)
/// is left out.
std::vector<MatmulRate> matmul_roofline(int64_t n, double seconds);

/// The best rate of `dtype` in `rates` (0 if none).
double best_rate(const std::vector<MatmulRate>& rates, const std::string& dtype);

}  // namespace fx::cli
