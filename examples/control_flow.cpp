// Run-time control flow in a graph: a conditional and a loop as modules whose
// branches and body are GraphModules of their own (fx/control_flow.h) — what
// fx::import_torchscript makes of a scripted `if x.sum() > 0:` or
// `for i in range(x.size(0)):`, built here by hand.
//
//   build/examples/control_flow
#include <fx/fx.h>

#include <ATen/ATen.h>

#include <iostream>

namespace {

// A graph module over a fresh graph with the given placeholders; `body`
// adds the nodes and returns the output.
std::shared_ptr<fx::GraphModule> graph_module(const std::vector<std::string>& inputs,
                                              const std::function<fx::Argument(fx::Graph&, std::vector<fx::Node*>&)>& body,
                                              const std::string& class_name) {
  auto g = std::make_shared<fx::Graph>();
  std::vector<fx::Node*> ph;
  for (const auto& name : inputs) ph.push_back(g->placeholder(name));
  g->output(body(*g, ph));
  return std::make_shared<fx::GraphModule>(std::make_shared<torch::nn::Module>(), g, class_name);
}

}  // namespace

int main() {
  // if x.sum() > 0: y = x * 2 else: y = -x     (operands: x)
  auto true_graph = graph_module(
      {"x"}, [](fx::Graph& g, auto& p) { return fx::Argument(g.call_function("aten::mul", {p[0], 2})); },
      "true_graph_0");
  auto false_graph = graph_module(
      {"x"}, [](fx::Graph& g, auto& p) { return fx::Argument(g.call_function("aten::neg", {p[0]})); },
      "false_graph_0");
  // for i in range(n): acc = acc + x           (carried: acc; operands: x)
  auto body = graph_module(
      {"i", "acc", "x"},
      [](fx::Graph& g, auto& p) {
        return fx::Argument::tuple({true, fx::Argument(g.call_function("aten::add", {p[1], p[2]}))});
      },
      "body_graph_0");

  auto root = std::make_shared<torch::nn::Module>();
  root->register_module("cond_0", std::make_shared<fx::CondModule>(true_graph, false_graph, 1));
  root->register_module("loop_0", std::make_shared<fx::WhileLoopModule>(body, 1));

  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* n = g->placeholder("n");
  fx::Node* positive = g->call_function("operator.gt", {g->call_function("aten::sum", {x}), 0});
  fx::Node* y = g->call_module("cond_0", {positive, x});
  fx::Node* z = g->call_module("loop_0", {n, true, y, x});  // (trip count, condition, acc, x)
  g->output(z);
  auto gm = std::make_shared<fx::GraphModule>(root, g, "Example");
  std::cout << gm->print_readable() << "\n";

  const at::Tensor a = at::arange(1, 4, at::kFloat);  // sum > 0: 2a, then + 3a
  const at::Tensor r1 = gm->forward({a, int64_t{3}}).toTensor();
  const at::Tensor r2 = fx::Interpreter(gm).run({-a, int64_t{2}}).toTensor();  // sum < 0: a, then - 2a
  std::cout << "forward(a, 3) = " << r1 << "\ninterpreter(-a, 2) = " << r2 << "\n";
  fx::for_each_subgraph(*gm, [](const std::string& path, fx::GraphModule& sub) {
    std::cout << path << ": " << sub.graph().nodes().size() << " nodes\n";
  });
  return r1.equal(a * 5) && r2.equal(-a) ? 0 : 1;
}
