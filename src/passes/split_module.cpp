// split_module (torch.fx passes/split_module.py), in linear time.
#include <fx/passes/split_module.h>
#include <fx/passes/split_utils.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace fx {

namespace {

/// A node's type annotation for a placeholder of the base graph made from it (torch.fx:
/// type_expr=node.type; the partitions' placeholders have none).
std::optional<std::string> type_expr_of(const Node& n) {
  return n.type().empty() ? std::nullopt : std::optional<std::string>(n.type());
}

/// An insertion-ordered set (a Python dict used as a set). Small sets (the
/// usual partition inputs and outputs) are scanned; a hash set is built only
/// once one grows past 16 items.
template <class T>
struct OrderedSet {
  std::vector<T> items;
  std::unordered_set<T> seen;
  bool add(const T& v) {
    if (contains(v)) return false;
    items.push_back(v);
    if (items.size() > 16) {
      if (seen.empty()) seen.insert(items.begin(), items.end());
      seen.insert(v);
    }
    return true;
  }
  bool contains(const T& v) const {
    if (items.size() > 16) return seen.count(v) != 0;
    return std::find(items.begin(), items.end(), v) != items.end();
  }
  size_t size() const { return items.size(); }
};

/// torch.fx split_module.Partition.
struct SplitPartition {
  int64_t number = 0;
  std::string submod_name;
  OrderedSet<Node*> inputs;   // original nodes read from outside
  OrderedSet<Node*> outputs;  // original nodes used outside
  OrderedSet<size_t> partitions_dependent_on;
  OrderedSet<size_t> partition_dependents;
  size_t remaining_deps = 0;
  // per partitions_dependent_on item, a use that made it: (user node, used node)
  std::vector<std::pair<Node*, Node*>> witness;
  std::shared_ptr<Graph> graph = std::make_shared<Graph>();
  // The submodule, made around the still empty graph and filled directly
  // (torch.fx GraphModule(partition.targets, graph)).
  std::shared_ptr<GraphModule> module = std::make_shared<GraphModule>(nullptr, graph);
  std::unordered_map<const Node*, Node*> placeholders;  // input -> placeholder
  // call_module targets installed in the submodule: new name -> module
  std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> targets;
  std::unordered_set<std::string> target_names;
};

constexpr size_t kNone = ~size_t(0);

/// Finds submodules by dotted name. libtorch finds a child by name only by
/// copying all of its parent's children, so every module's children are
/// listed once and remembered: resolving all call_module targets of a model
/// costs O(modules), not O(targets x depth x children).
class ModuleResolver {
 public:
  explicit ModuleResolver(torch::nn::Module& root) : root_(&root) {}
  /// The submodule at `target`, or nullptr.
  std::shared_ptr<torch::nn::Module> resolve(const std::string& target) {
    auto it = memo_.find(target);
    if (it != memo_.end()) return it->second;
    const size_t dot = target.rfind('.');
    torch::nn::Module* parent = root_;
    std::shared_ptr<torch::nn::Module> keep;
    if (dot != std::string::npos) {
      keep = resolve(target.substr(0, dot));
      if (!keep) return memo_[target] = nullptr;
      parent = keep.get();
    }
    if (listed_.insert(parent).second) {
      const std::string prefix = dot == std::string::npos ? "" : target.substr(0, dot + 1);
      for (const auto& item : parent->named_children()) memo_.emplace(prefix + item.key(), item.value());
    }
    auto found = memo_.find(target);
    if (found != memo_.end()) return found->second;
    return memo_[target] = nullptr;
  }

 private:
  torch::nn::Module* root_;
  std::unordered_map<std::string, std::shared_ptr<torch::nn::Module>> memo_;
  std::unordered_set<const torch::nn::Module*> listed_;
};

std::string join_underscore(const std::string& target) {
  std::string s = target;
  for (char& c : s)
    if (c == '.') c = '_';
  return s;
}

}  // namespace

