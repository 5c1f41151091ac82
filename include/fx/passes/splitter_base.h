#pragma once
/// \file
/// _SplitterBase: split a GraphModule into submodules a backend runs
/// (`_run_on_acc_N`) and submodules left to the CPU (`_run_on_cpu_N`), with
/// a report (torch.fx `passes/splitter_base.py`).
///
/// Why: lowering a model to an accelerator (or to any backend that supports
/// only some operators) starts from "which pieces can it take": the
/// splitter groups the supported nodes into as few acc submodules as the
/// dependencies allow, drops those smaller than min_acc_module_size back to
/// the CPU, and node_support_preview / split_preview say what was and was
/// not supported and how many bytes cross each boundary.
///
/// How (torch.fx's algorithm): ShapeProp runs on the sample input;
/// FxNetAccNodesFinder takes the call_* nodes the OperatorSupport accepts
/// and, unless allow_non_tensor, gives back to the CPU those that would pass
/// a non-tensor value to or from a CPU node; FxNetAccFusionsFinder keeps
/// groups of nodes exchanging non-tensor values together (unless
/// skip_fusion). put_nodes_into_subgraphs then walks the graph from its
/// inputs, taking every node of the current kind (acc or cpu) whose
/// dependencies are done, and starts a subgraph of the other kind when none
/// is left. The subgraphs are tagged `_run_on_acc_<i>` or
/// `<non_acc_submodule_name><i>` (i: the subgraph's index) in
/// `node->meta()["tag"]` and cut with split_by_tags.
///
/// Differences from torch.fx:
///  - settings are a struct (torch.fx parses them from sys.argv);
///  - nothing is printed: torch.fx prints "Got N acc subgraphs ...", each
///    eliminated small subgraph and both previews; here the previews return
///    their text and last_log() keeps the other lines;
///  - nodes are taken in graph order (torch.fx: Python set order); which
///    subgraph a node lands in is the same, only the order of Subgraph::nodes
///    can differ;
///  - a call_* node reading only constants (no node input) is a starter node
///    (torch.fx never reaches it and split_by_tags then fails on a node
///    without a tag); an output node is never a starter (torch.fx puts an
///    output reading a placeholder into a cpu subgraph);
///  - put_nodes_into_subgraphs keeps a count of unfinished dependencies per
///    node: linear in graph size (torch.fx rescans every candidate per step);
///  - dump_graph (Graphviz files) is not offered: draw the split module with
///    fx::FxGraphDrawer;
///  - a failing sample run in generate_split_results throws (torch.fx warns
///    and returns what it got).

#include <fx/error.h>
#include <fx/graph_module.h>
#include <fx/passes/operator_support.h>
#include <fx/passes/tools_common.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace fx {

/// torch.fx _SplitterSettingBase (its command line options as fields).
struct SplitterSettings {
  /// Acc subgraphs with fewer nodes go back to the CPU.
  int64_t min_acc_module_size = 1;
  /// No fusion groups (non-tensor values may then cross submodules).
  bool skip_fusion = false;
  /// Let non-tensor values flow between acc and cpu nodes.
  bool allow_non_tensor = false;
};

/// The call_* nodes a backend supports, minus (unless allow_non_tensor)
/// those that would exchange non-tensor values with CPU nodes (torch.fx
/// FxNetAccNodesFinder). Needs ShapeProp's meta["type"].
class FxNetAccNodesFinder {
 public:
  /// Finds acc nodes of `module` with `operator_support`.
  FxNetAccNodesFinder(const GraphModule& module, std::shared_ptr<const OperatorSupportBase> operator_support,
                      bool allow_non_tensor);
  /// The acc nodes.
  NodeSet operator()();

 private:
  void reduce_acc_nodes_non_tensor_input_helper(NodeList cpu_worklist);
  void reduce_acc_nodes_non_tensor_input();
  void reduce_acc_nodes_non_tensor_output();

  const GraphModule& module_;
  std::shared_ptr<const OperatorSupportBase> operator_support_;
  bool allow_non_tensor_;
  NodeSet acc_nodes_;
};

