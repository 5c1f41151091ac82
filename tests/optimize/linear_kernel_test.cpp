// Which kernel runs a linear layer (fx::LinearKernel): oneDNN's, ATen's, or
// on CPUs below AVX-512 the faster of the two for the layer's shape, timed
// by the pass (onednn::time_linear). The ctest run optimize_isa_AVX2 holds
// oneDNN at AVX2, so an AVX-512 machine runs the timed branch too.
#include "../common/error_of.h"
#include "onednn/gemv.h"
#include "optimize_test_util.h"

#include <fx/error.h>
#include <fx/graph.h>
#include <fx/onednn.h>
#include <fx/optimize/lower_to_onednn.h>
#include <fx/optimize/optimize_for_inference.h>
#include <fx/trace.h>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

namespace {

using namespace optimize_test;

/// A transformer's MLP block, written as libtorch's C++ examples write modules.
/// Each layer does 2 * 16 * 64 * 256 = 2^19 floating-point operations on the
/// [2, 8, 64] input: above the 2^18 below which Auto does not time a layer.
struct MlpBlockImpl : torch::nn::Module {
  MlpBlockImpl()
      : fc1(register_module("fc1", torch::nn::Linear(64, 256))),
        fc2(register_module("fc2", torch::nn::Linear(256, 64))) {}
  at::Tensor forward(const at::Tensor& x) { return x + fc2(torch::gelu(fc1(x))); }
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(MlpBlock);

struct TwoMlpBlocksImpl : torch::nn::Module {
  TwoMlpBlocksImpl() : first(register_module("first", MlpBlock())), second(register_module("second", MlpBlock())) {}
  at::Tensor forward(const at::Tensor& x) { return second(first(x)); }
  MlpBlock first, second;
};
TORCH_MODULE(TwoMlpBlocks);

struct TracedMlp {
  TwoMlpBlocks net;
  std::shared_ptr<fx::GraphModule> gm;
  at::Tensor x, expected;
};

TracedMlp traced_mlp() {
  torch::manual_seed(0);
  TracedMlp t;
  t.net->eval();
  t.x = at::randn({2, 8, 64});
  t.gm = fx::symbolic_trace(t.net.ptr(), {t.x});
  at::NoGradGuard no_grad;
  t.expected = t.net->forward(t.x);
  return t;
}

std::shared_ptr<fx::GraphModule> optimized(const TracedMlp& t, fx::LinearKernel kernel, fx::OptimizeReport& report) {
  fx::OptimizeOptions options;
  options.example_inputs = {t.x};
  options.linear_kernel = kernel;
  return fx::optimize_for_inference(t.gm, options, &report);
}

/// optimized(), its output checked against eager's.
std::shared_ptr<fx::GraphModule> optimized_and_checked(const TracedMlp& t, fx::LinearKernel kernel,
                                                       fx::OptimizeReport& report) {
  auto opt = optimized(t, kernel, report);
  at::NoGradGuard no_grad;
  EXPECT_LE(relative_error(opt->forward({t.x}).toTensor(), t.expected), 1e-5);
  return opt;
}

TEST(LinearKernel, AtenKeepsTheLayersWithTheirPostOps) {
  TracedMlp t = traced_mlp();
  fx::OptimizeReport report;
  auto opt = optimized(t, fx::LinearKernel::Aten, report);
  EXPECT_EQ(report.aten_linears, 4u);
  EXPECT_EQ(report.onednn_linears, 0u);
  EXPECT_EQ(report.fused_post_ops, 0u);
  EXPECT_TRUE(report.linear_choices.empty());
  EXPECT_EQ(count_calls(opt->graph(), "aten::linear"), 4u);
  EXPECT_EQ(count_calls(opt->graph(), "fxcpp::onednn_linear"), 0u);
  EXPECT_EQ(count_calls(opt->graph(), "aten::gelu") + count_calls(opt->graph(), "aten::gelu_"), 2u);
  at::NoGradGuard no_grad;
  // The same ATen ops as eager, in place where reinplace could: the same values to rounding. Not
  // always the same bits: OpenBLAS 0.3.21 runs its generic Prescott kernels on CPUs it does not
  // know (an Intel Xeon of family 6 model 207), whose sums depend on where the operands lie (the
  // optimised module's copies of the weights give other last bits than eager's own).
  EXPECT_LE(relative_error(opt->forward({t.x}).toTensor(), t.expected), 1e-6);
}

TEST(LinearKernel, OneDnnFusesTheActivationAndTheResidual) {
  TracedMlp t = traced_mlp();
  fx::OptimizeReport report;
  auto opt = optimized(t, fx::LinearKernel::OneDnn, report);
  EXPECT_EQ(report.onednn_linears, 4u);
  EXPECT_EQ(report.aten_linears, 0u);
  EXPECT_EQ(report.fused_post_ops, 4u);  // fc1's gelu, fc2's residual sum, in each block
  EXPECT_TRUE(report.linear_choices.empty());
  EXPECT_EQ(count_calls(opt->graph(), "aten::linear"), 0u);
  at::NoGradGuard no_grad;
  EXPECT_LE(relative_error(opt->forward({t.x}).toTensor(), t.expected), 1e-5);
}

// Auto: oneDNN's on AVX-512 without timing; below it, each layer timed (once
// per shape, weight and post-ops), the graph as the measurements decided.
TEST(LinearKernel, AutoTimesTheLayersBelowAvx512) {
  const ThreadsGuard one(1);
  TracedMlp t = traced_mlp();
  fx::OptimizeReport report;
  auto opt = optimized_and_checked(t, fx::LinearKernel::Auto, report);
  EXPECT_EQ(report.linear_note, "");
  if (avx512()) {
    EXPECT_TRUE(report.linear_choices.empty()) << report.cpu;
    EXPECT_EQ(report.onednn_linears, 4u);
    return;
  }
  ASSERT_EQ(report.linear_choices.size(), 4u) << report.cpu;
  size_t aten = 0;
  for (const fx::LinearChoice& c : report.linear_choices) {
    EXPECT_EQ(c.input_sizes, (std::vector<int64_t>{2, 8, c.out_features == 256 ? 64 : 256})) << c.node;
    EXPECT_TRUE(std::isfinite(c.timing.onednn_ms) && c.timing.onednn_ms > 0) << c.node;
    EXPECT_TRUE(std::isfinite(c.timing.aten_ms) && c.timing.aten_ms > 0) << c.node;
    EXPECT_GE(c.timing.rounds, 3);
    EXPECT_LE(c.timing.rounds, 15);
    EXPECT_EQ(c.aten, c.timing.aten_ms * 1.05 < c.timing.onednn_ms) << c.node;
    aten += c.aten;
  }
  // Graph order: first.fc1, first.fc2, second.fc1, second.fc2; one measurement per shape.
  const auto& c = report.linear_choices;
  EXPECT_EQ(c[0].out_features, 256);
  EXPECT_EQ(c[1].out_features, 64);
  EXPECT_EQ(c[0].timing.onednn_ms, c[2].timing.onednn_ms);
  EXPECT_EQ(c[0].timing.aten_ms, c[2].timing.aten_ms);
  EXPECT_EQ(c[1].timing.aten_ms, c[3].timing.aten_ms);
  EXPECT_NE(c[0].timing.onednn_ms, c[1].timing.onednn_ms);
  EXPECT_EQ(report.aten_linears, aten);
  EXPECT_EQ(report.onednn_linears, 4u - aten);
  EXPECT_EQ(count_calls(opt->graph(), "aten::linear"), aten);
  EXPECT_EQ(count_calls(opt->graph(), "fxcpp::onednn_linear"), 4u - aten);
}

// On two threads beside a BLAS with threads of its own (Debian's OpenBLAS)
// Auto times nothing: every layer is oneDNN's, and the report says why.
TEST(LinearKernel, AutoOnTwoThreadsBesideTheBlasThreadsIsOneDnnUntimed) {
  const ThreadsGuard two(2);
  TracedMlp t = traced_mlp();
  fx::OptimizeReport report;
  auto opt = optimized_and_checked(t, fx::LinearKernel::Auto, report);
  if (avx512() || !fx::onednn::blas_has_own_threads()) {
    EXPECT_EQ(report.linear_note, "") << report.cpu;
    return;
  }
  EXPECT_TRUE(report.linear_choices.empty());
  EXPECT_EQ(report.linear_note, "linears on oneDNN untimed: 2 threads, and the BLAS's own would compete with OpenMP's");
  EXPECT_EQ(report.onednn_linears, 4u);
  EXPECT_EQ(report.aten_linears, 0u);
  EXPECT_EQ(count_calls(opt->graph(), "fxcpp::onednn_linear"), 4u);
}

// Debian's libtorch links the OpenBLAS of libopenblas0-pthread (setup.sh):
// a pool of its own.
TEST(LinearKernel, TheBlasOfThisBuildKeepsThreadsOfItsOwn) { EXPECT_TRUE(fx::onednn::blas_has_own_threads()); }

TEST(LinearKernel, AutoWithoutShapesIsOneDnn) {
  TracedMlp t = traced_mlp();
  for (fx::Node* n : t.gm->graph().nodes()) n->meta().erase("tensor_meta");
  fx::OptimizeReport report;
  auto opt = fx::optimize_for_inference(t.gm, {}, &report);
  EXPECT_TRUE(report.linear_choices.empty());
  EXPECT_EQ(report.onednn_linears, 4u);
  at::NoGradGuard no_grad;
  EXPECT_LE(relative_error(opt->forward({t.x}).toTensor(), t.expected), 1e-5);
}

// A layer of under 2^18 floating-point operations is not timed on any CPU:
// oneDNN's kernel, so every optimisation of it computes the same bits.
TEST(LinearKernel, AutoLeavesLayersTooSmallToTimeOnOneDnn) {
  torch::manual_seed(0);
  // [2, 16] -> 10: 640 operations, a pipeline test's classifier head.
  torch::nn::Sequential head(torch::nn::ReLU(), torch::nn::Linear(16, 10));
  head->eval();
  const at::Tensor x = at::randn({2, 16});
  auto gm = fx::symbolic_trace(head.ptr(), {x});
  fx::OptimizeOptions options;
  options.example_inputs = {x};
  fx::OptimizeReport report;
  auto opt = fx::optimize_for_inference(gm, options, &report);
  EXPECT_TRUE(report.linear_choices.empty()) << report.cpu;
  EXPECT_EQ(report.onednn_linears, 1u);
  EXPECT_EQ(report.aten_linears, 0u);
  EXPECT_EQ(count_calls(opt->graph(), "fxcpp::onednn_linear"), 1u);
  at::NoGradGuard no_grad;
  EXPECT_LE(relative_error(opt->forward({x}).toTensor(), head->forward(x)), 1e-5);
}

// Below AVX-512 a shape is timed once per process: a second optimisation
// (a pipeline's check optimising the whole model after its stages) reads
// the first one's measurements and makes the same choices.
TEST(LinearKernel, AutoChoosesAlikeInEveryOptimisationOfAProcess) {
  const ThreadsGuard one(1);
  TracedMlp t = traced_mlp();
  fx::OptimizeReport first, second;
  auto a = optimized(t, fx::LinearKernel::Auto, first);
  auto b = optimized(t, fx::LinearKernel::Auto, second);
  ASSERT_EQ(first.linear_choices.size(), second.linear_choices.size());
  if (avx512()) {
    EXPECT_TRUE(first.linear_choices.empty()) << first.cpu;
  }
  for (size_t i = 0; i < first.linear_choices.size(); ++i) {
    EXPECT_EQ(first.linear_choices[i].timing.onednn_ms, second.linear_choices[i].timing.onednn_ms);
    EXPECT_EQ(first.linear_choices[i].timing.aten_ms, second.linear_choices[i].timing.aten_ms);
    EXPECT_EQ(first.linear_choices[i].aten, second.linear_choices[i].aten);
  }
  EXPECT_EQ(count_calls(a->graph(), "aten::linear"), count_calls(b->graph(), "aten::linear"));
  at::NoGradGuard no_grad;
  EXPECT_TRUE(a->forward({t.x}).toTensor().equal(b->forward({t.x}).toTensor()));
}

TEST(LinearKernel, TimeLinearMeasuresBothKernelsAndLeavesTheSeed) {
  const at::Tensor w = at::randn({64, 32}), b = at::randn({64});
  fx::onednn::PostOps post;
  post.sum = true;
  post.activation = fx::onednn::Activation::GeluErf;
  torch::manual_seed(5);
  const at::Tensor before = at::randn({4});
  torch::manual_seed(5);
  const fx::onednn::LinearTiming t = fx::onednn::time_linear(w, b, post, {3, 5, 32});
  EXPECT_TRUE(at::randn({4}).equal(before));  // its own generator
  EXPECT_TRUE(std::isfinite(t.onednn_ms) && t.onednn_ms > 0);
  EXPECT_TRUE(std::isfinite(t.aten_ms) && t.aten_ms > 0);
  EXPECT_GE(t.rounds, 3);
  EXPECT_LE(t.rounds, 15);
  EXPECT_EQ(fx_test::error_of([&] { fx::onednn::time_linear(w, b, post, {2, 31}); }),
            "time_linear: an input of [2, 31] does not fit a weight of [64, 32]");
}

at::Tensor run_linear(const at::Tensor& x, const c10::IValue& packed, const c10::optional<at::Tensor>& residual) {
  return call_boxed("fxcpp::onednn_linear", {x, packed, residual ? c10::IValue(*residual) : c10::IValue()});
}

// Below AVX-512 a float32 linear layer runs on oneDNN's packed GEMM (its
// weights packed per row count and thread count, the bias and residual
// summed by the GEMM, the activation after it; one row on gemv); on
// AVX-512 on oneDNN's matmul. Either way: ATen's values, every post-op, any
// row count (0 included), 1 and 2 threads, the residual overwritten only
// when allowed, and the packed state rebuilding the same kernel.
TEST(LinearKernel, PackedGemmComputesWhatAtenDoes) {
  torch::manual_seed(3);
  const ThreadsGuard guard;
  const at::Tensor w = at::randn({45, 37}), b = at::randn({45});
  struct Case {
    bool bias, sum, inplace;
    fx::onednn::Activation act;
  };
  using A = fx::onednn::Activation;
  const std::vector<Case> cases{{false, false, false, A::None}, {true, false, false, A::None},
                                {true, false, false, A::GeluErf}, {false, false, false, A::Relu},
                                {true, true, false, A::None},     {true, true, true, A::GeluTanh}};
  for (const Case& c : cases) {
    fx::onednn::PostOps post;
    post.sum = c.sum;
    post.residual_inplace = c.inplace;
    post.activation = c.act;
    const c10::optional<at::Tensor> bias = c.bias ? c10::optional<at::Tensor>(b) : c10::nullopt;
    const c10::IValue packed = fx::onednn::pack_linear(w, bias, post, at::kFloat);
    const c10::IValue again = fx::onednn::pack(fx::onednn::packed_state(packed));
    const std::string what = fx::onednn::describe(packed);
    EXPECT_EQ(fx::onednn::implementation(packed, {15, 37}) == "gemm:packed", !avx512()) << what;
    EXPECT_EQ(fx::onednn::implementation(packed, {1, 1, 37}) == "gemv", !avx512()) << what;
    for (int t : {1, 2}) {
      at::set_num_threads(t);
      for (const std::vector<int64_t>& sizes : {std::vector<int64_t>{3, 5, 37}, {1, 37}, {0, 37}}) {
        const at::Tensor x = at::randn(sizes);
        std::vector<int64_t> out_sizes = sizes;
        out_sizes.back() = 45;
        const at::Tensor r = at::randn(out_sizes);
        at::Tensor want = at::linear(x, w, bias);
        if (c.sum) want = want + r;
        if (c.act == A::GeluErf) want = at::gelu(want);
        if (c.act == A::GeluTanh) want = at::gelu(want, "tanh");
        if (c.act == A::Relu) want = at::relu(want);
        const at::Tensor residual = r.clone();
        const at::Tensor got = run_linear(x, packed, c.sum ? c10::optional<at::Tensor>(residual) : c10::nullopt);
        const std::string where = what + " on " + std::to_string(t) + " threads, input " + c10::str(x.sizes());
        ASSERT_EQ(got.sizes(), want.sizes()) << where;
        if (x.numel() > 0) {
          EXPECT_LE(relative_error(got, want), 1e-5) << where;
          EXPECT_EQ(c.inplace, got.data_ptr() == residual.data_ptr()) << where;
        }
        if (!c.inplace) {
          EXPECT_TRUE(residual.equal(r)) << where;
        }
        const at::Tensor rerun = run_linear(x, again, c.sum ? c10::optional<at::Tensor>(r.clone()) : c10::nullopt);
        EXPECT_TRUE(rerun.equal(got)) << where;
      }
    }
  }
}

// gemv (src/onednn/gemv.h), one-row linear layers' kernel below AVX-512:
// every tail of its 32- and 8-float steps, rows split between threads or
// not, y added (beta 1) or never read (beta 0: NaN there stays unread).
TEST(LinearKernel, GemvIsAMatrixVectorProduct) {
  torch::manual_seed(8);
  const ThreadsGuard guard;
  for (int64_t k : {1, 7, 8, 31, 32, 45, 77, 1000}) {
    for (int64_t n : {1, 3, 700}) {
      const at::Tensor w = at::randn({n, k}), x = at::randn({k}), y0 = at::randn({n});
      for (int t : {1, 2}) {
        at::set_num_threads(t);
        for (float beta : {0.f, 1.f}) {
          at::Tensor y = beta != 0.f ? y0.clone() : at::full({n}, std::numeric_limits<float>::quiet_NaN());
          fx::onednn::detail::gemv(w.data_ptr<float>(), n, k, x.data_ptr<float>(), y.data_ptr<float>(), beta);
          const at::Tensor want = at::mv(w, x) + (beta != 0.f ? y0 : at::zeros({n}));
          EXPECT_LE(relative_error(y, want), 1e-5) << n << " x " << k << ", beta " << beta << ", " << t << " threads";
        }
      }
    }
  }
}

TEST(LinearKernel, Names) {
  for (fx::LinearKernel k : {fx::LinearKernel::Auto, fx::LinearKernel::OneDnn, fx::LinearKernel::Aten})
    EXPECT_EQ(fx::linear_kernel_from_name(fx::linear_kernel_name(k)), k);
  EXPECT_EQ(fx::linear_kernel_name(fx::LinearKernel::Aten), "aten");
  EXPECT_EQ(fx_test::error_of([] { fx::linear_kernel_from_name("blas"); }),
            "linear kernel 'blas': expected auto, onednn or aten");
}

}  // namespace

// Below AVX-512 the packed GEMM packs the weights per input row count: a
// decoder's prompts of ever new lengths would each add a copy of every
// weight. The two most recent row counts are kept (fx::onednn::packed_bytes
// stays at two copies and the plain weights), an evicted one is packed again
// with the same values. On AVX-512 oneDNN's matmul holds its layouts.
TEST(LinearKernel, PackedGemmKeepsTheTwoLatestRowCounts) {
  torch::manual_seed(4);
  const ThreadsGuard guard;
  at::set_num_threads(1);
  const at::Tensor w = at::randn({96, 64});
  const c10::IValue packed = fx::onednn::pack_linear(w, c10::nullopt, {}, at::kFloat);
  std::vector<size_t> bytes;
  std::vector<at::Tensor> first;
  for (int64_t rows : {3, 5, 7, 9, 3}) {
    const at::Tensor x = at::randn({rows, 64});
    const at::Tensor got = run_linear(x, packed, c10::nullopt);
    EXPECT_LE(relative_error(got, at::linear(x, w)), 1e-5) << rows << " rows";
    bytes.push_back(fx::onednn::packed_bytes(packed));
  }
  ASSERT_GT(bytes.front(), 0u);
  if (!avx512()) {
    const size_t one = bytes[0];  // the first row count's copy (the plain weights are not counted)
    EXPECT_EQ(bytes[1], 2 * one);
    EXPECT_EQ(bytes[2], 2 * one);  // 3 evicted
    EXPECT_EQ(bytes[3], 2 * one);
    EXPECT_EQ(bytes[4], 2 * one);  // 3 packed again, 7 evicted
  }
  EXPECT_THROW(fx::onednn::packed_bytes(c10::IValue(at::ones({1}))), fx::Error);
}
