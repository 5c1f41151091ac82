// What oneDNN can run on this CPU: its effective instruction set and which
// kernel families exist there (bf16, Winograd, int8 dot products), probed
// once by creating a small primitive of each, so that the optimiser and the
// loader choose kernels this CPU has instead of failing in a forward.
#include <fx/onednn.h>

#include "onednn/context.h"
#include "onednn/gemm_winograd.h"

#include <sstream>

namespace fx::onednn {
namespace {

using dims = dnnl::memory::dims;
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

/// Whether oneDNN makes a primitive descriptor for `make` on this CPU.
template <class Make>
bool creates(Make&& make) {
  try {
    make();
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

bool probe_bf16() {
  const auto& e = detail::engine();
  return creates([&] {
           dnnl::memory::desc src({1, 16, 8, 8}, dt::bf16, tag::nhwc), dst({1, 16, 8, 8}, dt::bf16, tag::nhwc);
           dnnl::memory::desc wei({16, 16, 3, 3}, dt::bf16, tag::any);
           dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                             src, wei, dst, {1, 1}, {1, 1}, {1, 1});
           dnnl::convolution_forward::primitive_desc(d, e);
         }) &&
         creates([&] {
           dnnl::memory::desc src({4, 16}, dt::bf16, tag::ab), wei({16, 16}, dt::bf16, tag::any),
               dst({4, 16}, dt::bf16, tag::ab);
           dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, dst), e);
         });
}

bool probe_winograd() {
  return creates([] {
    dnnl::memory::desc src({1, 16, 28, 28}, dt::f32, tag::any), dst({1, 16, 28, 28}, dt::f32, tag::any);
    dnnl::memory::desc wei({16, 16, 3, 3}, dt::f32, tag::any);
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_winograd, src,
                                      wei, dst, {1, 1}, {1, 1}, {1, 1});
    dnnl::convolution_forward::primitive_desc(d, detail::engine());
  });
}

}  // namespace

std::string cpu_isa() {
  using isa = dnnl::cpu_isa;
  switch (dnnl::get_effective_cpu_isa()) {
    case isa::sse41: return "sse41";
    case isa::avx: return "avx";
    case isa::avx2: return "avx2";
    case isa::avx2_vnni: return "avx2_vnni";
    case isa::avx512_mic: return "avx512_mic";
    case isa::avx512_mic_4ops: return "avx512_mic_4ops";
    case isa::avx512_core: return "avx512_core";
    case isa::avx512_core_vnni: return "avx512_core_vnni";
    case isa::avx512_core_bf16: return "avx512_core_bf16";
    case isa::avx512_core_amx: return "avx512_core_amx";
    default: return "any";
  }
}

bool has_avx512_core() {
  using isa = dnnl::cpu_isa;
  const isa i = dnnl::get_effective_cpu_isa();
  return i == isa::avx512_core || i == isa::avx512_core_vnni || i == isa::avx512_core_bf16 ||
         i == isa::avx512_core_amx;
}

bool has_bf16_kernels() {
  static const bool yes = probe_bf16();
  return yes;
}

bool has_winograd_kernels() {
  static const bool yes = probe_winograd();
  return yes;
}

bool has_gemm_winograd() { return detail::gemm_winograd_available(); }

bool detail::cpu_has_avx2_fma() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}

bool has_int8_dot_product() {
  using isa = dnnl::cpu_isa;
  const isa i = dnnl::get_effective_cpu_isa();
  return i == isa::avx512_core_vnni || i == isa::avx512_core_bf16 || i == isa::avx512_core_amx || i == isa::avx2_vnni;
}

std::string cpu_summary() {
  std::ostringstream os;
  os << "oneDNN ISA " << cpu_isa() << ": bf16 kernels " << (has_bf16_kernels() ? "yes" : "no") << ", Winograd "
     << (has_winograd_kernels() ? "yes" : has_gemm_winograd() ? "fxcpp's F(2x2, 3x3)" : "no")
     << ", int8 dot products (VNNI/AMX) "
     << (has_int8_dot_product() ? "yes" : "no");
  return os.str();
}

}  // namespace fx::onednn
