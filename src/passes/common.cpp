// lift_subgraph_as_module and compare_graphs (torch.fx passes/utils/common.py).
#include <fx/passes/common.h>

#include <fx/passes/split_utils.h>
#include <fx/passes/subgraph_matcher.h>

namespace fx {

std::shared_ptr<GraphModule> lift_subgraph_as_module(const std::shared_ptr<GraphModule>& gm,
                                                     std::shared_ptr<Graph> subgraph,
                                                     const std::string& class_name) {
  if (!gm || !subgraph) throw Error("lift_subgraph_as_module: no module or no subgraph");
  // torch.fx's HolderModule: every call_module / get_attr target at its
  // dotted path, the parent's object shared.
  auto holder = std::make_shared<torch::nn::Module>("HolderModule");
  for (Node* n : subgraph->nodes()) {
    if (n->op() != Opcode::CallModule && n->op() != Opcode::GetAttr) continue;
    if (!has_attr_recursive(*gm, n->target()))
      throw Error("lift_subgraph_as_module: the parent module has no attribute " + n->target() + " (node " +
                  n->name() + ")");
    copy_attr_recursive(*gm, n->target(), *holder, n->target());
  }
  return std::make_shared<GraphModule>(holder, std::move(subgraph), class_name);
}

bool compare_graphs(const Graph& left, const Graph& right) {
  SubgraphMatcher matcher(left, /*match_output=*/true, /*match_placeholder=*/true);
  return !matcher.match(right).empty();
}

}  // namespace fx
