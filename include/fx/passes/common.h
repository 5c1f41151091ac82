#pragma once
/// \file
/// lift_subgraph_as_module and compare_graphs (torch.fx
/// `passes/utils/common.py`).
///
/// lift_subgraph_as_module turns a graph of nodes copied out of a parent
/// GraphModule into a GraphModule of its own, sharing (not copying) the
/// submodules, parameters and buffers its call_module and get_attr nodes
/// name, under the same dotted paths (torch.fx builds HolderModules for the
/// intermediate names; fxcpp's GraphModule constructor creates the same
/// empty parents). Splitters and the minimizer use it to run one piece of a
/// model alone.
///
/// compare_graphs says whether two graphs are the same computation: same
/// inputs and outputs in the same order and the same nodes and connections
/// (a SubgraphMatcher match with match_output and match_placeholder).
///
/// Difference from torch.fx: a target missing from the parent is an
/// fx::Error naming the node (torch.fx: AttributeError from getattr).

#include <fx/error.h>
#include <fx/graph_module.h>

#include <memory>
#include <string>

namespace fx {

/// A GraphModule over `subgraph` whose call_module / get_attr targets are
/// taken from `gm` (torch.fx lift_subgraph_as_module). Throws fx::Error
/// naming the node when `gm` has no such attribute.
std::shared_ptr<GraphModule> lift_subgraph_as_module(const std::shared_ptr<GraphModule>& gm,
                                                     std::shared_ptr<Graph> subgraph,
                                                     const std::string& class_name = "GraphModule");

/// Whether `left` and `right` are identical graphs: the same inputs and
/// outputs in the same order and the same nodes and connectivity (torch.fx
/// compare_graphs).
bool compare_graphs(const Graph& left, const Graph& right);

}  // namespace fx
