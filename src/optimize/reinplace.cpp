// reinplace: out-of-place ops on dead fresh inputs → their in-place forms.
#include <fx/optimize/reinplace.h>

#include "optimize/buffer_reuse.h"

#include <unordered_set>

namespace fx {
namespace {

using passes_detail::aten_op_name;

bool reinplaceable(const Node* n, const passes_detail::NodeOrder& order) {
  static const std::unordered_set<std::string> unary = {"relu", "hardtanh", "silu", "sigmoid", "hardswish",
                                                        "hardsigmoid", "gelu", "tanh"};
  static const std::unordered_set<std::string> binary = {"add", "sub", "mul", "div"};
  const std::string name = aten_op_name(n);
  if (!unary.count(name) && !binary.count(name)) return false;
  if (n->args().empty() || !n->args()[0].is_node()) return false;
  const Node* self = n->args()[0].to_node();
  for (size_t i = 1; i < n->args().size(); ++i)
    if (n->args()[i].is_node() && n->args()[i].to_node() == self) return false;  // x * x
  const TensorMetadata* in = tensor_meta_of(self);
  const TensorMetadata* out = tensor_meta_of(n);
  if (!in || !out || in->dtype != out->dtype || in->shape != out->shape) return false;
  return order.may_overwrite(self, n);
}

}  // namespace

PassResult reinplace(std::shared_ptr<GraphModule> gm, size_t* count) {
  if (!gm) throw PassError("reinplace: no module given");
  Graph& g = gm->graph();
  g.lint();
  passes_detail::NodeOrder order(g);
  std::vector<Node*> nodes;
  for (Node* n : g.nodes())
    if (reinplaceable(n, order)) nodes.push_back(n);
  for (Node* n : nodes) {
    const std::string& t = n->target();
    const size_t dot = t.find('.');
    n->set_target(dot == std::string::npos ? t + "_" : t.substr(0, dot) + "_" + t.substr(dot));
  }
  if (count) *count = nodes.size();
  if (!nodes.empty()) g.lint();
  return PassResult{gm, !nodes.empty()};
}

}  // namespace fx