/// The splitter failed in a way it should not (torch.fx FxNetSplitterInternalError).
class FxNetSplitterInternalError : public Error {
 public:
  using Error::Error;
};

/// A piece of the split: acc or cpu, and its nodes (torch.fx Subgraph).
struct Subgraph {
  /// Whether the backend runs it.
  bool is_acc = false;
  /// Its nodes, in the order they were taken.
  NodeList nodes;
};

/// Inputs recorded per submodule name.
using SubmoduleInputs = std::map<std::string, std::vector<c10::IValue>>;

/// What generate_split_results returns (torch.fx SplitResult).
struct SplitResult {
  /// The module after splitting.
  std::shared_ptr<GraphModule> split_module;
  /// Each submodule's inputs on the sample input.
  SubmoduleInputs submodule_inputs;
  /// The prefix of the cpu submodules (acc ones start with "_run_on_acc_").
  std::string non_acc_submodule_prefix;
};

/// Runs `model` on `inputs` and records the arguments of each call of a
/// submodule named in `target_submodules` (the last call wins) (torch.fx
/// generate_inputs_for_submodules, which uses forward pre-hooks). Only
/// call_module nodes of model's own graph are seen.
SubmoduleInputs generate_inputs_for_submodules(const std::shared_ptr<GraphModule>& model,
                                               const std::vector<c10::IValue>& inputs,
                                               const std::vector<std::string>& target_submodules);

/// A lowered submodule, called on the submodule's inputs.
using LoweredModule = std::function<c10::IValue(std::vector<c10::IValue>)>;

/// Splits a GraphModule into acc and cpu submodules (torch.fx _SplitterBase).
/// Derive from it to plug a backend into split_preview (lower_model_to_backend,
/// find_culprit).
class SplitterBase {
 public:
  /// PCIe bandwidth assumed by split_preview: 100 GiB/s.
  static constexpr int64_t PCIe_BW = int64_t(100) << 30;

  /// Runs ShapeProp on `sample_input`, finds acc nodes and fusion groups and
  /// the dependencies between nodes. `module` keeps its graph; tag() marks
  /// its nodes' meta["tag"].
  SplitterBase(std::shared_ptr<GraphModule> module, std::vector<c10::IValue> sample_input,
               std::shared_ptr<const OperatorSupportBase> operator_support, SplitterSettings settings = {},
               std::string non_acc_submodule_name = "_run_on_cpu_");
  virtual ~SplitterBase();

  /// Node name -> the name of the submodule it went to (after tag()).
  const std::map<std::string, std::string>& get_node_submodule_map() const { return node_submodule_map_; }
  /// The acc nodes.
  const NodeSet& acc_nodes() const { return acc_nodes_; }
  /// Each fused node's fusion group.
  const std::unordered_map<Node*, std::shared_ptr<const NodeSet>>& fusions() const { return fusions_; }
  /// Each call_* node's direct dependencies (call_* nodes), fusion groups included.
  const std::unordered_map<Node*, NodeSet>& deps() const { return deps_; }

  /// Direct dependencies of every node on call_* nodes (torch.fx find_deps).
  std::unordered_map<Node*, NodeSet> find_deps() const;
  /// The nodes of a fusion group depend on what any of them depends on, and
  /// users of a group on all of it (torch.fx update_deps_for_fusions).
  void update_deps_for_fusions();

  /// Which targets are supported and with which argument dtypes (torch.fx
  /// node_support_preview's report text).
  std::string node_support_preview();
  /// Splits (without keeping tags), runs the sample input and reports per
  /// acc submodule the bytes in and out, the PCIe-bound throughput and
  /// whether lowering and running it work (torch.fx split_preview's report).
  std::string split_preview();

