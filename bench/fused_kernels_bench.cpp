// fxcpp's compiler (issue 68): chains of pointwise operators and row
// reductions run by ATen one operator at a time (0) or as the one kernel
// fx::compiler::fuse_kernels generates (1), 1 thread, rows of 768 floats
// (BERT-base / ViT-B width): 256 rows (0.75 MB a tensor: in cache) and
// 32768 rows (96 MB: past the last-level cache, where the chain is bound by
// memory bandwidth). bytes_per_second counts what the chain must read and
// write once (its inputs and its output), so the fused side's figure is
// its share of the machine's bandwidth.
//
//   BM_FusedChain/<chain>/<rows>/<fused>
//     chain 0 add + layer_norm (residual, then the norm; weight and bias)
//           1 RMSNorm: x * rsqrt(mean(x * x, -1) + eps) * w
//           2 bias + GELU (tanh)
//           3 scale + softmax
//           4 dropout's scale + residual: x * mask * 1.25 + r
//           5 layer_norm alone (ATen's one kernel against the generated one)
#include <fx/compiler/fuse_kernels.h>
#include <fx/graph.h>
#include <fx/passes/shape_prop.h>

#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <malloc.h>

namespace {

using fx::Argument;
using fx::Node;

constexpr int64_t kWidth = 768;

struct Chain {
  std::shared_ptr<fx::GraphModule> gm;
  std::vector<c10::IValue> inputs;
  int64_t bytes = 0;  // inputs and output, once
};

Chain make_chain(int which, int64_t rows) {
  torch::manual_seed(0);
  auto g = std::make_shared<fx::Graph>();
  Chain c;
  const at::Tensor x = torch::randn({rows, kWidth}), r = torch::randn({rows, kWidth});
  const at::Tensor w = torch::randn({kWidth}), b = torch::randn({kWidth});
  Node* xn = g->placeholder("x");
  auto ln_of = [&](Node* v, Node* wn, Node* bn) {
    return g->call_function("aten::layer_norm", {v, Argument::list({Argument(kWidth)}), wn, bn, 1e-5});
  };
  Node* out = nullptr;
  switch (which) {
    case 0: {
      Node* rn = g->placeholder("r");
      Node* wn = g->placeholder("w");
      Node* bn = g->placeholder("b");
      out = ln_of(g->call_function("aten::add.Tensor", {xn, rn}), wn, bn);
      c.inputs = {x, r, w, b};
      c.bytes = 3 * x.nbytes();
      break;
    }
    case 1: {
      Node* wn = g->placeholder("w");
      Node* sq = g->call_function("aten::mul.Tensor", {xn, xn});
      Node* mean = g->call_function("aten::mean.dim", {sq, Argument::list({Argument(int64_t{-1})}), true});
      Node* rs = g->call_function("aten::rsqrt", {g->call_function("aten::add.Tensor", {mean, 1e-6})});
      out = g->call_function("aten::mul.Tensor", {g->call_function("aten::mul.Tensor", {xn, rs}), wn});
      c.inputs = {x, w};
      c.bytes = 2 * x.nbytes();
      break;
    }
    case 2: {
      Node* bn = g->placeholder("b");
      out = g->call_function("aten::gelu", {g->call_function("aten::add.Tensor", {xn, bn})},
                             {{"approximate", Argument("tanh")}});
      c.inputs = {x, b};
      c.bytes = 2 * x.nbytes();
      break;
    }
    case 3:
      out = g->call_function("aten::softmax.int", {g->call_function("aten::mul.Tensor", {xn, 0.125}), -1});
      c.inputs = {x};
      c.bytes = 2 * x.nbytes();
      break;
    case 4: {
      Node* mn = g->placeholder("mask");
      Node* rn = g->placeholder("r");
      Node* scaled = g->call_function("aten::mul.Tensor", {g->call_function("aten::mul.Tensor", {xn, mn}), 1.25});
      out = g->call_function("aten::add.Tensor", {scaled, rn});
      c.inputs = {x, (torch::rand({rows, kWidth}) > 0.2).to(at::kFloat), r};
      c.bytes = 4 * x.nbytes();
      break;
    }
    default: {
      Node* wn = g->placeholder("w");
      Node* bn = g->placeholder("b");
      out = ln_of(xn, wn, bn);
      c.inputs = {x, w, b};
      c.bytes = 2 * x.nbytes();
      break;
    }
  }
  g->output(out);
  c.gm = std::make_shared<fx::GraphModule>(std::make_shared<torch::nn::Module>(), g);
  return c;
}

void BM_FusedChain(benchmark::State& state) {
  at::set_num_threads(1);
  mallopt(M_MMAP_THRESHOLD, 256 * 1024 * 1024);  // a warm heap: the kernels are timed, not fresh pages
  mallopt(M_TRIM_THRESHOLD, 1024 * 1024 * 1024);
  const int which = static_cast<int>(state.range(0));
  Chain c = make_chain(which, state.range(1));
  const bool fused = state.range(2) != 0;
  std::function<void()> run = [&] { benchmark::DoNotOptimize(c.gm->forward(c.inputs)); };
  std::string program;
  if (fused) {
    if (!fx::compiler::can_compile_kernels()) {
      state.SkipWithError("no C++ compiler");
      return;
    }
    fx::ShapeProp(c.gm).propagate(c.inputs);
    fx::compiler::FuseReport report;
    if (which == 5) {
      // A layer norm alone is not fused by the pass (nothing to save); its kernel is timed directly.
      program = "inputs 3; %3 = mean(%0); %4 = var(%0, 0); %5 = maximum(%4, 0); %6 = add(%5, 1.0000000000000001e-05); "
                "%7 = rsqrt(%6); %8 = sub(%0, %3); %9 = mul(%8, %7); %10 = mul(%9, %1); %11 = add(%10, %2); "
                "return %11 full";
      std::vector<at::Tensor> in;
      for (const c10::IValue& v : c.inputs) in.push_back(v.toTensor());
      run = [program, in] { benchmark::DoNotOptimize(fx::compiler::run_kernel(program, in)); };
    } else if (fx::compiler::fuse_kernels(*c.gm, {}, &report) != 1) {
      state.SkipWithError("the chain was not fused into one kernel");
      return;
    }
  }
  run();
  for (auto _ : state) run();
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * c.bytes);
}

}  // namespace

BENCHMARK(BM_FusedChain)
    ->ArgsProduct({{0, 1, 2, 3, 4, 5}, {256, 32768}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.2);

namespace {

/// The machine's bandwidth at 1 thread on 96 MB tensors, measured beside the chains: 0 a copy (read
/// and write: bytes counted twice, as the chains count theirs), 1 a sum (read).
void BM_FusedChainBandwidth(benchmark::State& state) {
  at::set_num_threads(1);
  mallopt(M_MMAP_THRESHOLD, 256 * 1024 * 1024);
  const at::Tensor x = torch::randn({32768, kWidth});
  at::Tensor y = torch::empty_like(x);
  const bool copy = state.range(0) == 0;
  for (auto _ : state) {
    if (copy)
      y.copy_(x);
    else
      benchmark::DoNotOptimize(x.sum());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * x.nbytes() * (copy ? 2 : 1));
}

}  // namespace

BENCHMARK(BM_FusedChainBandwidth)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->MinTime(0.2);
