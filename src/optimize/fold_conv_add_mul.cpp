// fold_conv_add_mul: conv2d/linear → add/sub/mul/div by a constant, folded.
#include <fx/optimize/fold_conv_add_mul.h>

#include <fx/graph.h>

#include "optimize/buffer_reuse.h"
#include "optimize/layer_folding.h"

#include <ATen/ATen.h>

namespace fx {
namespace {

using passes_detail::attr_tensor;
using passes_detail::is_get_attr;

/// The constant operand as a double tensor of one value per output channel
/// (or one value), or an undefined tensor when it is not such a constant.
at::Tensor per_channel(GraphModule& gm, const Argument& c, int64_t channels, bool linear) {
  if (c.kind() == Argument::Kind::Int || c.kind() == Argument::Kind::Double)
    return at::scalar_tensor(c.to_double(), at::kDouble);
  if (!is_get_attr(c)) return at::Tensor();
  at::Tensor t = attr_tensor(gm, c);
  if (!t.is_floating_point()) return at::Tensor();
  if (t.numel() == 1 && t.dim() <= 1) return t.to(at::kDouble).reshape({});
  const bool ok = linear ? t.sizes() == at::IntArrayRef{channels}
                         : (t.sizes() == at::IntArrayRef{channels, 1, 1} ||
                            t.sizes() == at::IntArrayRef{1, channels, 1, 1});
  return ok ? t.to(at::kDouble).reshape({channels}) : at::Tensor();
}

/// Folds `op` into the layer before it; false when it does not fit.
bool fold(GraphModule& gm, Node* op) {
  const std::string name = passes_detail::aten_op_name(op);
  const bool scale = name == "mul" || name == "div", shift = name == "add" || name == "sub";
  if ((!scale && !shift) || op->args().size() != 2 || !op->kwargs().empty() || !op->args()[0].is_node()) return false;
  // add/mul commute: the layer may be either operand; sub/div only the first.
  Node* layer = op->args()[0].to_node();
  Argument constant = op->args()[1];
  bool linear = false;
  if (!passes_detail::is_constant_layer(layer, &linear)) {
    if (name != "add" && name != "mul") return false;
    if (!op->args()[1].is_node()) return false;
    constant = op->args()[0];
    layer = op->args()[1].to_node();
    if (!passes_detail::is_constant_layer(layer, &linear)) return false;
  }
  at::NoGradGuard no_grad;
  at::Tensor w = attr_tensor(gm, layer->args()[1]), b = attr_tensor(gm, layer->args()[2]);
  if (!w.is_floating_point()) return false;
  at::Tensor c = per_channel(gm, constant, w.size(0), linear);
  if (!c.defined()) return false;
  at::Tensor bias = b.defined() ? b.to(at::kDouble) : at::zeros({w.size(0)}, at::kDouble);
  at::Tensor weight = w.to(at::kDouble);
  if (scale) {
    at::Tensor k = name == "mul" ? c : 1.0 / c;
    std::vector<int64_t> shape(w.dim(), 1);
    shape[0] = -1;
    weight = weight * (k.dim() == 0 ? k : k.view(shape));
    bias = bias * k;
  } else {
    bias = name == "add" ? bias + c : bias - c;
  }
  passes_detail::fold_into_layer(gm, layer, op, weight.to(w.scalar_type()), bias.to(w.scalar_type()));
  return true;
}

}  // namespace

PassResult fold_conv_add_mul(std::shared_ptr<GraphModule> gm, size_t* count) {
  if (!gm) throw PassError("fold_conv_add_mul: no module given");
  Graph& g = gm->graph();
  g.lint();
  size_t folded = 0;
  for (Node* n : g.nodes().to_vector())  // folding erases n itself only
    folded += fold(*gm, n);
  if (folded) {
    g.eliminate_dead_code();
    g.lint();
  }
  if (count) *count = folded;
  return PassResult{gm, folded > 0};
}

}  // namespace fx
