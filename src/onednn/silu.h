#pragma once
// Internal: SiLU (x · sigmoid(x)) over float32 memory in place, vectorised
// for AVX-512 and AVX2.
//
// oneDNN 2.6's swish post-op and ATen's silu_ both divide by 1 + exp(-x):
// on an AMD EPYC Zen 5 (1 thread) they run at 2.0-2.6 G values/s, so that
// in efficientnet_b0's 1×1 convolution [1, 16, 112, 112] → 96 the fused
// swish took 0.47 of its 0.65 ms (0.18 ms without it). This kernel computes
// sigmoid from exp(-|x|) (a degree-5 polynomial, silu.cpp) and its
// reciprocal by rcp and one Newton step: there, 6.3 G values/s in AVX-512
// and 2.8 in AVX2 (a loop over 400K values in L2), within 3.8e-7 of
// x / (1 + exp(-x)) relatively (1.4e-6 absolutely) over every 37th float of
// [-100, 100]. Where it runs instead of the fused post-op:
// PackedConv::silu_after().
#include <cstdint>

namespace fx::onednn::detail {

/// x[i] = x[i] · sigmoid(x[i]) for i < n, in parallel (ATen's threads). The
/// AVX-512 kernel where oneDNN's effective ISA has avx512_core, else AVX2
/// with FMA where the CPU has them, else scalar. NaN stays NaN, +inf stays
/// +inf, -inf gives NaN (as torch's silu).
void silu_(float* x, int64_t n);

}  // namespace fx::onednn::detail
