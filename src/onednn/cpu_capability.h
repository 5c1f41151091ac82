// Which of ATen's kernel builds its dispatcher runs on this machine, so that
// fxcpp's own kernels (built the same ways, CMakeLists.txt's fx_cpu_kernel)
// run the same instruction set and compute what ATen's compute.
#pragma once

namespace fx::detail {

/// ATen's CPU capabilities (at::native::CPUCapability, which libtorch does not export).
enum class CpuCapability { Default, Avx2, Avx512 };

/// What at::native::get_cpu_capability() returns in libtorch 1.13:
/// ATEN_CPU_CAPABILITY when it is "default", "avx2" or "avx512"; otherwise
/// AVX2 where the CPU has AVX2 and FMA (AVX-512 is opt-in in 1.13, even on
/// CPUs that have it), else Default.
CpuCapability aten_cpu_capability();

/// "DEFAULT", "AVX2" or "AVX512".
const char* to_string(CpuCapability c);

}  // namespace fx::detail