std::shared_ptr<GraphModule> split_module(const std::shared_ptr<GraphModule>& m,
                                          const std::shared_ptr<torch::nn::Module>& root_m,
                                          const SplitCallback& split_callback,
                                          std::map<std::string, std::string>* qualname_map,
                                          bool keep_original_order) {
  (void)root_m;  // torch.fx: "Not currently used"
  if (!m) throw Error("split_module: graph module is null");
  if (!split_callback) throw Error("split_module: split_callback is empty");
  const Graph& graph = m->graph();
  const size_t max_id = graph.max_node_id();

  std::vector<SplitPartition> partitions;
  std::unordered_map<int64_t, size_t> by_number;
  std::vector<size_t> part_of(max_id, kNone);

  auto record_cross_partition_use = [&](Node* def_node, Node* use_node) {
    const size_t def_p = part_of[def_node->id()];
    const size_t use_p = use_node ? part_of[use_node->id()] : kNone;
    if (def_p == use_p) return;
    if (def_p != kNone) {
      partitions[def_p].outputs.add(def_node);
      if (use_p != kNone) partitions[def_p].partition_dependents.add(use_p);
    }
    if (use_p != kNone) {
      SplitPartition& up = partitions[use_p];
      up.inputs.add(def_node);
      if (def_p != kNone && up.partitions_dependent_on.add(def_p)) up.witness.emplace_back(use_node, def_node);
    }
  };

  // Split the nodes into partitions.
  Node* output_node = nullptr;
  for (Node* node : graph.nodes()) {
    if (node->op() == Opcode::Placeholder || node->op() == Opcode::GetAttr) continue;
    if (node->op() == Opcode::Output) {
      output_node = node;
      for_each_node(node->args().empty() ? Argument() : node->args()[0],
                    [&](Node* n) { record_cross_partition_use(n, nullptr); });
      continue;
    }
    const int64_t number = split_callback(node);
    if (number < 0)
      throw Error("split_module: split_callback returned " + std::to_string(number) + " for node " + node->name() +
                  "; partition numbers must be non-negative (submod_N must be a valid name)");
    auto it = by_number.find(number);
    if (it == by_number.end()) {
      it = by_number.emplace(number, partitions.size()).first;
      partitions.emplace_back();
      partitions.back().number = number;
      partitions.back().submod_name = "submod_" + std::to_string(number);
    }
    part_of[node->id()] = it->second;
    for_each_node(node->args(), node->kwargs(), [&](Node* def) {
      if (def->op() != Opcode::Placeholder && def->op() != Opcode::GetAttr && part_of[def->id()] == kNone)
        throw Error("split_module: node " + node->name() + " uses " + def->name() +
                    " before it is defined (the graph is not in topological order)");
      record_cross_partition_use(def, node);
    });
  }

  // Topological order of the partitions (torch.fx: a stack of roots).
  std::vector<size_t> root_partitions;
  for (size_t i = 0; i < partitions.size(); ++i) {
    partitions[i].remaining_deps = partitions[i].partitions_dependent_on.size();
    if (partitions[i].remaining_deps == 0) root_partitions.push_back(i);
  }
  std::vector<size_t> sorted_partitions;
  while (!root_partitions.empty()) {
    size_t root = root_partitions.back();
    root_partitions.pop_back();
    sorted_partitions.push_back(root);
    for (size_t dep : partitions[root].partition_dependents.items)
      if (--partitions[dep].remaining_deps == 0) root_partitions.push_back(dep);
  }
  if (sorted_partitions.size() != partitions.size()) {
    // Walk dependencies among the partitions left until one repeats: a cycle.
    size_t start = kNone;
    for (size_t i = 0; i < partitions.size() && start == kNone; ++i)
      if (partitions[i].remaining_deps) start = i;
    std::vector<size_t> path;
    std::unordered_map<size_t, size_t> pos;
    size_t cur = start;
    while (!pos.count(cur)) {
      pos[cur] = path.size();
      path.push_back(cur);
      for (size_t dep : partitions[cur].partitions_dependent_on.items)
        if (partitions[dep].remaining_deps) {
          cur = dep;
          break;
        }
    }
    std::vector<size_t> cycle(path.begin() + static_cast<std::ptrdiff_t>(pos[cur]), path.end());
    std::string chain, uses;
    for (size_t i = 0; i < cycle.size(); ++i) {
      const SplitPartition& p = partitions[cycle[i]];
      const size_t dep = cycle[(i + 1) % cycle.size()];
      const auto& deps = p.partitions_dependent_on.items;
      const auto& w = p.witness[static_cast<size_t>(std::find(deps.begin(), deps.end(), dep) - deps.begin())];
      chain += p.submod_name + " -> ";
      uses += "\n  node " + w.first->name() + " (" + p.submod_name + ") uses " + w.second->name() + " (" +
              partitions[dep].submod_name + ")";
    }
    chain += partitions[cycle[0]].submod_name;
    throw Error("split_module: cycle exists between partitions! " + chain + " (each depends on the next):" + uses);
  }

  // Resolve call_module targets before building anything.
  ModuleResolver resolver(*m);
  std::unordered_map<std::string, std::shared_ptr<torch::nn::Module>> modules;
  for (Node* node : graph.nodes()) {
    if (node->op() != Opcode::CallModule || modules.count(node->target())) continue;
    auto mod = resolver.resolve(node->target());
    if (!mod)
      throw Error("split_module: Operator target " + node->target() + " not found! (node " + node->name() + ")");
    modules.emplace(node->target(), std::move(mod));
  }

  // Placeholders of every partition, in topological partition order.
  for (size_t pi : sorted_partitions) {
    SplitPartition& p = partitions[pi];
    for (Node* input : p.inputs.items) {
      Node* ph = p.graph->placeholder(input->name());
      const Meta& meta = static_cast<const Node*>(input)->meta();
      if (!meta.empty()) ph->meta() = meta;
      p.placeholders[input] = ph;
    }
  }

  // Copy every node into its partition's graph.
  std::vector<Node*> env(max_id, nullptr);  // original node -> copy in its own partition
  size_t pi = kNone;
  SplitPartition* cur = nullptr;
  // One std::function for all nodes (a capturing lambda converted per call would allocate).
  const std::function<Argument(Node*)> lookup = [&](Node* n) -> Argument {
    if (part_of[n->id()] == pi) return env[n->id()];
    return cur->placeholders.at(n);
  };
  for (Node* node : graph.nodes()) {
    pi = part_of[node->id()];
    if (pi == kNone) continue;
    SplitPartition& p = partitions[pi];
    cur = &p;
    std::string target = node->target();
    if (node->op() == Opcode::CallModule) {
      target = join_underscore(node->target());
      if (p.target_names.insert(target).second) p.targets.emplace_back(target, modules.at(node->target()));
      if (qualname_map) (*qualname_map)[p.submod_name + "." + target] = node->target();
    }
    Node* new_node = p.graph->create_node(node->op(), target, map_arg(node->args(), lookup),
                                          map_arg(node->kwargs(), lookup));
    const Meta& meta = static_cast<const Node*>(node)->meta();
    if (!meta.empty()) new_node->meta() = meta;
    env[node->id()] = new_node;
  }

  // The base graph: placeholders and get_attrs, then the submodule calls.
  // The module is made first and filled directly: GraphModule's constructor
  // would look every submod_N up by name, and libtorch finds a child by name
  // only by copying all children (O(partitions) each, quadratic in total).
  auto base_graph = std::make_shared<Graph>();
  auto result = std::make_shared<GraphModule>(nullptr, base_graph);
  torch::nn::Module* base_root = result.get();
  std::vector<Argument> base_env(max_id);
  for (Node* node : graph.nodes()) {
    if (node->op() == Opcode::Placeholder) {
      std::optional<Argument> def;
      if (!node->args().empty()) def = node->args()[0];
      Node* ph = base_graph->placeholder(node->target(), def, type_expr_of(*node));
      const Meta& meta = static_cast<const Node*>(node)->meta();
      if (!meta.empty()) ph->meta() = meta;
      base_env[node->id()] = ph;
    } else if (node->op() == Opcode::GetAttr) {
      Node* ga = base_graph->get_attr(node->target());
      const Meta& meta = static_cast<const Node*>(node)->meta();
      if (!meta.empty()) ga->meta() = meta;
      base_env[node->id()] = ga;
      copy_attr_recursive(*m, node->target(), *base_root, node->target());
    }
  }

  std::vector<size_t> construct_order = sorted_partitions;
  if (keep_original_order)
    for (size_t i = 0; i < partitions.size(); ++i) construct_order[i] = i;

  for (size_t pi : construct_order) {
    SplitPartition& p = partitions[pi];
    std::vector<Argument> outs;
    for (Node* o : p.outputs.items) outs.push_back(env[o->id()]);
    p.graph->output(outs.size() == 1 ? outs[0] : Argument::tuple(outs));

    for (const auto& t : p.targets) p.module->register_module(t.first, t.second);
    base_root->register_module(p.submod_name, p.module);

    ArgList args;
    for (Node* input : p.inputs.items) args.push_back(base_env[input->id()]);
    Node* call = base_graph->call_module(p.submod_name, std::move(args));
    if (p.outputs.size() > 1) {
      for (size_t i = 0; i < p.outputs.size(); ++i)
        base_env[p.outputs.items[i]->id()] =
            base_graph->call_function("operator.getitem", {call, static_cast<int64_t>(i)});
    } else if (p.outputs.size() == 1) {
      base_env[p.outputs.items[0]->id()] = call;
    }
  }

  if (output_node) {
    base_graph->output(map_arg(output_node->args().empty() ? Argument() : output_node->args()[0],
                               [&](Node* n) { return base_env[n->id()]; }));
  }
  return result;
}

}  // namespace fx
