// The README's first example: build a graph, insert a node, run it.
//
//   build/examples/quickstart
#include <fx/fx.h>

#include <ATen/ATen.h>

#include <iostream>

int main() {
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* add = g->call_function("aten::add", {x, x});
  g->output(add);
  {
    auto guard = g->inserting_after(add);  // with graph.inserting_after(add):
    fx::Node* mul = g->call_function("aten::mul", {add, 2});
    add->replace_all_uses_with(mul);  // mul keeps reading add: no self-loop
  }
  auto gm = std::make_shared<fx::GraphModule>(std::make_shared<torch::nn::Module>(), g);
  at::Tensor y = gm->forward(at::full({1}, 3.0));  // 12: edits recompile lazily, never stale
  std::cout << gm->code() << "\nforward(3) = " << y.item<double>() << "\n";
  return y.item<double>() == 12.0 ? 0 : 1;
}