  /// For every call_* node its call_* users (only those in subgraphs with a
  /// lower number when tag_id is given) (torch.fx find_reverse_deps).
  std::unordered_map<Node*, NodeSet> find_reverse_deps(std::optional<int64_t> tag_id = std::nullopt) const;
  /// Makes a fusion group's nodes share their reverse dependencies (torch.fx
  /// update_reverse_deps_for_fusions).
  void update_reverse_deps_for_fusions(std::unordered_map<Node*, NodeSet>& deps) const;
  /// The call_* nodes outside subgraph `tag` that its nodes read (torch.fx
  /// find_parent_nodes_of_subgraph).
  NodeSet find_parent_nodes_of_subgraph(const std::string& tag) const;
  /// Pulls acc parents into the acc subgraph `tag`, going upwards (torch.fx
  /// extend_acc_subgraph).
  void extend_acc_subgraph(const std::string& tag);

  /// The users of placeholders and get_attr nodes (and call_* nodes without
  /// node inputs): (cpu ones, acc ones) (torch.fx starter_nodes).
  std::pair<NodeSet, NodeSet> starter_nodes() const;
  /// The subgraphs, alternating acc and cpu (torch.fx put_nodes_into_subgraphs).
  std::vector<Subgraph> put_nodes_into_subgraphs();
  /// Merges acc subgraphs smaller than min_acc_module_size into the cpu
  /// subgraph before them (torch.fx remove_small_acc_subgraphs).
  std::vector<Subgraph> remove_small_acc_subgraphs(std::vector<Subgraph> subgraphs);
  /// Tags the subgraphs' nodes; throws FxNetSplitterInternalError "Node N
  /// was already tagged" (torch.fx tag).
  void tag(const std::vector<Subgraph>& subgraphs);
  /// split_by_tags by the tags; with remove_tag the nodes lose them (torch.fx split).
  std::shared_ptr<GraphModule> split(bool remove_tag = false);
  /// put_nodes_into_subgraphs, remove_small_acc_subgraphs, tag, split
  /// (torch.fx __call__).
  std::shared_ptr<GraphModule> operator()();
  /// operator()() and each submodule's inputs on the sample input (torch.fx
  /// generate_split_results).
  SplitResult generate_split_results();

  /// The tags of the last tag(), in order.
  const std::vector<std::string>& tags() const { return tags_; }
  /// Lines torch.fx would have printed ("Got 1 acc subgraphs and 2 non-acc
  /// subgraphs", "Eliminating acc subgraph ...").
  const std::vector<std::string>& last_log() const { return log_; }
  /// The module being split.
  const std::shared_ptr<GraphModule>& module() const { return module_; }

 protected:
  /// Lowers an acc submodule (default: runs it as it is) (torch.fx
  /// _lower_model_to_backend). split_preview reports a throw as a lowering error.
  virtual LoweredModule lower_model_to_backend(const std::shared_ptr<GraphModule>& mod,
                                               const std::vector<c10::IValue>& inputs);
  /// What split_preview appends when lowering or running fails (torch.fx _find_culprit).
  virtual std::string find_culprit(const std::shared_ptr<GraphModule>& mod, const std::vector<c10::IValue>& inputs);

  /// The module being split (torch.fx self.module).
  std::shared_ptr<GraphModule> module_;
  /// Its sample input.
  std::vector<c10::IValue> sample_input_;
  /// What the backend supports.
  std::shared_ptr<const OperatorSupportBase> operator_support_;
  /// The settings.
  SplitterSettings settings_;
  /// Prefix of cpu submodules ("_run_on_cpu_").
  std::string non_acc_submodule_name_;
  /// The acc nodes (torch.fx self.acc_nodes).
  NodeSet acc_nodes_;
  /// Fusion groups (torch.fx self.fusions).
  std::unordered_map<Node*, std::shared_ptr<const NodeSet>> fusions_;
  /// Dependencies (torch.fx self.deps).
  std::unordered_map<Node*, NodeSet> deps_;
  /// Node name -> submodule name.
  std::map<std::string, std::string> node_submodule_map_;
  /// Tags of the last tag().
  std::vector<std::string> tags_;
  /// What torch.fx would have printed.
  std::vector<std::string> log_;
};

}  // namespace fx
