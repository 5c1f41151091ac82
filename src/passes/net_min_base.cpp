// _MinimizerBase (torch.fx passes/net_min_base.py): narrow a model down to
// the nodes whose results differ between run_a and run_b.
#include <fx/passes/net_min_base.h>

#include <fx/passes/shape_prop.h>
#include <fx/passes/split_utils.h>
#include <fx/passes/splitter_base.h>

#include <algorithm>

namespace fx {

namespace {

const char* py_bool(bool b) { return b ? "True" : "False"; }

/// torch.fx's repr of a set of nodes, in graph order: "{relu, add}".
std::string set_repr(const NodeSet& nodes) {
  std::string s = "{";
  for (Node* n : sorted_by_position(nodes)) s += (s.size() > 1 ? ", " : "") + n->name();
  return s + "}";
}

/// Python's repr of a list of nodes: "[relu, add]".
std::string list_repr(const NodeList& nodes) {
  std::string s = "[";
  for (size_t i = 0; i < nodes.size(); ++i) s += (i ? ", " : "") + nodes[i]->name();
  return s + "]";
}

/// Item `i` of a tuple or list value.
c10::IValue item(const c10::IValue& v, size_t i) {
  if (v.isTuple()) return v.toTupleRef().elements().at(i);
  if (v.isList()) return v.toListRef().at(i);
  throw Error("minimizer: a submodule with several outputs returned neither a tuple nor a list");
}

}  // namespace

std::string MinimizerSettings::str() const {
  return std::string("FX Minimizer Settings:\n") + "\taccumulate_error: " + py_bool(accumulate_error) + "\n" +
         "\ttraverse_method: " + traverse_method + "\n" + "\tfind_all: " + py_bool(find_all) + "\n" +
         "\treturn_intermediate: " + py_bool(return_intermediate) + "\n";
}

MinimizerBase::MinimizerBase(std::shared_ptr<GraphModule> module, std::vector<c10::IValue> sample_input,
                             MinimizerCompareFn compare_fn, MinimizerSettings settings, MinimizerRunFn run_a,
                             MinimizerRunFn run_b)
    : module_(std::move(module)),
      sample_input_(std::move(sample_input)),
      compare_fn_(std::move(compare_fn)),
      settings_(std::move(settings)),
      run_a_fn_(std::move(run_a)),
      run_b_fn_(std::move(run_b)) {
  if (!module_) throw Error("MinimizerBase: no module");
  if (!compare_fn_) throw Error("MinimizerBase: no compare_fn");
  NodeSet callable_nodes;
  for (Node* n : module_->graph().nodes())
    if (is_callable_node(n)) callable_nodes.insert(n);
  ShapeProp(module_).propagate(sample_input_);
  fusions_ = FxNetAccFusionsFinder(*module_, callable_nodes)();
  std::vector<std::string> placeholders;
  for (Node* n : module_->graph().nodes())
    if (n->op() == Opcode::Placeholder) placeholders.push_back(n->name());
  if (placeholders.size() != sample_input_.size())
    throw Error("MinimizerBase: the module has " + std::to_string(placeholders.size()) + " placeholders but " +
                std::to_string(sample_input_.size()) + " sample inputs");
  for (size_t i = 0; i < placeholders.size(); ++i) {
    a_outputs_[placeholders[i]] = sample_input_[i];
    b_outputs_[placeholders[i]] = sample_input_[i];
  }
}

MinimizerBase::~MinimizerBase() = default;

c10::IValue MinimizerBase::run_a(const std::shared_ptr<GraphModule>& mod, const std::vector<c10::IValue>& inputs) {
  if (!run_a_fn_) throw Error("run_a() is not implemented.");
  return run_a_fn_(mod, inputs);
}

c10::IValue MinimizerBase::run_b(const std::shared_ptr<GraphModule>& mod, const std::vector<c10::IValue>& inputs) {
  if (!run_b_fn_) throw Error("run_b() is not implemented.");
  return run_b_fn_(mod, inputs);
}

void MinimizerBase::store_outputs(const c10::IValue& a_result, const c10::IValue& b_result,
                                  const GraphModule& submodule) {
  const Argument& out = submodule.graph().output_node()->args().at(0);
  if (out.is_node()) {
    a_outputs_[out.to_node()->name()] = a_result;
    b_outputs_[out.to_node()->name()] = b_result;
    return;
  }
  const auto& items = out.items();
  for (size_t i = 0; i < items.size(); ++i) {
    a_outputs_[items[i].to_node()->name()] = item(a_result, i);
    b_outputs_[items[i].to_node()->name()] = item(b_result, i);
  }
}

std::pair<std::vector<c10::IValue>, std::vector<c10::IValue>> MinimizerBase::get_submod_inputs(
    const std::shared_ptr<GraphModule>& main_module, const std::string& submod_path) {
  auto submodule = std::dynamic_pointer_cast<GraphModule>(main_module->get_submodule(submod_path));
  std::vector<c10::IValue> a_input, b_input;
  bool stored = true;
  for (Node* n : submodule->graph().nodes()) {
    if (n->op() != Opcode::Placeholder) continue;
    auto a = a_outputs_.find(n->name());
    if (a == a_outputs_.end()) {
      stored = false;
      break;
    }
    a_input.push_back(a->second);
    b_input.push_back(b_outputs_.at(n->name()));
  }
  if (!stored) {
    // The inputs the submodule gets when the split model runs the sample input.
    a_input = generate_inputs_for_submodules(main_module, sample_input_, {submod_path}).at(submod_path);
    b_input = a_input;
  }
  if (!settings_.accumulate_error) return {a_input, a_input};
  return {a_input, b_input};
}

void MinimizerBase::tag_nodes(const NodeSet& selected_nodes) {
  for (Node* node : module_->graph().nodes()) {
    if (!is_callable_node(node)) continue;
    if (selected_nodes.count(node)) {
      set_tag(node, "minimize");
      continue;
    }
    bool after = false;
    for (Node* n : node->all_input_nodes()) {
      if (!is_callable_node(n)) continue;
      const std::string t = get_tag(n);
      after = after || t == "minimize" || t == "main_1";
    }
    set_tag(node, after ? "main_1" : "main_0");
  }
}

std::pair<std::shared_ptr<GraphModule>, std::string> MinimizerBase::build_submodule(const NodeSet& nodes) {
  tag_nodes(nodes);
  std::shared_ptr<GraphModule> split_module = split_by_tags(module_, {"main_0", "minimize", "main_1"});
  std::string submodule_name;
  for (const auto& child : split_module->named_children()) {
    if (child.key().find("minimize") == std::string::npos) continue;
    if (!submodule_name.empty())
      throw FxNetMinimizerBadModuleError("Expected only one minimize submodule with nodes " + set_repr(nodes));
    submodule_name = child.key();
  }
  if (submodule_name.empty())
    throw FxNetMinimizerBadModuleError("Minimize submodule was not found with nodes " + set_repr(nodes));
  return {split_module, submodule_name};
}

std::vector<std::string>& MinimizerBase::new_report() {
  reports_.emplace_back();
  ++iteration_;
  return reports_.back();
}

void MinimizerBase::run_and_compare(const std::shared_ptr<GraphModule>& split_module, const std::string& submod_name,
                                    const std::vector<std::string>& output_names) {
  auto submodule = std::dynamic_pointer_cast<GraphModule>(split_module->get_submodule(submod_name));
  auto [a_input, b_input] = get_submod_inputs(split_module, submod_name);
  if (reports_.empty()) {
    reports_.emplace_back();
    iteration_ = 1;
  }
  std::vector<std::string>& report = reports_[iteration_ - 1];
  report.push_back("Run and compare ...");

  Graph& g = submodule->graph();
  if (!output_names.empty()) {
    std::vector<Argument> output_nodes;
    for (Node* node : g.nodes())
      if (node->op() != Opcode::Output &&
          std::find(output_names.begin(), output_names.end(), node->name()) != output_names.end())
        output_nodes.emplace_back(node);
    g.erase_node(g.output_node());
    g.output(output_nodes.size() == 1 ? output_nodes[0] : Argument::tuple(output_nodes));
    g.lint();
  }
  // torch.fx's result key: map_arg(output.args, name), e.g. ('relu',).
  const Argument names_arg =
      map_arg(g.output_node()->args().at(0), [](Node* n) { return Argument(n->name()); });
  const std::string result_key = "(" + names_arg.repr() + ",)";

  c10::IValue a_result = run_a(submodule, a_input);
  c10::IValue b_result = run_b(submodule, b_input);
  store_outputs(a_result, b_result, *submodule);

  auto [numeric_result, bool_result] = compare_fn_(a_result, b_result, output_names);
  results_[result_key] = numeric_result;
  report.push_back("Numerical accuracy = " + python_float_repr(numeric_result));
  if (!bool_result) {
    report.push_back("Result mismatch for " + result_key);
    throw FxNetMinimizerResultMismatchError("Result mismatch for " + result_key);
  }
}

NodeSet MinimizerBase::binary_search_impl(const NodeList& all_nodes, size_t start_idx, size_t end_idx) {
  const NodeList nodes(all_nodes.begin() + static_cast<std::ptrdiff_t>(start_idx),
                       all_nodes.begin() + static_cast<std::ptrdiff_t>(end_idx));
  // An index, not a reference: the recursion below appends reports.
  const size_t report_index = reports_.size();
  new_report();
  auto report = [&]() -> std::vector<std::string>& { return reports_[report_index]; };
  report().push_back("Binary search iteration " + std::to_string(iteration_) + ".");
  report().push_back("From node index " + std::to_string(start_idx) + " to " +
                     std::to_string(static_cast<int64_t>(end_idx) - 1) +
                     ". Size of the interested node list is " + std::to_string(nodes.size()));
  NodeSet cur_nodes(nodes.begin(), nodes.end());
  for (Node* node : nodes)
    if (auto f = fusions_.find(node); f != fusions_.end()) cur_nodes.insert(f->second->begin(), f->second->end());
  if (!fails(cur_nodes, {})) {
    report().push_back("No discrepancy found.");
    return {};
  }
  if (nodes.size() == 1) {
    report().push_back(
        "This is the last node in the sub-module. Search in the current branch is successful with culprit = " +
        set_repr(cur_nodes) + ".");
    return cur_nodes;
  }
  report().push_back("Proceed to split and lower the halves of the current sub-module individually.");
  const size_t mid = nodes.size() / 2;
  NodeSet culprits = binary_search_impl(all_nodes, start_idx, start_idx + mid);
  if (!culprits.empty() && !settings_.find_all) return culprits;
  // torch.fx replaces the first half's culprits by the second's (find_all
  // then loses them); fxcpp keeps both.
  NodeSet second = binary_search_impl(all_nodes, start_idx + mid, end_idx);
  culprits.insert(second.begin(), second.end());
  if (culprits.empty())
    report().push_back(
        "Further split and lowering found no errors. Unable to minimize the submodule with list of nodes: " +
        list_repr(nodes));
  return culprits;
}

bool MinimizerBase::fails(const NodeSet& nodes, const std::vector<std::string>& output_names) {
  try {
    auto [split_module, submod_name] = build_submodule(nodes);
    run_and_compare(split_module, submod_name, output_names);
  } catch (const FxNetMinimizerRunFuncError&) {
    return true;
  } catch (const FxNetMinimizerResultMismatchError&) {
    return true;
  }
  return false;
}

NodeSet MinimizerBase::sequential_traverse(const NodeList& nodes) {
  NodeSet culprits;
  for (Node* node : nodes) {
    std::vector<std::string>& report = new_report();
    report.push_back("Sequential traverse iteration " + std::to_string(iteration_) + ".");
    report.push_back("Visit node: " + node->name());
    NodeSet cur_nodes{node};
    if (auto f = fusions_.find(node); f != fusions_.end()) cur_nodes = *f->second;
    const size_t index = reports_.size() - 1;
    try {
      auto [split_module, submod_name] = build_submodule(cur_nodes);
      run_and_compare(split_module, submod_name, {node->name()});
    } catch (const FxNetMinimizerResultMismatchError&) {
      culprits.insert(node);
      reports_[index].push_back("Found culprit from numeric error: " + node->name());
      if (!settings_.find_all) return culprits;
    } catch (const FxNetMinimizerRunFuncError&) {
      culprits.insert(cur_nodes.begin(), cur_nodes.end());
      reports_[index].push_back("Found culprit from run error: " + node->name());
      if (!settings_.find_all) return culprits;
    }
  }
  return culprits;
}

NodeSet MinimizerBase::accumulate_traverse(const NodeList& nodes) {
  NodeSet culprits;
  NodeSet nodes_to_run;
  // torch.fx prints this and returns no culprit, as if there were none.
  if (settings_.find_all) throw Error("'Find All' mode is not supported in accumulate traversal.");
  for (Node* node : nodes) {
    new_report().push_back("Accumulate traverse iteration " + std::to_string(iteration_) + ".");
    const size_t index = reports_.size() - 1;
    nodes_to_run.insert(node);
    reports_[index].push_back("Add node: " + node->name());
    if (fails(nodes_to_run, {node->name()})) {
      culprits.insert(node);
      reports_[index].push_back("Found culprit " + node->name());
      return culprits;
    }
  }
  return culprits;
}

NodeList MinimizerBase::collect_nodes(const std::optional<std::string>& start,
                                      const std::optional<std::string>& end) const {
  // torch.fx silently minimizes nothing (or everything) for a misspelt name.
  for (const auto* name : {&start, &end}) {
    if (!*name) continue;
    bool found = false;
    for (Node* node : module_->graph().nodes()) found = found || (is_callable_node(node) && node->name() == **name);
    if (!found) throw Error("minimizer: the module has no call_* node named " + **name);
  }
  NodeList nodes;
  bool add_node = !start;
  for (Node* node : module_->graph().nodes()) {
    if (!is_callable_node(node)) continue;
    if (start && node->name() == *start) add_node = true;
    if (add_node) nodes.push_back(node);
    if (end && node->name() == *end) break;
  }
  return nodes;
}

void MinimizerBase::run_nodes(const std::optional<std::string>& start, const std::optional<std::string>& end) {
  NodeList nodes = collect_nodes(start, end);
  NodeSet cur_nodes(nodes.begin(), nodes.end());
  for (Node* node : nodes)
    if (auto f = fusions_.find(node); f != fusions_.end()) cur_nodes.insert(f->second->begin(), f->second->end());
  std::vector<std::string> output_names;
  if (settings_.return_intermediate)
    for (Node* n : nodes) output_names.push_back(n->name());
  try {
    auto [split_module, submod_name] = build_submodule(cur_nodes);
    run_and_compare(split_module, submod_name, output_names);
  } catch (const FxNetMinimizerResultMismatchError&) {
    // Already in the report ("Result mismatch for ...").
  } catch (const FxNetMinimizerRunFuncError& e) {
    // torch.fx prints it; here it goes into the report.
    if (reports_.empty()) new_report();
    reports_.back().push_back(e.what());
  }
}

void MinimizerBase::print_report(std::ostream& os, const std::vector<std::string>& report) {
  for (size_t i = 0; i < report.size(); ++i) os << (i > 0 ? " . " : "") << report[i] << "\n";
}

void MinimizerBase::print_reports(std::ostream& os) const {
  for (const auto& report : reports_) print_report(os, report);
}

NodeList MinimizerBase::minimize(const std::optional<std::string>& start, const std::optional<std::string>& end) {
  NodeList nodes = collect_nodes(start, end);
  NodeSet culprits;
  if (nodes.empty()) return {};  // nothing to run (torch.fx would split out an empty submodule)
  if (settings_.traverse_method == "sequential") {
    culprits = sequential_traverse(nodes);
  } else if (settings_.traverse_method == "binary") {
    culprits = binary_search_impl(nodes, 0, nodes.size());
  } else if (settings_.traverse_method == "accumulate") {
    culprits = accumulate_traverse(nodes);
  } else {
    throw Error("Unknow traverse method " + settings_.traverse_method + "!");
  }
  return sorted_by_position(culprits);
}

}  // namespace fx
