// fxcpp demo: the whole loop on the built-in ResidualNet — capture the model
// as a graph, read it, rewrite it, run it three ways, check every result
// against eager libtorch, and time every node.
#include "command.h"

#include <fx/examples/residual_net.h>
#include <fx/fx.h>
#include <fx/passes/profiler.h>
#include <fx/passes/subgraph_rewriter.h>
#include <fx/trace.h>

#include <ATen/ATen.h>
#include <torch/nn/functional/pooling.h>

#include <cstdio>
#include <iostream>

namespace fx::cli {
namespace {

int failures = 0;

void section(const std::string& title) { std::cout << "\n== " << title << " " << std::string(70 - title.size(), '=') << "\n"; }

/// Prints one comparison line and counts mismatches.
void compare(const std::string& what, const at::Tensor& got, const at::Tensor& want) {
  const double diff = (got - want).abs().max().item<double>();
  const bool ok = got.sizes() == want.sizes() && diff <= 1e-5;
  std::printf("  %-54s max |diff| = %.2e  %s\n", what.c_str(), diff, ok ? "ok" : "MISMATCH");
  failures += ok ? 0 : 1;
}

Node* find_call(Graph& g, const std::string& prefix, bool last = false) {
  Node* found = nullptr;
  for (Node* n : g.nodes()) {
    if (n->op() == Opcode::CallFunction && n->target().rfind(prefix, 0) == 0) {
      found = n;
      if (!last) break;
    }
  }
  if (!found) throw Error("demo: the traced graph has no " + prefix + " node");
  return found;
}

/// The model's forward without the residual connection: what the graph
/// computes once the residual add's alpha is 0.
at::Tensor eager_without_residual(examples::ResidualNetImpl& m, const at::Tensor& x) {
  at::Tensor y = at::max_pool2d(at::relu(m.bn1(m.conv1(x))), {2, 2});
  auto& b = *m.block;
  y = at::relu(b.bn2(b.conv2(at::relu(b.bn1(b.conv1(y))))));
  return m.fc(at::adaptive_avg_pool2d(y, {1, 1}).flatten(1));
}

int run_demo(const std::vector<std::string>& args) {
  if (!args.empty()) throw Error("demo takes no arguments");
  at::manual_seed(0);
  at::set_num_threads(1);
  torch::NoGradGuard no_grad;
  auto model = examples::ResidualNet(3, 16, 10);
  model->eval();
  const at::Tensor x = at::randn({2, 3, 32, 32});
  const at::Tensor eager = model->forward(x);

  std::cout << "fxcpp demo: torch.fx for C++ on ResidualNet (conv, batch norm, relu, residual add, pooling, linear)\n";

  section("1. capture: fx::symbolic_trace(model, {x})");
  auto gm = symbolic_trace(model.ptr(), {x});
  Graph& g = gm->graph();
  std::cout << "  " << g.nodes().size() << " nodes: " << g.find_nodes(Opcode::Placeholder).size() << " placeholder, "
            << g.find_nodes(Opcode::GetAttr).size() << " get_attr, " << g.find_nodes(Opcode::CallModule).size()
            << " call_module, " << g.find_nodes(Opcode::CallFunction).size() << " call_function, "
            << g.find_nodes(Opcode::CallMethod).size() << " call_method, 1 output\n\n";
  g.print_tabular(std::cout);

  section("2. generated code: gm->code()");
  std::cout << gm->code() << "\n";

  section("3. run it three ways, each against eager libtorch");
  compare("GraphModule::forward (compiled plan)", gm->forward(x), eager);
  compare("Interpreter::run (node by node)", Interpreter(gm).run({x}).toTensor(), eager);
  std::vector<c10::IValue> boxed{x.clone()};
  compare("Interpreter::boxed_run (caller's inputs cleared)", Interpreter(gm).boxed_run(boxed).toTensor(), eager);
  std::printf("  boxed_run left the caller's vector with %zu elements\n", boxed.size());

  section("4. rewrite it (the seeds' edits)");
  // a. seed 001: insert mul(out, 2) after the classifier and reroute the output.
  Node* out_node = g.output_node();
  Node* result = out_node->args()[0].to_node();
  Node* doubled;
  {
    auto guard = g.inserting_after(result);
    doubled = g.call_function("aten::mul", {result, 2});
  }
  result->replace_all_uses_with(doubled);  // the mul keeps reading `result`: no self-reference
  std::cout << "  a. inserting_after(" << result->name() << "): " << doubled->format_node() << "\n";
  compare("forward, recompiled lazily after the edit == 2 * eager", gm->forward(x), eager * 2);

  // b. seed 001: replace the final relu by clamp_min(·, 0) — same values, new node.
  Node* relu = find_call(g, "aten::relu", /*last=*/true);
  Node* clamp;
  {
    auto guard = g.inserting_before(relu);
    clamp = g.call_function("aten::clamp_min", {relu->args()[0], 0.0});
  }
  const std::string relu_name = relu->name();
  relu->replace_all_uses_with(clamp);
  g.erase_node(relu);
  std::cout << "  b. replaced " << relu_name << " by " << clamp->format_node() << "\n";
  compare("forward after replace_all_uses_with + erase_node", gm->forward(x), eager * 2);

  // c. seed 000: kwargs are read-only views; update_kwarg changes one the right way.
  Node* residual = clamp->args()[0].to_node();  // the residual add feeds the relu we replaced
  residual->update_kwarg("alpha", 0);
  std::cout << "  c. update_kwarg(\"alpha\", 0) on " << residual->format_node() << "\n";
  compare("forward without the residual == eager without it", gm->forward(x),
          eager_without_residual(*model, x) * 2);
  g.lint();
  std::cout << "  graph.lint(): ok; dead code removed: " << (g.eliminate_dead_code() ? "yes" : "none") << "\n";

  section("5. replace_pattern: relu(a + b) -> fused aten::_add_relu");
  {
    // Pattern and replacement are C++ functions, traced like the model.
    auto fresh = symbolic_trace(model.ptr(), {x});
    const at::Tensor ex = at::randn({1});
    auto arg = [](const c10::IValue& v) { return v.toTensor(); };
    auto pattern = symbolic_trace(
        [&](std::vector<c10::IValue> a) -> c10::IValue { return at::relu(arg(a[0]) + arg(a[1])); }, {ex, ex});
    auto fused = symbolic_trace(
        [&](std::vector<c10::IValue> a) -> c10::IValue { return at::_add_relu(arg(a[0]), arg(a[1])); }, {ex, ex});
    std::cout << "  before:\n" << fresh->code() << "\n";
    auto matches = replace_pattern(*fresh, *pattern, *fused);
    Node* at_node = matches.at(0).nodes_map.node(matches[0].anchor);
    std::cout << "  after (" << matches.size() << " match, at " << at_node->name() << "):\n" << fresh->code() << "\n";
    compare("forward after replace_pattern == eager", fresh->forward(x), eager);
  }

  section("6. time every node: a profiling Interpreter (seed 003)");
  ProfilingInterpreter prof(gm);
  prof.profile_run({x}, /*record=*/false);  // warm-up
  for (int i = 0; i < 5; ++i) prof.profile_run({x});
  std::cout << prof.report(10);

  std::cout << "\n" << (failures == 0 ? "all results match eager libtorch" : "SOME RESULTS DO NOT MATCH") << "\n";
  return failures == 0 ? 0 : 1;
}

}  // namespace

FX_COMMAND("demo", "demo", "trace, rewrite, run and profile the built-in ResidualNet", run_demo);

}  // namespace fx::cli
