// Seed 000, Node::kwargs: read a node's keyword arguments, set one the right
// way (update_kwarg; kwargs() is a read-only view, so `kwargs["k"] = v` does
// not compile), and the in-place ReLU rewrite done safely.
//
//   build/examples/seed000_kwargs
#include <fx/fx.h>
#include <fx/trace.h>

#include <ATen/ATen.h>

#include <iostream>

int main() {
  int failures = 0;
  auto check = [&](bool ok, const std::string& what) {
    std::cout << (ok ? "  ok    " : "  FAIL  ") << what << "\n";
    failures += ok ? 0 : 1;
  };

  // forward(x, y) = relu(x + y)
  auto gm = fx::symbolic_trace(
      [](std::vector<c10::IValue> a) -> c10::IValue { return at::relu(a[0].toTensor() + a[1].toTensor()); },
      {at::randn({4}), at::randn({4})});
  fx::Graph& g = gm->graph();
  std::cout << g << "\n";

  // Index 0 and 1 are the placeholders x and y; the add comes next (not "index 1 is relu").
  std::vector<fx::Node*> nodes = g.nodes().to_vector();
  fx::Node* add = nodes[2];
  check(add->target().rfind("aten::add", 0) == 0, "nodes[2] is the add: " + add->format_node());
  check(add->kwargs().empty(), "the add has no kwargs yet");

  // add.update_kwarg('alpha', 2): x + 2 * y. (add->kwargs() is const: it cannot be assigned to.)
  add->update_kwarg("alpha", 2);
  at::Tensor x = at::randn({4}), y = at::randn({4});
  at::Tensor out = gm->forward({x, y}).toTensor();
  check(at::allclose(out, at::relu(x + 2 * y)), "update_kwarg(alpha, 2) computes relu(x + 2*y)");

  // In-place ReLU saves a buffer, but only when nothing else reads its input afterwards.
  fx::Node* relu = nodes[3];
  fx::Node* input = relu->args()[0].to_node();
  bool safe = input->users().size() == 1;  // relu is the only reader of add
  check(safe, "relu is the only user of " + input->name() + ": the in-place rewrite is safe");
  if (safe) {
    fx::Node* relu_;
    {
      auto guard = g.inserting_after(relu);
      relu_ = g.call_function("aten::relu_", relu->args());
    }
    relu->replace_all_uses_with(relu_);
    g.erase_node(relu);
  }
  std::cout << gm->code() << "\n";
  out = gm->forward({x, y}).toTensor();
  check(at::allclose(out, at::relu(x + 2 * y)), "relu_ gives the same values");
  return failures == 0 ? 0 : 1;
}
