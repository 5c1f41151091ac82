// torch.fx idioms that real traced graphs use: x[:, 0] as getitem with a
// slice, renaming and retargeting a node in place, type annotations, and
// erasing nodes while looping over the graph.
//
//   build/examples/slicing_and_renaming
#include <fx/fx.h>

#include <ATen/ATen.h>
#include <ATen/TensorIndexing.h>

#include <iostream>

int main() {
  using fx::Argument;
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x", std::nullopt, "torch.Tensor");  // def forward(self, x : torch.Tensor)
  // x[:, 0] traces to operator.getitem(x, (slice(None, None, None), 0)).
  fx::Node* col = g->call_function("operator.getitem",
                                   {x, Argument::tuple({Argument::slice(nullptr, nullptr, nullptr), 0})});
  // x[..., 1:3]
  fx::Node* last = g->call_function("operator.getitem",
                                    {x, Argument::tuple({Argument::ellipsis(), Argument::slice(1, 3, nullptr)})});
  fx::Node* sum = g->call_function("aten::add", {col, g->call_function("aten::sum", {last, -1})});
  fx::Node* unused = g->call_function("aten::neg", {x});
  g->output(sum);

  sum->set_target("aten::mul");  // node.target = torch.mul: retargeted in place
  sum->set_name("product");      // node.name = 'product' (kept unique)
  for (fx::Node* n : g->nodes()) {
    if (n == col) g->erase_node(unused);  // erasing a later node: the loop skips it
    if (n == unused) return 1;
  }

  auto gm = std::make_shared<fx::GraphModule>(std::make_shared<torch::nn::Module>(), g);
  std::cout << gm->code() << "\n";
  at::Tensor t = at::arange(12, at::kFloat).reshape({3, 4});
  using namespace at::indexing;
  at::Tensor want = t.index({Slice(), 0}) * t.index({Ellipsis, Slice(1, 3)}).sum(-1);
  at::Tensor got = gm->forward_tensor(t);
  std::cout << "forward = " << got << "\n";
  if (!at::equal(got, want) || g->owning_module() != gm.get()) {
    std::cerr << "wrong result\n";
    return 1;
  }
  std::cout << "matches eager libtorch\n";
  return 0;
}
