#pragma once
/// \file
/// split_module: cut a GraphModule into submodules by a partition callback
/// (torch.fx `passes/split_module.py`).
///
/// split_callback maps every call_module / call_function / call_method node
/// to a partition number N; nodes of one number go to a GraphModule child
/// `submod_N`, and the returned module's graph calls the submodules in a
/// topological order of their dependencies (or in the order the partitions
/// first appear, with keep_original_order). Everything follows torch.fx:
/// placeholders and get_attr nodes stay in the top-level graph and are passed
/// to the submodules that use them; a value used outside its partition
/// becomes an output of that partition (several outputs are returned as a
/// tuple and unpacked with operator.getitem); submodule inputs and outputs
/// are ordered by first use; a call_module target "layer1.0.conv1" is
/// installed in its submodule as "layer1_0_conv1" (qualname_map records the
/// mapping). The split module computes the same values as `m`.
///
/// Differences from torch.fx (all "better", none changes a valid result):
///  - the input module is never modified (torch.fx leaves a `_fx_partition`
///    attribute on every node, which even leaks into a second split);
///  - partitions that depend on each other in a cycle are an fx::Error that
///    names the partitions and the nodes that make the cycle (torch.fx:
///    RuntimeError "cycle exists between partitions!" and nothing else);
///  - a negative partition number is an fx::Error (torch.fx makes a module
///    "submod_-1" whose generated code does not parse);
///  - a partition whose values nobody uses is kept and called (torch.fx
///    crashes with an IndexError);
///  - linear time: every table is indexed by Node::id().

#include <fx/error.h>
#include <fx/graph_module.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

namespace fx {

/// Maps a node to its partition number (torch.fx split_callback).
using SplitCallback = std::function<int64_t(Node* node)>;

/// Splits `m` into submodules `submod_N`, one per partition number returned
/// by split_callback (called once per call_* node, in graph order).
/// `root_m` is accepted for torch.fx's signature and not used (targets are
/// resolved in `m`, as in torch.fx). If `qualname_map` is given it receives
/// "submod_N.new_target" -> old target for every call_module. With
/// keep_original_order the submodules are called in the order their
/// partitions first appear instead of a topological order. Throws fx::Error
/// (leaving `m` untouched) on a cycle between partitions, a negative
/// partition number or a call_module target missing from `m`.
std::shared_ptr<GraphModule> split_module(const std::shared_ptr<GraphModule>& m,
                                          const std::shared_ptr<torch::nn::Module>& root_m,
                                          const SplitCallback& split_callback,
                                          std::map<std::string, std::string>* qualname_map = nullptr,
                                          bool keep_original_order = false);

}  // namespace fx
