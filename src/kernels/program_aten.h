#pragma once
// A fused kernel's program computed with ATen's operators (program_aten.cpp):
// what fxcpp::fused_kernel runs where no C++ compiler can build the kernel
// (a saved, optimised graph loaded on a machine without one).
#include "kernels/program.h"

#include <ATen/core/Tensor.h>

#include <vector>

namespace fx::compiler::detail {

/// The values `p` returns, in its order, computed by ATen operators on
/// `inputs` broadcast to `shape` (the iteration shape, rows last): full
/// outputs of `shape`, row outputs of `shape` with the last dimension 1.
/// The same operators as the generated kernel to rounding (ATen's own
/// gelu, sigmoid, pow ...), float32 throughout.
std::vector<at::Tensor> run_program_on_aten(const Program& p, const std::vector<at::Tensor>& inputs,
                                            at::IntArrayRef shape);

}  // namespace fx::compiler::detail
