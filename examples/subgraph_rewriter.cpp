// Subgraph rewriting: replace every relu(a + b) in a model by the fused
// aten::_add_relu, with the pattern and the replacement written as plain C++
// functions and traced (torch.fx's subgraph_rewriter.replace_pattern).
//
//   build/examples/subgraph_rewriter
#include <ATen/ATen.h>
#include <fx/fx.h>
#include <fx/passes/subgraph_rewriter.h>
#include <fx/trace.h>

#include <iostream>

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  std::cout << (ok ? "  ok    " : "  FAIL  ") << what << "\n";
  failures += ok ? 0 : 1;
}

at::Tensor t(const c10::IValue& v) { return v.toTensor(); }

// The model: two relu(a + b) back to back, and one whose add is also used
// elsewhere (so it must not be replaced: its add would disappear).
c10::IValue model(std::vector<c10::IValue> in) {
  at::Tensor x = t(in[0]), y = t(in[1]);
  at::Tensor a = at::relu(x + y);
  at::Tensor b = at::relu(a + y);
  at::Tensor s = b + x;
  return at::relu(s) * s;
}

}  // namespace

int main() {
  const at::Tensor x = at::randn({4, 8}), y = at::randn({4, 8});
  const at::Tensor eager = t(model({x, y}));

  // 1. Trace the model, the pattern and the replacement (example inputs give shapes).
  auto gm = fx::symbolic_trace(model, {x, y});
  auto pattern =
      fx::symbolic_trace([](std::vector<c10::IValue> a) -> c10::IValue { return at::relu(t(a[0]) + t(a[1])); }, {x, y});
  auto replacement = fx::symbolic_trace(
      [](std::vector<c10::IValue> a) -> c10::IValue { return at::_add_relu(t(a[0]), t(a[1])); }, {x, y});
  std::cout << "pattern:\n" << pattern->code() << "\nreplacement:\n" << replacement->code() << "\n";
  std::cout << "before:\n" << gm->code() << "\n";

  // 2. Replace. Each Match maps the pattern's nodes to what they matched.
  std::vector<fx::Match> matches = fx::replace_pattern(*gm, *pattern, *replacement);
  std::cout << "after:\n" << gm->code() << "\n";
  for (const fx::Match& m : matches) {
    std::cout << "  match at " << m.nodes_map.node(m.anchor)->name() << ":";
    for (const auto& [pattern_node, value] : m.nodes_map)
      std::cout << " " << pattern_node->name() << "->" << value.repr();
    std::cout << "\n";
  }

  // 3. Check: two matches (the back-to-back pair; relu(b + x) keeps its add,
  //    which the multiplication also reads), same values as eager.
  check(matches.size() == 2,
        "2 matches replaced, the third relu(add) is left alone: " + std::to_string(matches.size()));
  check(gm->graph().find_nodes(fx::Opcode::CallFunction, "aten::_add_relu.Tensor").size() == 2,
        "2 fused aten::_add_relu.Tensor nodes");
  gm->graph().lint();
  check(at::allclose(gm->forward({x, y}).toTensor(), eager), "rewritten module == eager");

  // 4. Filters decide match by match (torch.fx replace_pattern_with_filters):
  //    here only a relu(a + b) whose `a` is a graph input.
  auto gm2 = fx::symbolic_trace(model, {x, y});
  fx::MatchFilter first_input_is_placeholder = [&](const fx::InternalMatch& m, const fx::Graph&, const fx::Graph&) {
    return m.placeholder_nodes[0].is_node() && m.placeholder_nodes[0].to_node()->op() == fx::Opcode::Placeholder;
  };
  auto replaced = fx::replace_pattern_with_filters(*gm2, *pattern, *replacement, {first_input_is_placeholder});
  check(replaced.size() == 1 && replaced[0].replacements.size() == 1,
        "with a filter: 1 match, replaced by " + replaced[0].replacements[0]->name());
  check(at::allclose(gm2->forward({x, y}).toTensor(), eager), "filtered rewrite == eager");

  // 5. Bad input changes nothing: a replacement with another number of inputs.
  auto one_input = fx::symbolic_trace([](std::vector<c10::IValue> a) -> c10::IValue { return at::relu(t(a[0])); }, {x});
  const std::string before = gm2->graph().str();
  try {
    fx::replace_pattern(*gm2, *pattern, *one_input);
    check(false, "a replacement with 1 input is rejected");
  } catch (const fx::Error& e) {
    std::cout << "  error: " << e.what() << "\n";
    check(gm2->graph().str() == before, "graph unchanged after the error");
  }
  std::cout << (failures == 0 ? "all checks passed" : "SOME CHECKS FAILED") << "\n";
  return failures == 0 ? 0 : 1;
}
