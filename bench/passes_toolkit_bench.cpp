// SplitterBase and MinimizerBase costs (torch.fx splitter_base /
// net_min_base), measured on graphs built here:
//  - the splitter (ShapeProp on a [1] input, acc nodes, fusion groups,
//    put_nodes_into_subgraphs, split_by_tags) on a "ladder" of 1k / 10k
//    nodes where every supported add also feeds an unsupported mul (one
//    acc/cpu boundary per two nodes), per node;
//  - the minimizer finding a planted bug at the last node of an add chain of
//    100 / 400 nodes: sequential (one split per node: quadratic, as in
//    torch.fx) and binary (log2(N) splits).
#include <fx/interpreter.h>
#include <fx/passes/net_min_base.h>
#include <fx/passes/splitter_base.h>

#include "bench_graphs.h"

#include <benchmark/benchmark.h>

#include <memory>

namespace {

using fx_bench::ladder;

void BM_SplitterLadder(benchmark::State& state) {
  auto support = fx::create_op_support(
      [](const fx::SubmoduleMap&, const fx::Node* n) { return n->target() == "aten::add"; });
  const std::vector<c10::IValue> input{at::ones({1})};
  size_t submodules = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto gm = ladder(state.range(0));
    state.ResumeTiming();
    fx::SplitterBase splitter(gm, input, support);
    auto split = splitter();
    submodules = split->named_children().size();
  }
  state.counters["submodules"] = static_cast<double>(submodules);
  state.counters["per_node"] = benchmark::Counter(static_cast<double>(state.range(0)),
                                                  benchmark::Counter::kIsIterationInvariantRate |
                                                      benchmark::Counter::kInvert);
}
BENCHMARK(BM_SplitterLadder)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);

/// Adds 1 to the value of the node named `bad`.
class Perturb : public fx::Interpreter {
 public:
  Perturb(std::shared_ptr<fx::GraphModule> gm, std::string bad) : Interpreter(std::move(gm)), bad_(std::move(bad)) {}
  c10::IValue run_node(fx::Node* n) override {
    c10::IValue r = Interpreter::run_node(n);
    return n->name() == bad_ ? c10::IValue(r.toTensor() + 1.0) : r;
  }

 private:
  std::string bad_;
};

void minimize_chain(benchmark::State& state, const std::string& method) {
  const int64_t n = state.range(0);
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* v = x;
  for (int64_t i = 0; i < n; ++i) v = g->call_function("aten::add", {v, x});
  g->output(v);
  const std::string bad = v->name();
  auto gm = std::make_shared<fx::GraphModule>(std::make_shared<torch::nn::Module>(), g);
  auto run_a = [](const std::shared_ptr<fx::GraphModule>& m, const std::vector<c10::IValue>& in) {
    return m->forward(in);
  };
  auto run_b = [bad](const std::shared_ptr<fx::GraphModule>& m, const std::vector<c10::IValue>& in) {
    return Perturb(m, bad).run(in);
  };
  auto compare = [](const c10::IValue& a, const c10::IValue& b, const std::vector<std::string>&) {
    double d = (a.toTensor() - b.toTensor()).abs().max().item<double>();
    return std::make_pair(d, d < 1e-4);
  };
  fx::MinimizerSettings settings;
  settings.traverse_method = method;
  size_t found = 0;
  for (auto _ : state) {
    fx::MinimizerBase minimizer(gm, {at::ones({1})}, compare, settings, run_a, run_b);
    found = minimizer.minimize().size();
  }
  if (found != 1) state.SkipWithError("the planted bug was not found");
}

void BM_MinimizerSequentialChain(benchmark::State& state) { minimize_chain(state, "sequential"); }
BENCHMARK(BM_MinimizerSequentialChain)->Arg(100)->Arg(400)->Unit(benchmark::kMillisecond);

void BM_MinimizerBinaryChain(benchmark::State& state) { minimize_chain(state, "binary"); }
BENCHMARK(BM_MinimizerBinaryChain)->Arg(100)->Arg(400)->Unit(benchmark::kMillisecond);

}  // namespace
