#pragma once
// Internal: an independent copy of a graph (same names, args, meta, the
// output's meta too): PassManager rolls back to it, optimize_for_inference
// rewrites it.
#include <fx/graph.h>

#include <memory>

namespace fx::passes_detail {

/// A copy of `g` sharing nothing with it.
std::shared_ptr<Graph> copy_graph(const Graph& g);

}  // namespace fx::passes_detail
