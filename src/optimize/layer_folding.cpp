// Folding an op into the conv2d / linear before it (see layer_folding.h).
#include "optimize/layer_folding.h"

#include "optimize/buffer_reuse.h"

namespace fx::passes_detail {

at::Tensor attr_tensor(GraphModule& gm, const Argument& a) {
  return a.is_none() ? at::Tensor() : gm.fetch_attr(a.to_node()->target());
}

Argument int_list_argument(const std::vector<int64_t>& v) {
  return Argument::list(std::vector<Argument>(v.begin(), v.end()));
}

bool is_get_attr(const Argument& a) { return a.is_node() && a.to_node()->op() == Opcode::GetAttr; }

bool is_constant_layer(const Node* n, bool* linear) {
  const std::string name = aten_op_name(n);
  if (name != "conv2d" && name != "linear") return false;
  if (linear) *linear = name == "linear";
  const ArgList& l = n->args();
  return n->users().size() == 1 && n->kwargs().empty() && l.size() >= 3 && is_get_attr(l[1]) &&
         (l[2].is_none() || is_get_attr(l[2]));
}

void fold_into_layer(GraphModule& gm, Node* layer, Node* folded, const at::Tensor& weight, const at::Tensor& bias) {
  Graph& g = layer->graph();
  // One submodule per layer: once nothing reads them (lower_to_onednn packed
  // them), delete_all_unused_submodules frees them.
  const std::string base = "_folded." + layer->name() + ".";
  gm.register_attr(base + "weight", weight);
  gm.register_attr(base + "bias", bias);
  {
    InsertPoint at = g.inserting_before(layer);
    layer->update_arg(1, g.get_attr(base + "weight"));
    layer->update_arg(2, g.get_attr(base + "bias"));
  }
  folded->replace_all_uses_with(layer);
  layer->meta() = folded->meta();
  g.erase_node(folded);
}

}  // namespace fx::passes_detail
