#pragma once
/// \file
/// Fusing groups of nodes into call_module submodules (torch.fx
/// `passes/utils/fuser_utils.py`, plus `tools_common.legalize_graph`).
///
/// fuse_by_partitions(gm, partitions) replaces every partition (a list of
/// nodes of gm's graph) by one call_module node `fused_<i>` calling a new
/// GraphModule child `fused_<i>` that holds copies of the nodes: values the
/// partition reads from outside become its placeholders (named after the
/// values, in order of first use), values used outside become its outputs
/// (a tuple unpacked with operator.getitem when there are several). The
/// graph is then put in topological order (legalize_graph), as in torch.fx.
///
/// Differences from torch.fx (all "better"):
///  - everything is validated before the first edit, and an invalid input
///    throws fx::Error naming the nodes and leaves the module as it was:
///    nodes of another graph or erased, placeholder/output nodes, a node in
///    two partitions, an existing `fused_<i>` attribute, and any cycle the
///    fusion would make — also cycles *between* partitions that are each
///    valid alone (torch.fx checks partitions one at a time and asserts);
///  - the cycle check is one linear pass over the graph (torch.fx runs an
///    unbounded DFS per partition);
///  - nodes inside a fused module keep the original graph order (torch.fx
///    sorts a Python set: its order can change from run to run).

#include <fx/error.h>
#include <fx/graph_module.h>

#include <memory>
#include <string>
#include <vector>

namespace fx {

/// A list of nodes (torch.fx NodeList).
using NodeList = std::vector<Node*>;

/// `nodes` in a topological order of their dependencies among themselves,
/// ties kept in the given order (torch.fx topo_sort). Throws fx::Error if
/// they depend on each other in a cycle.
NodeList topo_sort(const NodeList& nodes);

/// Whether fusing `partition` into one node keeps the graph acyclic: no path
/// leaves the partition and comes back (torch.fx validate_partition). One
/// pass over the graph, O(nodes + uses) (torch.fx: a DFS per outside user).
bool validate_partition(const NodeList& partition);

/// What fuse_as_graphmodule returns.
struct FusedGraphModule {
  /// The new module holding copies of the nodes.
  std::shared_ptr<GraphModule> module;
  /// The values outside the partition it reads, in placeholder order.
  NodeList original_inputs;
  /// The partition's nodes used outside it, in output order.
  NodeList original_outputs;
};

/// Copies `nodes` (topologically sorted, of gm's graph) into a new
/// GraphModule with class name `module_name` (torch.fx fuse_as_graphmodule).
/// `gm` is not changed. Throws fx::Error if the partition is invalid.
FusedGraphModule fuse_as_graphmodule(const std::shared_ptr<GraphModule>& gm, const NodeList& nodes,
                                     const std::string& module_name);

/// Installs `sub_gm` in `gm` under its class name and calls it on
/// orig_inputs before gm's output node; the users of orig_outputs use the
/// call's results instead (torch.fx insert_subgm). Leaves the graph
/// unsorted until legalize_graph().
void insert_subgm(GraphModule& gm, const std::shared_ptr<GraphModule>& sub_gm, const NodeList& orig_inputs,
                  const NodeList& orig_outputs);

/// Erases `nodes` from gm's graph, last first (torch.fx erase_nodes).
void erase_nodes(GraphModule& gm, const NodeList& nodes);

/// Replaces gm's graph by a copy of it in topological order (Kahn's
/// algorithm, first-in first-out, as torch.fx legalize_graph; unlike
/// torch.fx the output node always stays last). Throws
/// fx::Error naming the nodes left if the graph has a cycle.
void legalize_graph(GraphModule& gm);

/// Fuses every partition into a submodule `fused_<i>` (torch.fx
/// fuse_by_partitions); returns `gm`, edited in place. Validates all
/// partitions first: on error nothing is changed.
std::shared_ptr<GraphModule> fuse_by_partitions(const std::shared_ptr<GraphModule>& gm,
                                                const std::vector<NodeList>& partitions);

}  // namespace fx
