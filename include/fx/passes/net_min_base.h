#pragma once
/// \file
/// _MinimizerBase: find the smallest part of a model whose outputs differ
/// between two ways of running it (torch.fx `passes/net_min_base.py`).
///
/// Why: when an optimised, lowered or quantized model disagrees with the
/// fp32 one, the question is which node is to blame. The minimizer cuts the
/// model into three submodules (the nodes before, the nodes under test —
/// `minimize` — and the nodes after, with split_by_tags), runs the
/// `minimize` submodule both ways (run_a and run_b, e.g. plain and lowered)
/// on the same inputs, compares the results with compare_fn, and narrows
/// the nodes down until it finds the culprits.
///
/// Traversals (settings.traverse_method), as torch.fx 1.13:
///  - "sequential": every node alone (its fusion group with it), output the
///    node; culprits: the nodes whose result mismatches (or the fusion
///    group whose run fails);
///  - "binary": the whole range, then each half of a failing range,
///    recursively; a failing single node is a culprit;
///  - "accumulate": the first node, then the first two, ... until the
///    accumulated submodule fails; its last node is the culprit.
/// find_all keeps searching after the first culprit ("accumulate" throws
/// fx::Error "'Find All' mode is not supported in accumulate traversal.",
/// where torch.fx prints it and returns no culprit).
/// accumulate_error feeds run_b the outputs run_b produced for earlier
/// nodes (errors add up); otherwise both runs get run_a's values (or, for
/// values not produced by an earlier run, the inputs the submodule gets when
/// the split model runs the sample input).
///
/// run_a / run_b are virtual (derive, as in torch.fx) or given as
/// functions; they throw FxNetMinimizerRunFuncError to report a run
/// failure (the submodule then counts as failing). compare_fn returns
/// (a number recorded in results() and the reports, whether a and b agree).
///
/// Differences from torch.fx:
///  - nothing is printed: torch.fx prints the settings, the graph and every
///    report as it goes; here reports() holds them (print_reports());
///  - minimize() returns the culprits in graph order (torch.fx: a set);
///    sets of nodes in reports are printed in graph order ("{relu, add}",
///    torch.fx: set order);
///  - results() is keyed by the text of torch.fx's result key ("('relu',)");
///  - binary search with find_all returns the culprits of both halves
///    (torch.fx 1.13 keeps only the second half's);
///  - the "defined" traversal of later torch.fx versions is not in 1.13
///    and not offered.

#include <fx/error.h>
#include <fx/graph_module.h>
#include <fx/passes/tools_common.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace fx {

/// A minimize submodule could not be split out (torch.fx FxNetMinimizerBadModuleError).
class FxNetMinimizerBadModuleError : public Error {
 public:
  using Error::Error;
};
/// run_a or run_b failed (throw it from them) (torch.fx FxNetMinimizerRunFuncError).
class FxNetMinimizerRunFuncError : public Error {
 public:
  using Error::Error;
};
/// compare_fn said the results differ (torch.fx FxNetMinimizerResultMismatchError).
class FxNetMinimizerResultMismatchError : public Error {
 public:
  using Error::Error;
};

/// torch.fx _MinimizerSettingBase.
struct MinimizerSettings {
  /// run_b gets run_b's earlier outputs instead of run_a's.
  bool accumulate_error = false;
  /// "sequential", "binary" or "accumulate".
  std::string traverse_method = "sequential";
  /// Report every culprit, not only the first.
  bool find_all = false;
  /// run_nodes() outputs every node it runs.
  bool return_intermediate = false;
  /// torch.fx's str(): "FX Minimizer Settings:\n\taccumulate_error: False\n...".
  std::string str() const;
};

/// Runs a submodule on its inputs (run_a / run_b).
using MinimizerRunFn =
    std::function<c10::IValue(const std::shared_ptr<GraphModule>& mod, const std::vector<c10::IValue>& inputs)>;
/// Compares run_a's and run_b's results for the outputs named `names`:
/// (a number to report, whether they agree).
using MinimizerCompareFn = std::function<std::pair<double, bool>(const c10::IValue& a, const c10::IValue& b,
                                                                 const std::vector<std::string>& names)>;

/// Finds the nodes whose results differ between run_a and run_b (torch.fx _MinimizerBase).
class MinimizerBase {
 public:
  /// Runs ShapeProp on `sample_input` (one value per placeholder, else
  /// fx::Error) and finds the fusion groups. run_a / run_b may be empty when
  /// a derived class overrides them.
  MinimizerBase(std::shared_ptr<GraphModule> module, std::vector<c10::IValue> sample_input,
                MinimizerCompareFn compare_fn, MinimizerSettings settings = {}, MinimizerRunFn run_a = nullptr,
                MinimizerRunFn run_b = nullptr);
  virtual ~MinimizerBase();

