#pragma once
// The C++ code generator of fused kernels: a program (program.h) becomes one
// extern "C" function over ATen's at::vec::Vectorized<float>, built for the
// CPU capability ATen's own kernels run (AVX2 or AVX-512), as TorchInductor's
// C++ backend writes its kernels.
#include "kernels/program.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fx::compiler::detail {

/// The members of KernelArgs, in order: iteration dimensions (>= 1); their
/// sizes; strides (operand k's dimension d at [k * ndim + d]); each
/// operand's first element; pieces each row is cut into (1 when the program
/// reduces); elements of a piece (a multiple of the vector width; the row
/// when chunks is 1). One list, spelled out in the host's struct and, as
/// text, in every generated source's (codegen.cpp), so the two cannot differ.
#define FX_KERNEL_ARGS_MEMBERS \
  int64_t ndim;                \
  const int64_t* sizes;        \
  const int64_t* strides;      \
  char* const* data;           \
  int64_t chunks;              \
  int64_t chunk;

/// What the host passes a generated kernel. Operands are the inputs, then
/// the outputs; every operand's strides are in elements over the iteration
/// dimensions, the last of which is the row (members: FX_KERNEL_ARGS_MEMBERS).
struct KernelArgs {
  FX_KERNEL_ARGS_MEMBERS
};

/// The signature of a generated kernel: runs the work items [begin, end)
/// (item w: row w / chunks, piece w % chunks).
using KernelFn = void (*)(const KernelArgs*, int64_t begin, int64_t end);

/// A generated kernel: its symbol and its complete translation unit.
struct GeneratedKernel {
  std::string symbol;
  std::string source;
};

/// The kernel of `program_text` (deterministic: the same text, the same
/// source and symbol).
GeneratedKernel generate_kernel(const std::string& program_text);

/// The compiler flags the kernels are built with: ATen's CPU capability's
/// instruction set and at::vec width, -O3, the libtorch headers, Sleef.
const std::vector<std::string>& kernel_flags();

/// The instruction-set extensions kernel_flags lets the compiler use, as
/// /proc/cpuinfo names them: what a kernel object needs of the CPU it runs on.
const std::vector<std::string>& kernel_isa();

/// Floats a vector of the kernels holds (8 for AVX2, 16 for AVX-512).
int64_t kernel_vector_width();

}  // namespace fx::compiler::detail
