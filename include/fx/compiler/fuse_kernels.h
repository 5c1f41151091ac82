// fuse_kernels: fxcpp's own compiler pass (what TorchInductor's C++ backend
// does for Python fx graphs). Chains of pointwise operators and reductions
// over the last dimension that ATen would run one tensor pass each (a
// residual add, GELU, softmax, layer norm, a normalisation's arithmetic)
// become one `fxcpp::fused_kernel` node each: a generated C++ kernel over
// at::vec::Vectorized<float> that reads its inputs once and writes only
// what leaves the group.
//
//   auto gm = fx::symbolic_trace(model);
//   fx::ShapeProp(gm).propagate_meta(inputs);    // shapes and dtypes decide the groups
//   fx::compiler::FuseReport report;
//   fx::compiler::fuse_kernels(*gm, {}, &report);
//   // %fused_kernel = fxcpp::fused_kernel([%x, %w], 'inputs 2; %2 = add(%0, %1); ...')
//
// A node's program (its second argument) is the whole kernel: the C++ is
// generated from it deterministically (kernel_source), so fx::save carries
// the kernels and a loaded graph builds them again where it runs. Kernels
// are compiled by the system's compiler and cached on disk
// (fx/compiler/kernel_cache.h); without a compiler the pass fuses nothing
// and says so in one warning.
#pragma once

#include <fx/compiler/fused_kernel.h>
#include <fx/graph_module.h>

#include <string>
#include <vector>

namespace fx::compiler {

/// What fuse_kernels may do.
struct FuseOptions {
  /// Compile every kernel while fusing (in parallel, `jobs` at a time; 0:
  /// one per hardware thread), so the first forward runs at speed and a
  /// compiler failure leaves the graph unfused. Off: kernels are compiled at
  /// their first call.
  bool compile = true;
  /// Parallel compiler jobs (0: one per hardware thread).
  int jobs = 0;
};

/// One fused group.
struct FusedGroup {
  /// The fxcpp::fused_kernel node's name.
  std::string node;
  /// The nodes it replaced, in graph order.
  std::vector<std::string> replaced;
  /// Its program.
  std::string program;
};

/// What fuse_kernels did.
struct FuseReport {
  /// Groups fused (fxcpp::fused_kernel nodes made).
  size_t groups = 0;
  /// Nodes they replaced.
  size_t fused_nodes = 0;
  /// Distinct kernels (programs) among the groups.
  size_t kernels = 0;
  /// Kernels the compiler built in this call; the others came from the cache.
  size_t compiled = 0;
  /// Milliseconds spent compiling (wall clock).
  double compile_ms = 0;
  /// One line each: why nothing was fused (no compiler), a group left unfused.
  std::vector<std::string> warnings;
  /// Every group.
  std::vector<FusedGroup> details;
};

/// Fuses the pointwise / reduction chains of `gm`'s graph (nodes need
/// tensor_meta: ShapeProp or the tracer's) into fxcpp::fused_kernel nodes;
/// returns how many groups it made. Float32 values only; reductions over the
/// last dimension; a group of one node is left alone (ATen's or fxcpp's
/// kernel is as good); in-place operators and nodes without shapes are never
/// fused. Recompiles `gm` when it changed.
size_t fuse_kernels(GraphModule& gm, const FuseOptions& options = {}, FuseReport* report = nullptr);

/// fuse_kernels on a graph alone (its module is recompiled by the caller).
size_t fuse_kernels(Graph& g, const FuseOptions& options = {}, FuseReport* report = nullptr);

}  // namespace fx::compiler
