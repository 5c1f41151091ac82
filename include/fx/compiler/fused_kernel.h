// fxcpp::fused_kernel: the operator fuse_kernels' nodes call, and the
// kernels it runs (the fxcpp_kernels layer: what a program that only loads
// and runs an optimised file needs, without the fusion pass).
//
// A node's program (its second argument) is the whole kernel: its C++ is
// generated from the text deterministically (kernel_source). The first call
// of a program gets the kernel's function, first found of:
//   1. a kernel object carried by the loaded file (fx::save with
//      SaveOptions::kernel_objects, `fxcpp optimize --aot`) when it was built
//      from the same source for instructions this CPU has;
//   2. the kernel cache: compiled by the system's compiler once per machine
//      (fx/compiler/kernel_cache.h);
//   3. no compiler: the program computed with ATen's operators (the same
//      values), with one warning line.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

namespace fx::compiler {

/// The C++ translation unit of a fused_kernel node's program (as compiled).
std::string kernel_source(const std::string& program);

/// Runs a program on its inputs as a fused_kernel node does (building its
/// kernel if needed); its outputs in the program's order.
std::vector<at::Tensor> run_kernel(const std::string& program, const std::vector<at::Tensor>& inputs);

/// Whether fused kernels can be built here (the system's compiler runs).
bool can_compile_kernels();

/// Builds (or finds) the kernels of `programs` now, the missing ones
/// compiled `jobs` at a time (0: one per hardware thread), and keeps them for
/// the process; returns how many the compiler built. Throws fx::Error (one
/// line, the first failure) when a kernel cannot be built.
size_t prepare_kernels(const std::vector<std::string>& programs, int jobs = 0);

/// Where the process's function for a program came from.
enum class KernelOrigin {
  /// The program has not run, nor been prepared, in this process.
  None,
  /// Compiled from its source here, or found in the kernel cache.
  Source,
  /// A kernel object a loaded file carried.
  Object,
  /// No compiler and no object: computed with ATen's operators.
  Aten,
};

/// Where the function `program` runs on came from (KernelOrigin::None before its first use).
KernelOrigin kernel_origin(const std::string& program);

/// A compiled kernel as a file carries it: the shared object the kernel
/// cache built from a program's source, and what it needs to run.
struct KernelObject {
  /// The hash of the C++ it was built from (kernel_source_hash): it is used
  /// only where this build of fxcpp generates the same source for the program.
  std::string source_hash;
  /// The extern "C" function in it.
  std::string symbol;
  /// The first line of the compiler's `--version` that built it.
  std::string compiler;
  /// The instruction-set extensions its code may use, as /proc/cpuinfo names them ("avx512f", "fma" ...).
  std::vector<std::string> isa;
  /// The ELF shared object.
  std::string bytes;
};

/// The hash of a kernel's C++ (32 hex digits) that KernelObject::source_hash holds.
std::string kernel_source_hash(const std::string& source);

/// The object of `program`'s kernel, compiled by the kernel cache if it has
/// not been. Throws fx::Error in one line when no compiler runs here.
KernelObject kernel_object(const std::string& program);

/// The instruction-set extensions of this CPU (/proc/cpuinfo's flags).
const std::vector<std::string>& cpu_isa();

/// Why `object` cannot run on this CPU ("it uses avx512bw, which this CPU
/// lacks"); empty when it can.
std::string object_mismatch(const KernelObject& object);

/// Makes `object` the function of the kernel whose source it was built
/// from, for a program's first use in this process (a loaded file's
/// objects). An object for another CPU is not taken: returns
/// object_mismatch's reason, else empty. One that fails to load at first use
/// (a damaged object, a missing library) leaves its kernel to the compiler,
/// or to ATen, with one warning line.
std::string offer_kernel_object(KernelObject object);

}  // namespace fx::compiler
