#pragma once
// Internal: nodes that return their first input, replaced by it in a module
// and every graph below it (remove_dropout, remove_noops).
#include <fx/graph_module.h>

#include <functional>

namespace fx::passes_detail {

/// Lints every graph of `gm` (branches and loop bodies first, fx::for_each_subgraph),
/// collects the nodes `select` picks in each (before any edit: a throwing
/// `select` leaves everything unchanged), then replaces each by args[0] and
/// erases it, deleting submodules no longer used. True if any was removed.
bool bypass_nodes(GraphModule& gm, const std::function<bool(GraphModule& owner, const Node* n)>& select);

}  // namespace fx::passes_detail
