// Nodes replaced by their first input, graph by graph (see bypass.h).
#include "passes/bypass.h"

#include <fx/passes/pass_manager.h>

#include <utility>
#include <vector>

namespace fx::passes_detail {

bool bypass_nodes(GraphModule& gm, const std::function<bool(GraphModule& owner, const Node* n)>& select) {
  std::vector<std::pair<GraphModule*, std::vector<Node*>>> found;
  for_each_graph_module(gm, [&](GraphModule& m) {
    m.graph().lint();
    std::vector<Node*> nodes;
    for (Node* n : m.graph().nodes())
      if (select(m, n)) nodes.push_back(n);
    found.emplace_back(&m, std::move(nodes));
  });
  bool removed = false;
  for (auto& [m, nodes] : found) {
    bool modules = false;
    for (Node* n : nodes) {
      // A node's input may itself have been removed: read args[0] now.
      n->replace_all_uses_with(n->args()[0].to_node());
      modules = modules || n->op() == Opcode::CallModule;
      m->graph().erase_node(n);
    }
    if (modules) m->delete_all_unused_submodules();
    removed = removed || !nodes.empty();
  }
  return removed;
}

}  // namespace fx::passes_detail
