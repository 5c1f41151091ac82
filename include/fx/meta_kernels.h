#pragma once
/// \file
/// Meta kernels fxcpp adds to libtorch 1.13: C++ shape functions for the ATen
/// operators whose Meta kernels only exist in Python
/// (torch/_meta_registrations.py, which C++ programs never load).
///
/// Why here, below the passes and the tracer: ShapeProp::propagate_meta and
/// symbolic_trace on meta tensors (TraceOptions::real_values off) both run
/// models on meta tensors and need the same kernels; they live in the
/// execution layer so both can register them. torch.fx has no counterpart
/// (Python torch has the Python registrations).

#include <string>
#include <vector>

namespace fx {

/// Registers fxcpp's C++ shape functions as Meta-dispatch-key kernels for the
/// ATen operators that have no Meta kernel in this libtorch and that common
/// models reach: aten::convolution (every conv and conv_transpose),
/// native_batch_norm (also what layer_norm, group_norm and instance_norm
/// decompose to on meta), _adaptive_avg_pool2d/3d, relu, hardtanh (relu6),
/// hardswish, index_select (embedding), channel_shuffle, and the backward
/// operators make_fx records on meta values: convolution_backward,
/// native_batch_norm_backward, _adaptive_avg_pool2d_backward,
/// hardtanh_backward, hardswish_backward. Each lays out its
/// result exactly as the CPU kernel does (channels_last included). An
/// operator that already has a Meta kernel is never replaced. Idempotent
/// and thread-safe; ShapeProp::propagate_meta() and meta traces call it. The kernels serve the whole
/// process (any meta tensor, not only ShapeProp's). Returns the operators it
/// registered (the same list on every call).
const std::vector<std::string>& register_meta_shape_functions();

}  // namespace fx
