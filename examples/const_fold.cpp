// Constant folding and argument normalization, for newcomers.
//
// A layer that rescales and transposes its weight on every call,
//     y = x @ (w * 0.5).t() + relu(b)
// wastes time: `(w * 0.5).t()` and `relu(b)` depend only on attributes.
// fx::split_const_subgraphs computes them once and stores the results as
// new attributes; fx::run_folding refreshes them if the weights change.
// fx::normalize_args then spells every operator call in its schema's
// keyword form with the overload resolved (aten::mm(self=..., mat2=...)).
// The program checks its own results and exits 1 on a wrong value.
#include <fx/graph_module.h>
#include <fx/passes/const_fold.h>
#include <fx/passes/normalize.h>

#include <ATen/ATen.h>

#include <iostream>

int main() {
  // The module that owns the attributes.
  auto root = std::make_shared<torch::nn::Module>("Layer");
  root->register_buffer("w", at::arange(6, at::kFloat).reshape({2, 3}));
  root->register_buffer("b", at::tensor({-1.0f, 2.0f}));

  // The graph: x @ (w * 0.5).t() + relu(b).
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* w = g->get_attr("w");
  fx::Node* scaled = g->call_function("aten::mul", {w, 0.5});
  fx::Node* wt = g->call_function("aten::t", {scaled});
  fx::Node* mm = g->call_function("aten::mm", {x, wt});
  fx::Node* b = g->get_attr("b");
  fx::Node* rb = g->call_function("aten::relu", {b});
  g->output(g->call_function("aten::add", {mm, rb}));
  auto gm = std::make_shared<fx::GraphModule>(root, g);

  at::Tensor input = at::ones({4, 3});
  at::Tensor expected = gm->forward(input);
  std::cout << "before folding:" << gm->code() << "\n";

  // 1. Fold the constants: mul, t and relu run once, here.
  fx::ConstFoldResult folded = fx::split_const_subgraphs(gm);
  std::cout << "after folding:" << gm->code() << "\n";
  for (const auto& a : folded.folded_attrs) std::cout << "  new attribute " << a.name << " holds " << a.source_node << "\n";
  if (!folded.pass_result.modified || folded.folded_attrs.size() != 2 || !at::allclose(gm->forward(input), expected)) {
    std::cerr << "constant folding changed the result\n";
    return 1;
  }

  // 2. The weights change: refold, and the module follows.
  {
    at::NoGradGuard no_grad;
    gm->fetch_attr("w").mul_(2);
  }
  fx::run_folding(folded);
  at::Tensor expected2 = at::mm(input, (root->named_buffers()["w"] * 0.5).t()) + at::relu(root->named_buffers()["b"]);
  if (!at::allclose(gm->forward(input), expected2)) {
    std::cerr << "run_folding did not pick up the new weights\n";
    return 1;
  }

  // 3. Normalize: every call in its schema's keyword form.
  fx::normalize_args(gm);
  std::cout << "after normalizing:\n" << gm->graph() << "\n";
  if (!at::allclose(gm->forward(input), expected2)) {
    std::cerr << "normalization changed the result\n";
    return 1;
  }
  std::cout << "OK\n";
  return 0;
}
