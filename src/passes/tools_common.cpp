// is_node_output_tensor and FxNetAccFusionsFinder (torch.fx
// passes/tools_common.py): what the splitter and the minimizer share.
#include <fx/passes/tools_common.h>

#include <algorithm>
#include <any>
#include <string>

namespace fx {

bool is_callable_node(const Node* node) {
  return node->op() == Opcode::CallModule || node->op() == Opcode::CallFunction ||
         node->op() == Opcode::CallMethod;
}

bool is_node_output_tensor(const Node* node) {
  auto it = node->meta().find("type");
  if (it == node->meta().end()) return false;
  const auto* type = std::any_cast<std::string>(&it->second);
  return type && (*type == "torch.Tensor" || *type == "torch.nn.Parameter");
}

NodeList sorted_by_position(const NodeSet& nodes) {
  NodeList out;
  if (nodes.empty()) return out;
  for (Node* n : (*nodes.begin())->graph().nodes())
    if (nodes.count(n)) out.push_back(n);
  return out;
}

namespace {

bool has_tensor_meta(const Node* n) { return n->meta().count("tensor_meta") != 0; }

}  // namespace

struct FxNetAccFusionsFinder::FusionGroup {
  size_t top_node_idx;
  NodeSet nodes;
  NodeSet inputs;
  NodeSet nodes_need_process;

  void add_node(Node* node) {
    if (nodes.count(node)) return;
    nodes_need_process.insert(node);
    nodes.insert(node);
    inputs.erase(node);
    for (Node* n : node->all_input_nodes())
      if (is_callable_node(n) && !nodes.count(n)) inputs.insert(n);
  }
};

FxNetAccFusionsFinder::FxNetAccFusionsFinder(const GraphModule& module, NodeSet& acc_nodes) : acc_nodes_(acc_nodes) {
  for (Node* n : module.graph().nodes()) {
    position_[n] = nodes_.size();
    nodes_.push_back(n);
  }
}

bool FxNetAccFusionsFinder::recursive_add_node(FusionGroup& group, const NodeList& inputs) {
  for (Node* arg : inputs) {
    // Placeholders and get_attr nodes never join a group.
    if (!is_callable_node(arg)) continue;
    // Above the group's top node: already upstream of the whole group.
    if (position_.at(arg) < group.top_node_idx) continue;
    if (group.nodes.count(arg)) return true;
    if (recursive_add_node(group, arg->all_input_nodes())) {
      group.add_node(arg);
      return true;
    }
  }
  return false;
}

std::unordered_map<Node*, std::shared_ptr<const NodeSet>> FxNetAccFusionsFinder::operator()() {
  std::unordered_map<Node*, std::shared_ptr<const NodeSet>> result;
  auto in_order = [this](const NodeSet& s) {
    NodeList v(s.begin(), s.end());
    std::sort(v.begin(), v.end(), [this](Node* a, Node* b) { return position_.at(a) < position_.at(b); });
    return v;
  };
  for (Node* start : in_order(acc_nodes_)) {
    if (result.count(start) || !is_callable_node(start) || has_tensor_meta(start) || !acc_nodes_.count(start))
      continue;
    FusionGroup group{position_.at(start), {start}, {}, {start}};
    for (Node* n : start->all_input_nodes()) group.inputs.insert(n);
    while (!group.nodes_need_process.empty()) {
      Node* node = in_order(group.nodes_need_process).front();
      group.nodes_need_process.erase(node);
      recursive_add_node(group, in_order(group.inputs));
      // Downstream nodes of a non-tensor value join the group.
      if (!has_tensor_meta(node)) {
        for (Node* user : node->users().to_vector()) {
          if (!is_callable_node(user) || group.nodes.count(user)) continue;
          group.add_node(user);
          recursive_add_node(group, in_order(group.inputs));
        }
      }
      // So do the upstream nodes producing non-tensor values.
      for (Node* arg : node->all_input_nodes()) {
        if (!is_callable_node(arg) || has_tensor_meta(arg) || group.nodes.count(arg)) continue;
        group.add_node(arg);
        group.top_node_idx = std::min(group.top_node_idx, position_.at(arg));
        recursive_add_node(group, in_order(group.inputs));
      }
    }
    const bool all_acc = std::all_of(group.nodes.begin(), group.nodes.end(),
                                     [this](Node* n) { return acc_nodes_.count(n) != 0; });
    if (!all_acc) {
      for (Node* n : group.nodes) acc_nodes_.erase(n);
    } else {
      auto shared = std::make_shared<const NodeSet>(group.nodes);
      for (Node* n : group.nodes) result[n] = shared;
    }
  }
  return result;
}

}  // namespace fx
