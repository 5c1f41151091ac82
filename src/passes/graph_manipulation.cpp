// get_size_of_node / size_bytes / get_size_of_all_nodes (torch.fx
// passes/graph_manipulation.py): bytes of a node's value and of its weights,
// read from the tensor_meta ShapeProp records.
#include <fx/passes/graph_manipulation.h>

#include <fx/passes/shape_prop.h>

#include <c10/core/ScalarType.h>

#include <unordered_map>

namespace fx {

const std::any& get_tensor_meta(const Node* node) {
  auto it = node->meta().find("tensor_meta");
  if (it == node->meta().end() || !it->second.has_value())
    throw Error("Node " + node->name() + " has no tensor metadata associated with it! "
                "Check that shape propagation has run.");
  return it->second;
}

size_bytes get_size_of_node(const GraphModule& fx_module, const Node* node) {
  int64_t total_num_of_elems = 0;
  if (node->op() == Opcode::CallModule) {
    std::shared_ptr<torch::nn::Module> submodule = fx_module.get_submodule(node->target());
    for (const auto& p : submodule->named_parameters(/*recurse=*/true)) total_num_of_elems += p.value().numel();
  }
  const std::any& meta = get_tensor_meta(node);
  const auto* tensor_meta = std::any_cast<TensorMetadata>(&meta);
  if (!tensor_meta)
    throw Error("get_size_of_node: the value of node " + node->name() +
                " is not one tensor (its tensor_meta holds several)");
  int64_t output_elem = 1;
  for (int64_t s : tensor_meta->shape) output_elem *= s;
  total_num_of_elems += output_elem;
  // torch.fx: torch.tensor([], dtype).element_size(), or that of an empty
  // quantized tensor for qint8 / quint8; c10::elementSize covers both.
  const auto size_per_elem_bytes = static_cast<int64_t>(c10::elementSize(tensor_meta->dtype));
  return size_bytes{size_per_elem_bytes * output_elem, size_per_elem_bytes * total_num_of_elems};
}

void get_size_of_all_nodes(const std::shared_ptr<GraphModule>& fx_module,
                           const std::optional<std::vector<c10::IValue>>& args) {
  if (args) ShapeProp(fx_module).propagate(*args);
  for (Node* node : fx_module->graph().nodes()) {
    if (node->op() == Opcode::Output) break;
    node->meta()["size_bytes"] = get_size_of_node(*fx_module, node);
  }
}

void replace_target_nodes_with(GraphModule& fx_module, Opcode old_op, const std::string& old_target, Opcode new_op,
                               const std::string& new_target) {
  auto new_graph = std::make_shared<Graph>();
  std::unordered_map<const Node*, Node*> val_map;
  auto remap = [&](Node* n) { return Argument(val_map.at(n)); };
  for (Node* node : fx_module.graph().nodes()) {
    if (node->op() == old_op && node->target() == old_target) {
      ArgList args;
      for (const Argument& a : node->args()) args.push_back(map_arg(a, remap));
      Kwargs kwargs;
      for (const auto& [k, a] : node->kwargs()) kwargs.emplace_back(k, map_arg(a, remap));
      val_map[node] = new_graph->create_node(new_op, new_target, std::move(args), std::move(kwargs), node->name());
    } else {
      val_map[node] = new_graph->node_copy(node, remap);
    }
  }
  fx_module.set_graph(new_graph);
}

}  // namespace fx
