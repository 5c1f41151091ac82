// fold_batch_norm: conv/linear → batch_norm(eval) folded into one layer.
#include <fx/passes/fold_batch_norm.h>

#include <fx/graph.h>
#include <fx/tensor_meta.h>

#include <ATen/ATen.h>

namespace fx {
namespace {

bool is_call(const Node* n, const char* target) {
  return n->op() == Opcode::CallFunction && n->target() == target;
}

bool is_get_attr(const Argument& a) { return a.is_node() && a.to_node()->op() == Opcode::GetAttr; }

/// The tensor of a get_attr argument, or an undefined tensor for None.
at::Tensor attr(GraphModule& gm, const Argument& a) {
  return a.is_none() ? at::Tensor() : gm.fetch_attr(a.to_node()->target());
}

/// Whether `bn` is an inference batch norm of constants fed by a conv2d or linear of constants.
bool foldable(const Node* bn) {
  if (!is_call(bn, "aten::batch_norm") || bn->args().size() != 9 || !bn->kwargs().empty()) return false;
  const ArgList& a = bn->args();
  if (!a[0].is_node() || a[5].kind() != Argument::Kind::Bool || a[5].to_bool()) return false;
  for (int i : {1, 2}) if (!a[i].is_none() && !is_get_attr(a[i])) return false;
  if (!is_get_attr(a[3]) || !is_get_attr(a[4])) return false;
  const Node* layer = a[0].to_node();
  if (layer->users().size() != 1 || !layer->kwargs().empty()) return false;
  if (is_call(layer, "aten::linear")) {
    // batch_norm normalizes dim 1, a linear layer's outputs are the last
    // dim: they agree only for 2-d values (known from ShapeProp's tensor_meta).
    auto it = layer->meta().find("tensor_meta");
    const auto* meta = it == layer->meta().end() ? nullptr : std::any_cast<TensorMetadata>(&it->second);
    if (meta == nullptr || meta->shape.size() != 2) return false;
  } else if (!is_call(layer, "aten::conv2d")) {
    return false;
  }
  const ArgList& l = layer->args();
  return l.size() >= 3 && is_get_attr(l[1]) && (l[2].is_none() || is_get_attr(l[2]));
}

}  // namespace

PassResult fold_batch_norm(std::shared_ptr<GraphModule> gm) {
  if (!gm) throw PassError("fold_batch_norm: no module given");
  Graph& g = gm->graph();
  g.lint();
  std::vector<Node*> norms;
  for (Node* n : g.nodes())
    if (foldable(n)) norms.push_back(n);
  // Compute every folded tensor before the first edit.
  struct Fold {
    Node* bn;
    at::Tensor weight, bias;
  };
  std::vector<Fold> folds;
  at::NoGradGuard no_grad;
  for (Node* bn : norms) {
    const ArgList& a = bn->args();
    Node* layer = a[0].to_node();
    at::Tensor w = attr(*gm, layer->args()[1]), b = attr(*gm, layer->args()[2]);
    at::Tensor gamma = attr(*gm, a[1]), beta = attr(*gm, a[2]), mean = attr(*gm, a[3]), var = attr(*gm, a[4]);
    const double eps = a[7].to_double();
    if (!w.is_floating_point() || mean.dim() != 1 || mean.size(0) != w.size(0))
      continue;  // not per-output-channel: leave it
    at::Tensor scale = at::rsqrt(var.to(at::kDouble) + eps);
    if (gamma.defined()) scale = scale * gamma.to(at::kDouble);
    std::vector<int64_t> shape(w.dim(), 1);
    shape[0] = -1;
    at::Tensor new_w = (w.to(at::kDouble) * scale.view(shape)).to(w.scalar_type());
    at::Tensor new_b = b.defined() ? b.to(at::kDouble) : at::zeros_like(mean, mean.options().dtype(at::kDouble));
    new_b = (new_b - mean.to(at::kDouble)) * scale;
    if (beta.defined()) new_b = new_b + beta.to(at::kDouble);
    folds.push_back({bn, new_w, new_b.to(w.scalar_type())});
  }
  for (auto& f : folds) {
    Node* layer = f.bn->args()[0].to_node();
    const std::string base = layer->name() + "_folded_";
    gm->register_attr(base + "weight", f.weight);
    gm->register_attr(base + "bias", f.bias);
    {
      InsertPoint at = g.inserting_before(layer);
      layer->update_arg(1, g.get_attr(base + "weight"));
      layer->update_arg(2, g.get_attr(base + "bias"));
    }
    f.bn->replace_all_uses_with(layer);
    layer->meta() = f.bn->meta();
    g.erase_node(f.bn);
  }
  if (!folds.empty()) {
    g.eliminate_dead_code();
    g.lint();
  }
  return PassResult{gm, !folds.empty()};
}

}  // namespace fx
