// copy_control_flow: a module's branches and loop bodies made its own, so
// that a pass producing a new module can rewrite them without touching the
// module it started from (see graph_copy.h).
#include "passes/graph_copy.h"

#include <fx/control_flow.h>

namespace fx::passes_detail {

namespace {

/// A new GraphModule over a copy of `gm`'s graph (sharing its leaves and
/// tensors), with its own control flow below it.
std::shared_ptr<GraphModule> copy_graph_module(GraphModule& gm) {
  auto shared = std::dynamic_pointer_cast<GraphModule>(gm.shared_from_this());
  auto copy = std::make_shared<GraphModule>(shared, copy_graph(gm.graph()), gm.class_name());
  copy_control_flow(*copy);
  return copy;
}

}  // namespace

void copy_control_flow(GraphModule& gm) {
  for (const auto& item : gm.named_children()) {
    std::shared_ptr<torch::nn::Module> replacement;
    if (auto* cond = dynamic_cast<CondModule*>(item.value().get())) {
      replacement = std::make_shared<CondModule>(copy_graph_module(cond->true_graph()),
                                                 copy_graph_module(cond->false_graph()), cond->num_results());
    } else if (auto* loop = dynamic_cast<WhileLoopModule*>(item.value().get())) {
      replacement = std::make_shared<WhileLoopModule>(copy_graph_module(loop->body()), loop->num_carried());
    }
    if (replacement) gm.add_submodule(item.key(), replacement);
  }
}

}  // namespace fx::passes_detail
