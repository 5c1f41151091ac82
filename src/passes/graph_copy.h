#pragma once
// Internal: an independent copy of a graph (same names, args, meta, the
// output's meta too): PassManager rolls back to it, optimize_for_inference
// rewrites it (with its own copies of the branches and loop bodies).
#include <fx/graph.h>
#include <fx/graph_module.h>

#include <memory>

namespace fx::passes_detail {

/// A copy of `g` sharing nothing with it.
std::shared_ptr<Graph> copy_graph(const Graph& g);

/// Replaces each control-flow child of `gm` (CondModule, WhileLoopModule)
/// by a new one whose branch / body GraphModules run copies of the graphs
/// (recursively; leaves and tensors stay shared), so that editing them
/// leaves the module `gm` was copied from unchanged.
void copy_control_flow(GraphModule& gm);

}  // namespace fx::passes_detail
