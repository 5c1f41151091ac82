#pragma once
/// \file
/// CapabilityBasedPartitioner (torch.fx `passes/infra/partitioner.py`):
/// group the nodes a backend supports into maximal partitions and fuse each
/// into a call_module submodule.
///
/// propose_partitions() visits the supported nodes last to first; a node
/// joins the partitions of its users, merging them, except those that
/// depend on another user's partition (torch.fx's rules, plus a check that
/// fusing never makes a cycle); then getitem nodes move to their producer's
/// partition and, unless allows_single_node_partition, partitions with at
/// most one compute node (call_function other than non_compute_ops) are
/// dropped. fuse_partitions() calls fuse_by_partitions (fuser_utils.h).
///
/// Differences from torch.fx (all "better"):
///  - no cycle, ever: torch.fx 1.13 only checks that the user partitions a
///    node joins do not depend on each other, so it can propose partitions
///    P and Q where P needs an output of Q and Q one of P (4 of the 30
///    random graphs in tests/passes/partitioner_test.cpp); its
///    fuse_partitions then asserts half way. fxcpp also checks, before each
///    merge, that no path leaves the merged set and comes back once every
///    partition is fused (a path reaching a partition continues from all of
///    its nodes), and merges only what passes; elsewhere its partitions are
///    torch.fx's;
///  - only call_function / call_method / call_module nodes are candidates:
///    torch.fx's OperatorSupport says "supported" for placeholders, get_attr
///    and output nodes, so torch.fx 1.13 pulls the graph's inputs and its
///    output node into a partition and fuse_partitions then builds a broken
///    module;
///  - no quadratic step: torch.fx keeps every node's full ancestor set
///    (O(N^2) memory) and compares user partitions node pair by node pair.
///    fxcpp decides "does one user partition depend on another" with one
///    search in program order, run only when a node's users lie in two or
///    more partitions; each partition's search starts at its nodes before
///    the other candidates' last node and stops there (topological
///    positions bound it), never walking a whole partition. Partitions merge
///    small-into-large. Chains, ladders and side outputs cost 0.5-2 us per
///    node from 1k to 100k nodes (bench/split_bench.cpp); only a long path
///    of unsupported nodes between two user partitions makes a search as
///    long as that path;
///  - the nodes of a Partition are in program order (torch.fx: a set).

#include <fx/error.h>
#include <fx/graph_module.h>
#include <fx/passes/fuser_utils.h>
#include <fx/passes/operator_support.h>

#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

namespace fx {

/// A group of nodes to fuse (torch.fx infra.partitioner.Partition).
struct Partition {
  /// The partition's number (its order of creation).
  int64_t id = -1;
  /// The nodes, in program order.
  NodeList nodes;
  /// How many nodes it holds.
  size_t size() const { return nodes.size(); }
};

/// Proposes partitions of supported nodes and fuses them (torch.fx
/// CapabilityBasedPartitioner).
class CapabilityBasedPartitioner {
 public:
  /// Partitions `graph_module`'s graph using `operator_support`. Without
  /// allows_single_node_partition, partitions with at most one compute node
  /// are dropped; call_function targets in `non_compute_ops` do not count as
  /// compute (torch.fx: aten.view and operator.getitem).
  CapabilityBasedPartitioner(std::shared_ptr<GraphModule> graph_module,
                             std::shared_ptr<const OperatorSupportBase> operator_support,
                             bool allows_single_node_partition = false,
                             std::unordered_set<std::string> non_compute_ops = {"aten::view", "operator.getitem"});

  /// The partitions, ordered by id; nothing is changed.
  std::vector<Partition> propose_partitions();
  /// Fuses `partitions` into submodules fused_0, fused_1 ... (in this
  /// order); returns the module, edited in place. Throws fx::Error and
  /// changes nothing if the partitions are invalid.
  std::shared_ptr<GraphModule> fuse_partitions(const std::vector<Partition>& partitions);
  /// propose_partitions() then fuse_partitions().
  std::shared_ptr<GraphModule> partition_and_fuse();

  /// The module being partitioned.
  const std::shared_ptr<GraphModule>& graph_module() const { return graph_module_; }

 private:
  std::shared_ptr<GraphModule> graph_module_;
  std::shared_ptr<const OperatorSupportBase> operator_support_;
  bool allows_single_node_partition_;
  std::unordered_set<std::string> non_compute_ops_;
};

}  // namespace fx
