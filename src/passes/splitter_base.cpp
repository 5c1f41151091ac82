// _SplitterBase (torch.fx passes/splitter_base.py): split a GraphModule into
// submodules a backend supports (_run_on_acc_N) and the rest
// (_run_on_cpu_N), with torch.fx's reports.
#include <fx/passes/splitter_base.h>

#include <fx/interpreter.h>
#include <fx/passes/graph_manipulation.h>
#include <fx/passes/shape_prop.h>
#include <fx/passes/split_utils.h>
#include <fx/tensor_meta.h>

#include <algorithm>
#include <set>
#include <utility>

namespace fx {

namespace {

/// An Interpreter that records the arguments of call_module nodes of some targets.
class InputRecorder : public Interpreter {
 public:
  InputRecorder(std::shared_ptr<GraphModule> gm, const std::vector<std::string>& targets)
      : Interpreter(std::move(gm)), targets_(targets.begin(), targets.end()) {}
  c10::IValue call_module(const std::string& target, std::vector<c10::IValue>& args, ValueKwargs& kwargs) override {
    if (targets_.count(target)) recorded[target] = args;
    return Interpreter::call_module(target, args, kwargs);
  }
  SubmoduleInputs recorded;

 private:
  std::set<std::string> targets_;
};

/// The dtype in a node's tensor_meta, or nullopt (torch.fx get_dtype).
std::optional<c10::ScalarType> dtype_of(const Node* n) {
  if (const TensorMetadata* m = tensor_meta_of(n)) return m->dtype;
  return std::nullopt;
}

std::string dtype_repr(const std::optional<c10::ScalarType>& t) { return t ? python_dtype_repr(*t) : "None"; }

/// "N" of a tag "..._N".
int64_t tag_number(const std::string& tag) { return std::stoll(tag.substr(tag.rfind('_') + 1)); }

}  // namespace

SubmoduleInputs generate_inputs_for_submodules(const std::shared_ptr<GraphModule>& model,
                                               const std::vector<c10::IValue>& inputs,
                                               const std::vector<std::string>& target_submodules) {
  InputRecorder recorder(model, target_submodules);
  recorder.run(inputs);
  return std::move(recorder.recorded);
}

// ---- FxNetAccNodesFinder ----------------------------------------------

FxNetAccNodesFinder::FxNetAccNodesFinder(const GraphModule& module,
                                         std::shared_ptr<const OperatorSupportBase> operator_support,
                                         bool allow_non_tensor)
    : module_(module), operator_support_(std::move(operator_support)), allow_non_tensor_(allow_non_tensor) {}

void FxNetAccNodesFinder::reduce_acc_nodes_non_tensor_input_helper(NodeList cpu_worklist) {
  // Every acc user of a CPU node's non-tensor value goes to the CPU, and on
  // through the users of its own non-tensor value.
  for (size_t i = 0; i < cpu_worklist.size(); ++i) {
    for (Node* user : cpu_worklist[i]->users()) {
      if (acc_nodes_.erase(user) && !is_node_output_tensor(user)) cpu_worklist.push_back(user);
    }
  }
}

void FxNetAccNodesFinder::reduce_acc_nodes_non_tensor_input() {
  NodeList non_tensor_cpu_nodes;
  for (Node* node : module_.graph().nodes()) {
    if (!is_callable_node(node) || acc_nodes_.count(node) || is_node_output_tensor(node)) continue;
    non_tensor_cpu_nodes.push_back(node);
  }
  reduce_acc_nodes_non_tensor_input_helper(std::move(non_tensor_cpu_nodes));
}

void FxNetAccNodesFinder::reduce_acc_nodes_non_tensor_output() {
  while (true) {
    NodeList new_cpu_nodes;
    for (Node* acc_node : sorted_by_position(acc_nodes_)) {
      if (is_node_output_tensor(acc_node)) continue;
      for (Node* user : acc_node->users()) {
        if (!acc_nodes_.count(user)) {
          new_cpu_nodes.push_back(acc_node);
          break;
        }
      }
    }
    if (new_cpu_nodes.empty()) break;
    for (Node* n : new_cpu_nodes) acc_nodes_.erase(n);
    reduce_acc_nodes_non_tensor_input_helper(std::move(new_cpu_nodes));
  }
}

NodeSet FxNetAccNodesFinder::operator()() {
  const SubmoduleMap submodules = module_.named_modules();
  acc_nodes_.clear();
  for (Node* n : module_.graph().nodes())
    if (is_callable_node(n) && operator_support_->is_node_supported(submodules, n)) acc_nodes_.insert(n);
  if (!allow_non_tensor_) {
    reduce_acc_nodes_non_tensor_input();
    reduce_acc_nodes_non_tensor_output();
  }
  return acc_nodes_;
}

// ---- SplitterBase -------------------------------------------------------

SplitterBase::SplitterBase(std::shared_ptr<GraphModule> module, std::vector<c10::IValue> sample_input,
                           std::shared_ptr<const OperatorSupportBase> operator_support, SplitterSettings settings,
                           std::string non_acc_submodule_name)
    : module_(std::move(module)),
      sample_input_(std::move(sample_input)),
      operator_support_(std::move(operator_support)),
      settings_(settings),
      non_acc_submodule_name_(std::move(non_acc_submodule_name)) {
  if (!module_) throw Error("SplitterBase: no module");
  if (!operator_support_) throw Error("SplitterBase: no operator support");
  ShapeProp(module_).propagate(sample_input_);
  acc_nodes_ = FxNetAccNodesFinder(*module_, operator_support_, settings_.allow_non_tensor)();
  if (!settings_.skip_fusion) fusions_ = FxNetAccFusionsFinder(*module_, acc_nodes_)();
  deps_ = find_deps();
  update_deps_for_fusions();
}

SplitterBase::~SplitterBase() = default;

std::unordered_map<Node*, NodeSet> SplitterBase::find_deps() const {
  std::unordered_map<Node*, NodeSet> deps;
  for (Node* node : module_->graph().nodes()) {
    if (!is_callable_node(node)) continue;
    for (Node* user : node->users())
      if (user->op() != Opcode::Output) deps[user].insert(node);
  }
  return deps;
}

void SplitterBase::update_deps_for_fusions() {
  for (Node* node : module_->graph().nodes()) {
    auto f = fusions_.find(node);
    if (f == fusions_.end()) continue;
    const NodeSet& fusion = *f->second;
    for (Node* fused_neighbor : sorted_by_position(fusion)) {
      for (Node* d : NodeSet(deps_[fused_neighbor]))
        if (!fusion.count(d)) deps_[node].insert(d);
      for (Node* user : fused_neighbor->users())
        if (!fusion.count(user)) deps_[user].insert(node);
    }
  }
}

LoweredModule SplitterBase::lower_model_to_backend(const std::shared_ptr<GraphModule>& mod,
                                                   const std::vector<c10::IValue>& /*inputs*/) {
  return [mod](std::vector<c10::IValue> args) { return mod->forward(std::move(args)); };
}

std::string SplitterBase::find_culprit(const std::shared_ptr<GraphModule>& /*mod*/,
                                       const std::vector<c10::IValue>& /*inputs*/) {
  return "Unable to find a culprit because _find_culprit() function is not implemented.";
}

std::string SplitterBase::node_support_preview() {
  const SubmoduleMap submodules = module_->named_modules();
  // target -> distinct "(arg dtypes, kwarg dtypes)" texts, both in first-seen order.
  using Rows = std::vector<std::pair<std::string, std::vector<std::string>>>;
  Rows supported, unsupported;
  auto add = [](Rows& rows, const std::string& target, const std::string& row) {
    auto it = std::find_if(rows.begin(), rows.end(), [&](const auto& r) { return r.first == target; });
    if (it == rows.end()) it = rows.insert(rows.end(), {target, {}});
    if (std::find(it->second.begin(), it->second.end(), row) == it->second.end()) it->second.push_back(row);
  };
  for (Node* node : module_->graph().nodes()) {
    if (!is_callable_node(node)) continue;
    const std::string target = get_node_target(submodules, node);
    std::vector<std::optional<c10::ScalarType>> arg_dtypes;
    for (const Argument& a : node->args())
      arg_dtypes.push_back(a.is_node() ? dtype_of(a.to_node()) : std::nullopt);
    while (!arg_dtypes.empty() && !arg_dtypes.back()) arg_dtypes.pop_back();  // trailing Nones
    std::string row = "((";
    for (size_t i = 0; i < arg_dtypes.size(); ++i) row += (i ? ", " : "") + dtype_repr(arg_dtypes[i]);
    row += arg_dtypes.size() == 1 ? ",), {" : "), {";
    bool first = true;
    for (const auto& [k, a] : node->kwargs()) {
      if (!a.is_node()) continue;
      row += (first ? "'" : ", '") + k + "': " + dtype_repr(dtype_of(a.to_node()));
      first = false;
    }
    row += "})";
    add(operator_support_->is_node_supported(submodules, node) ? supported : unsupported, target, row);
  }
  std::string reports = "\nSupported node types in the model:\n";
  for (const auto& [t, rows] : supported)
    for (const auto& r : rows) reports += t + ": " + r + "\n";
  reports += "\nUnsupported node types in the model:\n";
  for (const auto& [t, rows] : unsupported)
    for (const auto& r : rows) reports += t + ": " + r + "\n";
  return reports;
}

std::string SplitterBase::split_preview() {
  std::string reports;
  auto count = [&](const std::vector<Subgraph>& subgraphs, const char* when) {
    const auto acc = std::count_if(subgraphs.begin(), subgraphs.end(), [](const Subgraph& s) { return s.is_acc; });
    reports += std::string(when) + " removing small acc subgraphs, total " + std::to_string(subgraphs.size()) +
               " subgraphs are created: " + std::to_string(acc) + " acc subgraphs and " +
               std::to_string(subgraphs.size() - acc) + " cpu subgraphs.\n";
  };
  std::vector<Subgraph> subgraphs = put_nodes_into_subgraphs();
  count(subgraphs, "Before");
  subgraphs = remove_small_acc_subgraphs(std::move(subgraphs));
  count(subgraphs, "After");
  for (size_t i = 0; i < subgraphs.size(); ++i) {
    reports += (subgraphs[i].is_acc ? "_run_on_acc_" : non_acc_submodule_name_) + std::to_string(i) + ": " +
               std::to_string(subgraphs[i].nodes.size()) + " node(s)\n";
  }
  tag(subgraphs);
  std::shared_ptr<GraphModule> split_mod = split(/*remove_tag=*/true);
  split_mod->eval();

  bool qps_found = false;
  double max_qps = static_cast<double>(PCIe_BW);
  std::string bottleneck_module;
  for (Node* node : split_mod->graph().nodes()) {
    if (node->op() != Opcode::CallModule || node->target().find("acc") == std::string::npos) continue;
    reports += "\nProcessing acc submodule " + node->target() + "\n";
    auto submod = std::dynamic_pointer_cast<GraphModule>(split_mod->get_submodule(node->target()));
    std::vector<c10::IValue> submod_inputs =
        generate_inputs_for_submodules(split_mod, sample_input_, {node->target()}).at(node->target());
    ShapeProp(submod).propagate(submod_inputs);

    int64_t total_input_bytes = 0, total_output_bytes = 0;
    reports += "Checking inputs...\n";
    for (Node* n : submod->graph().nodes()) {
      if (n->op() != Opcode::Placeholder) continue;
      if (!is_node_output_tensor(n)) {
        reports += "Input " + n->name() + " is not a tensor, this might cause problems during lowering!\n";
      } else {
        total_input_bytes += get_size_of_node(*submod, n).output_size;
      }
    }
    reports += "Checking outputs...\n";
    for (const Argument& a : submod->graph().output_node()->args()) {
      for_each_node(a, [&](Node* out) {
        if (!is_node_output_tensor(out)) {
          reports += "Output " + out->name() + " is not a tensor, this might cause problems during lowering!\n";
        } else {
          total_output_bytes += get_size_of_node(*submod, out).output_size;
        }
      });
    }
    const double qps = static_cast<double>(PCIe_BW) / static_cast<double>(std::max(total_input_bytes, total_output_bytes));
    reports += "Total input size in bytes is " + std::to_string(total_input_bytes) +
               ", total output size in bytes is " + std::to_string(total_output_bytes) +
               ", theoretical max qps (bounds by PCIe bandwidth) for this submodule is " + python_float_repr(qps) +
               ".\n";
    if (qps < max_qps) {
      max_qps = qps;
      qps_found = true;
      bottleneck_module = node->target();
    }
    LoweredModule lowered;
    try {
      lowered = lower_model_to_backend(submod, submod_inputs);
    } catch (const std::exception&) {
      reports += "Run into an error during lowering!\n";
      reports += find_culprit(submod, submod_inputs);
      continue;
    }
    try {
      lowered(submod_inputs);
      reports += "Lowering and running succeed!\n";
    } catch (const std::exception&) {
      reports += "Run into an error during inference!\n";
      reports += find_culprit(submod, submod_inputs);
    }
  }
  // torch.fx starts from the int PCIe_BW: printed without ".0" until a submodule lowers it.
  reports += "\nTheoretical max qps (bounds by PCIe bandwidth) for this model is " +
             (qps_found ? python_float_repr(max_qps) : std::to_string(PCIe_BW)) + ", bottleneck is submodule " +
             bottleneck_module + ".";
  return reports;
}

std::unordered_map<Node*, NodeSet> SplitterBase::find_reverse_deps(std::optional<int64_t> tag_id) const {
  std::unordered_map<Node*, NodeSet> result;
  for (Node* node : module_->graph().nodes()) {
    if (!is_callable_node(node)) continue;
    for (Node* user : node->users()) {
      if (!is_callable_node(user)) continue;
      if (!tag_id || tag_number(get_tag(user)) < *tag_id) result[node].insert(user);
    }
  }
  return result;
}

void SplitterBase::update_reverse_deps_for_fusions(std::unordered_map<Node*, NodeSet>& deps) const {
  NodeSet processed_node;
  for (Node* node : module_->graph().nodes()) {
    auto f = fusions_.find(node);
    if (f == fusions_.end() || processed_node.count(node)) continue;
    const NodeSet& fusion = *f->second;
    NodeSet new_dep;
    for (Node* n : fusion)
      for (Node* d : deps[n])
        if (!fusion.count(d)) new_dep.insert(d);
    for (Node* n : fusion) {
      deps[n] = new_dep;
      for (Node* arg : n->all_input_nodes())
        if (!fusion.count(arg)) deps[arg].insert(fusion.begin(), fusion.end());
      processed_node.insert(n);
    }
  }
}

NodeSet SplitterBase::find_parent_nodes_of_subgraph(const std::string& tag) const {
  NodeSet parent_nodes;
  for (Node* node : module_->graph().nodes()) {
    if (!is_callable_node(node) || get_tag(node) != tag) continue;
    for (Node* arg : node->all_input_nodes())
      if (is_callable_node(arg) && get_tag(arg) != tag) parent_nodes.insert(arg);
  }
  return parent_nodes;
}

void SplitterBase::extend_acc_subgraph(const std::string& tag) {
  std::unordered_map<Node*, NodeSet> deps = find_reverse_deps(tag_number(tag));
  update_reverse_deps_for_fusions(deps);
  NodeSet parent_nodes = find_parent_nodes_of_subgraph(tag);
  NodeSet visited_nodes;
  while (!parent_nodes.empty()) {
    // An acc parent all of whose (earlier-subgraph) users are already in.
    Node* node = nullptr;
    for (Node* n : sorted_by_position(parent_nodes)) {
      const NodeSet& d = deps[n];
      if (acc_nodes_.count(n) &&
          std::all_of(d.begin(), d.end(), [&](Node* x) { return visited_nodes.count(x) != 0; })) {
        node = n;
        break;
      }
    }
    if (!node) break;
    set_tag(node, tag);
    parent_nodes.erase(node);
    visited_nodes.insert(node);
    if (auto f = fusions_.find(node); f != fusions_.end())
      for (Node* fusion_node : *f->second)
        if (!visited_nodes.count(fusion_node)) parent_nodes.insert(fusion_node);
    for (Node* arg : node->all_input_nodes())
      if (is_callable_node(arg) && !visited_nodes.count(arg)) parent_nodes.insert(arg);
  }
}

std::pair<NodeSet, NodeSet> SplitterBase::starter_nodes() const {
  NodeSet starter_cpu_nodes, starter_acc_nodes;
  auto add = [&](Node* n) { (acc_nodes_.count(n) ? starter_acc_nodes : starter_cpu_nodes).insert(n); };
  for (Node* node : module_->graph().nodes()) {
    if (node->op() == Opcode::Placeholder || node->op() == Opcode::GetAttr) {
      for (Node* user : node->users())
        if (is_callable_node(user)) add(user);
    } else if (is_callable_node(node) && node->all_input_nodes().empty()) {
      add(node);
    }
  }
  return {starter_cpu_nodes, starter_acc_nodes};
}

std::vector<Subgraph> SplitterBase::put_nodes_into_subgraphs() {
  // Positions, unfinished dependencies per node, and who waits on whom.
  std::unordered_map<const Node*, size_t> position;
  for (Node* n : module_->graph().nodes()) position.emplace(n, position.size());
  std::unordered_map<Node*, size_t> missing;
  std::unordered_map<Node*, NodeList> waiting;
  for (const auto& [node, ds] : deps_) {
    missing[node] = ds.size();
    for (Node* d : ds) waiting[d].push_back(node);
  }
  NodeSet visited_nodes;
  // Candidates of each kind (torch.fx current_cpu_nodes / current_acc_nodes),
  // and those among them whose dependencies are all visited, by position.
  NodeSet candidates[2];
  std::set<std::pair<size_t, Node*>> ready[2];
  auto is_ready = [&](Node* n) {
    auto it = missing.find(n);
    return it == missing.end() || it->second == 0;
  };
  auto add_candidate = [&](Node* n) {
    const int kind = acc_nodes_.count(n) ? 1 : 0;
    if (!candidates[kind].insert(n).second) return;
    if (is_ready(n)) ready[kind].insert({position.at(n), n});
  };
  auto [starter_cpu, starter_acc] = starter_nodes();
  for (Node* n : starter_cpu) add_candidate(n);
  for (Node* n : starter_acc) add_candidate(n);
  bool acc_subgraph = !std::any_of(starter_cpu.begin(), starter_cpu.end(), [&](Node* n) {
    auto it = deps_.find(n);
    return it == deps_.end() || it->second.empty();
  });

  NodeList current_subgraph_nodes;
  std::vector<Subgraph> subgraphs;
  while (!candidates[0].empty() || !candidates[1].empty()) {
    const int kind = acc_subgraph ? 1 : 0;
    if (ready[kind].empty()) {
      // Nothing of this kind can run: start a subgraph of the other kind.
      if (current_subgraph_nodes.empty()) throw FxNetSplitterInternalError("Subgraph can't be empty");
      subgraphs.push_back(Subgraph{acc_subgraph, std::move(current_subgraph_nodes)});
      current_subgraph_nodes.clear();
      acc_subgraph = !acc_subgraph;
      continue;
    }
    Node* node = ready[kind].begin()->second;
    ready[kind].erase(ready[kind].begin());
    candidates[kind].erase(node);
    visited_nodes.insert(node);
    current_subgraph_nodes.push_back(node);
    for (Node* w : waiting[node]) {
      if (--missing[w] == 0) {
        const int wk = acc_nodes_.count(w) ? 1 : 0;
        if (candidates[wk].count(w)) ready[wk].insert({position.at(w), w});
      }
    }
    if (auto f = fusions_.find(node); f != fusions_.end())
      for (Node* buddy : *f->second)
        if (!visited_nodes.count(buddy)) add_candidate(buddy);
    for (Node* user : node->users())
      if (is_callable_node(user) && !visited_nodes.count(user)) add_candidate(user);
  }
  if (!current_subgraph_nodes.empty()) subgraphs.push_back(Subgraph{acc_subgraph, std::move(current_subgraph_nodes)});
  if (subgraphs.empty()) throw FxNetSplitterInternalError("Couldn't create subgraphs");
  return subgraphs;
}

std::vector<Subgraph> SplitterBase::remove_small_acc_subgraphs(std::vector<Subgraph> subgraphs) {
  std::vector<Subgraph> result;
  for (Subgraph& subgraph : subgraphs) {
    if (subgraph.is_acc) {
      if (static_cast<int64_t>(subgraph.nodes.size()) >= settings_.min_acc_module_size) {
        result.push_back(std::move(subgraph));
        continue;
      }
      log_.push_back("Eliminating acc subgraph because it's smaller than the threshold: " +
                     std::to_string(subgraph.nodes.size()) + " < " + std::to_string(settings_.min_acc_module_size));
      if (!result.empty()) {
        result.back().nodes.insert(result.back().nodes.end(), subgraph.nodes.begin(), subgraph.nodes.end());
      } else {
        subgraph.is_acc = false;
        result.push_back(std::move(subgraph));
      }
    } else if (!result.empty() && !result.back().is_acc) {
      result.back().nodes.insert(result.back().nodes.end(), subgraph.nodes.begin(), subgraph.nodes.end());
    } else {
      result.push_back(std::move(subgraph));
    }
  }
  return result;
}

void SplitterBase::tag(const std::vector<Subgraph>& subgraphs) {
  tags_.clear();
  for (const Subgraph& subgraph : subgraphs) {
    const std::string tag = (subgraph.is_acc ? std::string("_run_on_acc_") : non_acc_submodule_name_) +
                            std::to_string(tags_.size());
    tags_.push_back(tag);
    for (Node* node : subgraph.nodes) {
      if (node->meta().count("tag")) throw FxNetSplitterInternalError("Node " + node->name() + " was already tagged");
      set_tag(node, tag);
      node_submodule_map_[node->name()] = tag;
    }
  }
}

std::shared_ptr<GraphModule> SplitterBase::split(bool remove_tag) {
  std::shared_ptr<GraphModule> split_module = split_by_tags(module_, tags_);
  if (remove_tag)
    for (Node* node : module_->graph().nodes()) node->meta().erase("tag");
  return split_module;
}

std::shared_ptr<GraphModule> SplitterBase::operator()() {
  std::vector<Subgraph> subgraphs = remove_small_acc_subgraphs(put_nodes_into_subgraphs());
  const auto acc = std::count_if(subgraphs.begin(), subgraphs.end(), [](const Subgraph& s) { return s.is_acc; });
  log_.push_back("Got " + std::to_string(acc) + " acc subgraphs and " + std::to_string(subgraphs.size() - acc) +
                 " non-acc subgraphs");
  tag(subgraphs);
  return split();
}

SplitResult SplitterBase::generate_split_results() {
  std::shared_ptr<GraphModule> split_module = (*this)();
  std::vector<std::string> submodule_names;
  for (const auto& child : split_module->named_children()) submodule_names.push_back(child.key());
  SubmoduleInputs inputs = generate_inputs_for_submodules(split_module, sample_input_, submodule_names);
  return SplitResult{split_module, std::move(inputs), non_acc_submodule_name_};
}

}  // namespace fx