  /// Runs `mod` the first way (default: the run_a function; without one
  /// fx::Error "run_a() is not implemented.").
  virtual c10::IValue run_a(const std::shared_ptr<GraphModule>& mod, const std::vector<c10::IValue>& inputs);
  /// Runs `mod` the second way (default: the run_b function).
  virtual c10::IValue run_b(const std::shared_ptr<GraphModule>& mod, const std::vector<c10::IValue>& inputs);

  /// The culprits among the call_* nodes from the one named `start` to the
  /// one named `end` (both included; the first / last when nullopt), found
  /// by settings().traverse_method, in graph order (torch.fx minimize).
  /// Throws fx::Error "Unknow traverse method X!" (torch.fx's text), and
  /// "minimizer: the module has no call_* node named X" for a start or end
  /// that names no call_* node (torch.fx then silently runs from the first
  /// node, or to the last).
  NodeList minimize(const std::optional<std::string>& start = std::nullopt,
                    const std::optional<std::string>& end = std::nullopt);
  /// Runs the nodes from `start` to `end` as one submodule both ways and
  /// compares them (all of them output with return_intermediate); a
  /// mismatch or run failure is recorded in the reports, not thrown
  /// (torch.fx run_nodes).
  void run_nodes(const std::optional<std::string>& start = std::nullopt,
                 const std::optional<std::string>& end = std::nullopt);

  /// One list of lines per iteration (torch.fx self.reports).
  const std::vector<std::vector<std::string>>& reports() const { return reports_; }
  /// Prints one report as torch.fx does: the first line, then " . line".
  static void print_report(std::ostream& os, const std::vector<std::string>& report);
  /// Prints every report.
  void print_reports(std::ostream& os) const;
  /// compare_fn's number per result key ("('relu',)").
  const std::map<std::string, double>& results() const { return results_; }
  /// run_a's stored outputs by node name (the sample input under the placeholders' names).
  const std::map<std::string, c10::IValue>& a_outputs() const { return a_outputs_; }
  /// run_b's stored outputs by node name.
  const std::map<std::string, c10::IValue>& b_outputs() const { return b_outputs_; }
  /// The settings.
  const MinimizerSettings& settings() const { return settings_; }
  /// The fusion groups of the module.
  const std::unordered_map<Node*, std::shared_ptr<const NodeSet>>& fusions() const { return fusions_; }

 protected:
  /// The call_* nodes from `start` to `end` (torch.fx _collect_nodes).
  NodeList collect_nodes(const std::optional<std::string>& start, const std::optional<std::string>& end) const;
  /// Tags `selected_nodes` "minimize", the nodes after them "main_1", the rest "main_0".
  void tag_nodes(const NodeSet& selected_nodes);
  /// The module split by those tags and the name of its minimize submodule.
  std::pair<std::shared_ptr<GraphModule>, std::string> build_submodule(const NodeSet& nodes);
  /// Runs the minimize submodule both ways, stores and compares the results;
  /// throws FxNetMinimizerResultMismatchError on a mismatch.
  void run_and_compare(const std::shared_ptr<GraphModule>& split_module, const std::string& submod_name,
                       const std::vector<std::string>& output_names);
  /// build_submodule + run_and_compare; true when a run failed
  /// (FxNetMinimizerRunFuncError) or the results mismatched.
  bool fails(const NodeSet& nodes, const std::vector<std::string>& output_names);

 private:
  std::pair<std::vector<c10::IValue>, std::vector<c10::IValue>> get_submod_inputs(
      const std::shared_ptr<GraphModule>& main_module, const std::string& submod_path);
  void store_outputs(const c10::IValue& a_result, const c10::IValue& b_result, const GraphModule& submodule);
  NodeSet binary_search_impl(const NodeList& all_nodes, size_t start_idx, size_t end_idx);
  NodeSet sequential_traverse(const NodeList& nodes);
  NodeSet accumulate_traverse(const NodeList& nodes);
  std::vector<std::string>& new_report();

  std::shared_ptr<GraphModule> module_;
  std::vector<c10::IValue> sample_input_;
  MinimizerCompareFn compare_fn_;
  MinimizerSettings settings_;
  MinimizerRunFn run_a_fn_, run_b_fn_;
  std::map<std::string, c10::IValue> a_outputs_, b_outputs_;
  std::map<std::string, double> results_;
  std::vector<std::vector<std::string>> reports_;
  size_t iteration_ = 0;
  std::unordered_map<Node*, std::shared_ptr<const NodeSet>> fusions_;
};

}  // namespace fx
