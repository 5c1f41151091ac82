#include "onednn/cpu_capability.h"

#include <cstdlib>
#include <cstring>

namespace fx::detail {
namespace {

CpuCapability compute() {
  if (const char* env = std::getenv("ATEN_CPU_CAPABILITY")) {
    if (std::strcmp(env, "avx512") == 0) return CpuCapability::Avx512;
    if (std::strcmp(env, "avx2") == 0) return CpuCapability::Avx2;
    if (std::strcmp(env, "default") == 0) return CpuCapability::Default;
  }
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? CpuCapability::Avx2
                                                                          : CpuCapability::Default;
}

}  // namespace

CpuCapability aten_cpu_capability() {
  static const CpuCapability capability = compute();
  return capability;
}

const char* to_string(CpuCapability c) {
  switch (c) {
    case CpuCapability::Avx512: return "AVX512";
    case CpuCapability::Avx2: return "AVX2";
    case CpuCapability::Default: break;
  }
  return "DEFAULT";
}

}  // namespace fx::detail
