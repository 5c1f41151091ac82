#pragma once
// Shared by `fxcpp run --optimize` and `fxcpp bench`: fx::optimize_for_inference
// prepared for the command's inputs, and its report as one line.

#include <fx/graph_module.h>
#include <fx/optimize/optimize_for_inference.h>

#include <memory>
#include <string>
#include <vector>

namespace fx::cli {

/// fx::optimize_for_inference(gm) with `inputs` as example inputs, in fp32 or
/// (bf16) bfloat16; fills `report`. Its first forward (on `inputs`) runs
/// once `gm` is released: a caller that moves its only reference in frees
/// the original parameters before the weights are packed (lower peak
/// memory); report->optimize_ms includes that forward. `plan_memory`,
/// `winograd`, `linear`, `blocked`, `fuse`: OptimizeOptions::plan_memory, ::winograd, ::linear_kernel,
/// ::blocked_activations, ::fuse_kernels.
std::shared_ptr<GraphModule> optimize_model(std::shared_ptr<GraphModule> gm, const std::vector<c10::IValue>& inputs,
                                            bool bf16, OptimizeReport* report, bool plan_memory = true,
                                            bool winograd = true, LinearKernel linear = LinearKernel::Auto,
                                            bool blocked = true, bool fuse = true);

/// "optimised in 12.3 ms: 71 -> 50 nodes; 20 modules frozen, ..., float32
/// kernels (avx512_core)" (one line).
std::string report_line(const OptimizeReport& r);

/// One line per distinct shape whose linear kernel was timed
/// (OptimizeReport::linear_choices): "linear [1, 197, 768] -> 3072 (12
/// layers): oneDNN 25.80 ms, ATen 13.60 ms: ATen (BLAS)". None on AVX-512.
std::vector<std::string> linear_choice_lines(const OptimizeReport& r);

/// The --linear-kernel option's value (default auto); fx::Error for another name.
LinearKernel linear_kernel_option(const std::string& value);

/// Prints each of r.warnings (what could not be done on this CPU, e.g. bf16
/// without bf16 kernels) as "fxcpp COMMAND: warning: ..." on stderr.
void print_warnings(const char* command, const OptimizeReport& r);

}  // namespace fx::cli
