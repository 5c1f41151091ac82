#pragma once
// Internal: a float32 matrix-vector product for the linear layers of one
// row below AVX-512 (a classifier's head at batch 1).
//
// For a single row oneDNN's packed sgemm (packed_gemm.h) streams the
// weights through its panel kernel as it would for many rows; the product
// is bound by reading the weights once, which a dot product per output
// does at the memory's pace. Measured on an AMD EPYC Zen 5 held at AVX2,
// caches flushed before each call, packed sgemm → this: [1, 1280] → 1000
// 0.201 → 0.149 ms on 1 thread, 0.095 → 0.079 on 2; [1, 2048] → 1000 0.333
// → 0.227 and 0.141 → 0.112. (With the weights in L1 and L2 the packed
// sgemm is the faster on one thread, 0.065 against 0.077 ms: a model's
// head is not there.) In the models, per-node medians of `fxcpp profile`:
// docs/optimize.md. A software prefetch 2 or 4 KB ahead did not help.
#include <cstdint>

namespace fx::onednn::detail {

/// y[i] = Σ_k w[i, k] · x[k] + beta · y[i] for i < n, `w` [n, k] row-major;
/// `beta` 0 or 1 (0: y's old values are not read). Parallel over the rows
/// of `w` on ATen's threads; AVX2 with FMA where the CPU has them.
void gemv(const float* w, int64_t n, int64_t k, const float* x, float* y, float beta);

}  // namespace fx::onednn::detail
