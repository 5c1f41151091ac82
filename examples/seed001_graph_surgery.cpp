// Seed 001, graph surgery: insert a node after another, replace a node,
// move nodes with Node::append (which torch.fx has, whatever the article says),
// and the errors that keep a graph consistent.
//
//   build/examples/seed001_graph_surgery
#include <fx/fx.h>
#include <fx/trace.h>

#include <ATen/ATen.h>

#include <iostream>

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  std::cout << (ok ? "  ok    " : "  FAIL  ") << what << "\n";
  failures += ok ? 0 : 1;
}

/// SimpleModel.forward(x) = x + x, traced.
std::shared_ptr<fx::GraphModule> simple_model() {
  return fx::symbolic_trace([](std::vector<c10::IValue> a) -> c10::IValue { return a[0].toTensor() + a[0].toTensor(); },
                            {at::ones({1})});
}

/// AnotherModel.forward(x): y = x * 2.0; z = y + 1.0.
std::shared_ptr<fx::GraphModule> another_model() {
  return fx::symbolic_trace(
      [](std::vector<c10::IValue> a) -> c10::IValue { return a[0].toTensor().mul(2.0).add(1.0); }, {at::ones({1})});
}

fx::Node* first(fx::Graph& g, const std::string& target_prefix) {
  for (fx::Node* n : g.nodes())
    if (n->op() == fx::Opcode::CallFunction && n->target().rfind(target_prefix, 0) == 0) return n;
  throw fx::Error("no node with target " + target_prefix);
}

}  // namespace

int main() {
  // 1. Insert mul(add, 2) right after add and reroute the output: 3 + 3 = 6, then * 2 = 12.
  auto gm = simple_model();
  fx::Graph& g = gm->graph();
  std::cout << "SimpleModel before:\n" << g.tabular();
  fx::Node* add = first(g, "aten::add");
  fx::Node* mul;
  {
    auto guard = g.inserting_after(add);  // Python: with graph.inserting_after(add):
    mul = g.call_function("aten::mul", {add, 2});
  }
  add->replace_all_uses_with(mul);  // mul itself keeps reading add: no self-reference
  std::cout << "after inserting mul:\n" << g.tabular() << gm->code() << "\n";
  double r = gm->forward(at::full({1}, 3.0)).item<double>();  // recompiled on its own: no stale code
  check(r == 12.0, "insert mul(add, 2) after add: 3 -> " + std::to_string(r));

  // 2. Replace y = x * 2.0 by x + 5.0: (3 + 5) + 1 = 9.
  auto gm2 = another_model();
  fx::Graph& g2 = gm2->graph();
  fx::Node* old_mul = first(g2, "aten::mul");
  fx::Node* replacement;
  {
    auto guard = g2.inserting_before(old_mul);
    replacement = g2.call_function("aten::add", {old_mul->args()[0], 5.0});
  }
  old_mul->replace_all_uses_with(replacement);
  g2.erase_node(old_mul);
  std::cout << "AnotherModel after replacing mul:\n" << g2.tabular();
  r = gm2->forward(at::full({1}, 3.0)).item<double>();
  check(r == 9.0, "replace x * 2.0 by x + 5.0: 3 -> " + std::to_string(r));

  // 3. Node::append moves a node right after another (Node::prepend, right before).
  fx::Graph h;
  fx::Node* x = h.placeholder("x");
  fx::Node* a = h.call_function("aten::relu", {x});
  fx::Node* b = h.call_function("aten::neg", {x});
  x->append(b);
  check(x->next() == b && b->next() == a, "x->append(neg) puts neg right after x");

  // 4. Erasing a node that is still used fails and changes nothing.
  try {
    g.erase_node(add);
    check(false, "erase_node(add) while mul uses it");
  } catch (const fx::Error& e) {
    check(std::string(e.what()) == "Tried to erase Node add but it still had 1 users in the graph: {mul: None}!",
          std::string("erase_node refuses: ") + e.what());
  }

  // 5. The node list is iterable and reversible, not indexable (graph.nodes[-1] is a TypeError).
  fx::Node* last = *g.nodes().reversed().begin();
  check(last->op() == fx::Opcode::Output, "the last node is the output: " + last->format_node());
  return failures == 0 ? 0 : 1;
}
