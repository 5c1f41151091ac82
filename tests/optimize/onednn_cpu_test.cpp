// What oneDNN can run on this CPU (fx/onednn.h: cpu_isa, has_bf16_kernels,
// has_winograd_kernels, has_int8_dot_product) and what fxcpp does with the
// answer: bf16 packed operators only where oneDNN has bf16 kernels, a bf16
// state (a file optimised on an AVX-512 CPU) packed as float32 elsewhere.
// Every expectation is keyed by the answer, and ctest runs this file three
// times (tests/optimize/isa.cmake): on the machine's own ISA, held at AVX2, and
// on an emulated AVX2-only CPU, so an AVX-512 machine exercises both branches.
// FX_EXPECT_ONEDNN_ISA (set by the last two) is the ISA the run must see.
#include "../passes/passes_test_util.h"
#include "optimize_test_util.h"

#include <fx/onednn.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

namespace {

using fx_test::error_of;
using optimize_test::relative_error;

at::Tensor run_conv(const c10::IValue& packed, const at::Tensor& x) {
  return optimize_test::call_boxed("fxcpp::onednn_conv2d", {x, packed, c10::IValue(), false});
}

TEST(OnednnCpu, NamesTheIsaAndWhatItHas) {
  const std::set<std::string> known{"sse41", "avx", "avx2", "avx2_vnni", "avx512_mic", "avx512_mic_4ops",
                                    "avx512_core", "avx512_core_vnni", "avx512_core_bf16", "avx512_core_amx"};
  const std::string isa = fx::onednn::cpu_isa();
  EXPECT_TRUE(known.count(isa)) << isa;
  if (const char* expected = std::getenv("FX_EXPECT_ONEDNN_ISA")) {
    EXPECT_EQ(isa, expected) << "the CPU this entry is meant to run on (FX_EXPECT_ONEDNN_ISA)";
  }
  const bool avx512 = isa.rfind("avx512_core", 0) == 0;
  EXPECT_EQ(fx::onednn::has_avx512_core(), avx512) << isa;
  // oneDNN 2.6: bf16 and Winograd kernels are AVX-512 kernels; VNNI comes with avx512_core_vnni and later.
  EXPECT_EQ(fx::onednn::has_bf16_kernels(), avx512) << isa;
  EXPECT_EQ(fx::onednn::has_winograd_kernels(), avx512) << isa;
  EXPECT_EQ(fx::onednn::has_int8_dot_product(), avx512 ? isa != "avx512_core" : isa == "avx2_vnni") << isa;
  auto yes = [](bool b) { return b ? "yes" : "no"; };
  // Below AVX-512, fxcpp's own Winograd on the packed GEMM (every CPU of the pool has AVX2 and FMA).
  const bool avx2 = !avx512 && (isa == "avx2" || isa == "avx2_vnni");
  EXPECT_EQ(fx::onednn::has_gemm_winograd(), avx2) << isa;
  EXPECT_EQ(fx::onednn::cpu_summary(), "oneDNN ISA " + isa + ": bf16 kernels " + yes(avx512) + ", Winograd " +
                                           (avx2 ? "fxcpp's F(2x2, 3x3)" : yes(avx512)) +
                                           ", int8 dot products (VNNI/AMX) " +
                                           yes(fx::onednn::has_int8_dot_product()));
}

// pack_conv2d / pack_linear make bf16 kernels where oneDNN has them and
// refuse with one line elsewhere, before any forward.
TEST(OnednnCpu, Bf16PackedOnlyWhereOneDnnHasBf16Kernels) {
  torch::manual_seed(0);
  const at::Tensor w = at::randn({8, 4, 3, 3}), b = at::randn({8}), lw = at::randn({6, 5});
  fx::onednn::ConvParams params;
  params.padding = {1, 1};
  if (fx::onednn::has_bf16_kernels()) {
    const c10::IValue conv = fx::onednn::pack_conv2d(w, b, params, {}, at::kBFloat16);
    EXPECT_EQ(fx::onednn::describe(conv), "Conv2d(4, 8, kernel=(3, 3), padding=[1, 1], bf16)");
    EXPECT_EQ(run_conv(conv, at::randn({1, 4, 6, 6})).scalar_type(), at::kBFloat16);
    EXPECT_EQ(fx::onednn::describe(fx::onednn::pack_linear(lw, c10::nullopt, {}, at::kBFloat16)),
              "Linear(5, 6, bias=False, bf16)");
    return;
  }
  const std::string why = "oneDNN has no bfloat16 kernels on this CPU (ISA " + fx::onednn::cpu_isa() +
                          "; bf16 needs AVX-512): pack float32 (fx::onednn::has_bf16_kernels)";
  EXPECT_EQ(error_of([&] { fx::onednn::pack_conv2d(w, b, params, {}, at::kBFloat16); }), "onednn_conv2d: " + why);
  EXPECT_EQ(error_of([&] { fx::onednn::pack_linear(lw, c10::nullopt, {}, at::kBFloat16); }), "onednn_linear: " + why);
}

// A bf16 state (what fx::load and torch.jit.load read from a file optimised
// where bf16 kernels exist) packs as bf16 where they exist here too, and as
// a float32 kernel of the same weights returning float32 where they do not:
// the file runs, close to the bf16 result, instead of failing mid-forward.
TEST(OnednnCpu, Bf16StateLoadsWhereverItIsRead) {
  torch::manual_seed(1);
  fx::onednn::PackedState s;
  s.kind = fx::onednn::PackedState::Kind::Conv2d;
  s.weight = at::randn({8, 4, 3, 3}).to(at::kBFloat16).to(at::kFloat);  // bf16-exact, as a saved bf16 kernel's
  s.bias = at::randn({8});
  s.params.padding = {1, 1};
  s.post_ops.activation = fx::onednn::Activation::Relu;
  s.dtype = at::kBFloat16;
  s.output_dtype = at::kBFloat16;
  const c10::IValue packed = fx::onednn::pack(s);
  const fx::onednn::PackedState back = fx::onednn::packed_state(packed);
  at::NoGradGuard no_grad;
  const at::Tensor x = at::randn({2, 4, 10, 10});
  const at::Tensor want = at::relu(at::conv2d(x, s.weight, *s.bias, 1, 1));
  const at::Tensor got = run_conv(packed, x);
  if (fx::onednn::has_bf16_kernels()) {
    EXPECT_EQ(fx::onednn::describe(packed), "Conv2d(4, 8, kernel=(3, 3), padding=[1, 1], bf16, relu)");
    EXPECT_EQ(back.dtype, at::kBFloat16);
    EXPECT_EQ(back.output_dtype, at::kBFloat16);
    EXPECT_EQ(got.scalar_type(), at::kBFloat16);
    EXPECT_LE(relative_error(got.to(at::kFloat), want), 2e-2);
  } else {
    EXPECT_EQ(fx::onednn::describe(packed), "Conv2d(4, 8, kernel=(3, 3), padding=[1, 1], relu)");
    EXPECT_EQ(back.dtype, at::kFloat);
    EXPECT_EQ(back.output_dtype, at::kFloat);
    EXPECT_EQ(got.scalar_type(), at::kFloat);
    EXPECT_LE(relative_error(got, want), 1e-5);
  }
  EXPECT_TRUE(back.weight.equal(s.weight));
}

}  // namespace
