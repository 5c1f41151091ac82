// fold_batch_norm: conv/linear → batch_norm(eval) folded into one layer.
#include <fx/optimize/fold_batch_norm.h>

#include <fx/graph.h>
#include <fx/tensor_meta.h>

#include "optimize/buffer_reuse.h"
#include "optimize/layer_folding.h"

#include <ATen/ATen.h>

namespace fx {
namespace {

using passes_detail::attr_tensor;
using passes_detail::is_get_attr;

bool is_call(const Node* n, const char* target) {
  return n->op() == Opcode::CallFunction && n->target() == target;
}

/// Whether `bn` is an inference batch norm of constants fed by a conv2d or linear of constants.
bool foldable(const Node* bn) {
  if (!is_call(bn, "aten::batch_norm") || bn->args().size() != 9 || !bn->kwargs().empty()) return false;
  const ArgList& a = bn->args();
  if (!a[0].is_node() || a[5].kind() != Argument::Kind::Bool || a[5].to_bool()) return false;
  for (int i : {1, 2}) if (!a[i].is_none() && !is_get_attr(a[i])) return false;
  if (!is_get_attr(a[3]) || !is_get_attr(a[4])) return false;
  const Node* layer = a[0].to_node();
  bool linear = false;
  if (!passes_detail::is_constant_layer(layer, &linear)) return false;
  if (linear) {
    // batch_norm normalizes dim 1, a linear layer's outputs are the last
    // dim: they agree only for 2-d values (known from ShapeProp's tensor_meta).
    const TensorMetadata* meta = tensor_meta_of(layer);
    if (meta == nullptr || meta->shape.size() != 2) return false;
  }
  return true;
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
    at::Tensor w = attr_tensor(*gm, layer->args()[1]), b = attr_tensor(*gm, layer->args()[2]);
    at::Tensor gamma = attr_tensor(*gm, a[1]), beta = attr_tensor(*gm, a[2]), mean = attr_tensor(*gm, a[3]), var = attr_tensor(*gm, a[4]);
    const double eps = a[7].to_double();
    if (!w.is_floating_point() || mean.dim() != 1 || mean.size(0) != w.size(0))
      continue;  // not per-output-channel: leave it
    at::Tensor scale = at::rsqrt(var.to(at::kDouble) + eps);
    if (gamma.defined()) scale = scale * gamma.to(at::kDouble);
    std::vector<int64_t> shape(w.dim(), 1);
    shape[0] = -1;
    // The result is allocated before its float64 temporary (one, in place)
    // so that the freed temporary leaves no hole under the results kept:
    // malloc reuses it for the next layer (peak memory; the same values).
    // copy=true: a float64 weight is copied too, never scaled in place.
    at::Tensor new_w = at::empty_like(w, at::MemoryFormat::Contiguous);
    new_w.copy_(w.to(at::kDouble, /*non_blocking=*/false, /*copy=*/true).mul_(scale.view(shape)));
    at::Tensor new_b = b.defined() ? b.to(at::kDouble) : at::zeros_like(mean, mean.options().dtype(at::kDouble));
    new_b = (new_b - mean.to(at::kDouble)) * scale;
    if (beta.defined()) new_b = new_b + beta.to(at::kDouble);
    folds.push_back({bn, new_w, new_b.to(w.scalar_type())});
  }
  for (auto& f : folds) passes_detail::fold_into_layer(*gm, f.bn->args()[0].to_node(), f.bn, f.weight, f.bias);
  if (!folds.empty()) {
    g.eliminate_dead_code();
    g.lint();
  }
  return PassResult{gm, !folds.empty()};
}

}  // namespace fx
