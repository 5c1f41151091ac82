#pragma once
// Internal: block_activations (optimize_for_inference, after lower_to_onednn).
//
// Below AVX-512, oneDNN 2.6's convolutions are its AVX2 JIT kernels, whose
// own layout is nChw8c (eight channels innermost). They take channels_last
// too, but read it worse from memory: on an AMD EPYC Zen 3 (1 thread,
// batch 1, its caches holding another model's data as in any interleaved
// run) resnet18's 56x56x64 3x3 convolutions took 1.68x their nChw8c time,
// the 28x28x128 ones 1.38x, the stem's max pool 1.59x, the 7x7 ones the
// same; a reorder in and out around each kernel cost what it saved. So a
// run of convolutions hands its activations on in nChw8c: as a contiguous
// 5-d tensor [N, C/8, H, W, 8], which nothing but these kernels reads.
//
// A value is blocked when it is the float output of fxcpp::onednn_conv2d
// (C a multiple of 8) whose input is blocked or has fewer than 8 channels
// (the stem: NCHW into nChw8c has a JIT kernel) and whose residual, if any,
// is blocked; or of fxcpp::max_pool2d of a blocked value. Every other
// reader of a blocked value gets fxcpp::from_blocked(value): the
// channels_last 4-d value it read before. A run of blocked kernels stays
// only where one of its convolutions writes at least 28x28 pixels (the
// sizes that pay) and more values cross blocked from kernel to kernel than
// leave it through from_blocked (each exit is a reorder).
#include <fx/graph.h>

#include <cstddef>

namespace fx::passes_detail {

/// Rewrites `g` as above (tensor_meta needed: without it nothing changes);
/// returns how many convolutions write blocked activations.
size_t block_activations(Graph& g);

}  // namespace fx::passes_detail
