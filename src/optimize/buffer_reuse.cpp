// When an op may write into an input's buffer (see buffer_reuse.h).
#include "optimize/buffer_reuse.h"

#include <unordered_set>

namespace fx::passes_detail {

std::string aten_op_name(const Node* n) {
  if (n->op() != Opcode::CallFunction || n->target().rfind("aten::", 0) != 0) return "";
  std::string s = n->target().substr(6);
  return s.substr(0, s.find('.'));
}

bool is_fresh(const Node* n) {
  static const std::unordered_set<std::string> fresh = {
      "add", "sub", "mul", "div", "relu", "hardtanh", "silu", "sigmoid", "hardswish", "hardsigmoid", "gelu", "tanh",
      "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "layer_norm", "softmax", "conv2d", "linear", "matmul",
      "cat"};
  if (n->op() != Opcode::CallFunction) return false;
  const std::string& t = n->target();
  if (t.rfind("fxcpp::onednn_", 0) == 0 || t == "fxcpp::restore_layout" || t == "fxcpp::max_pool2d" ||
      t == "fxcpp::adaptive_avg_pool2d" || t == "fxcpp::softmax" || t == "fxcpp::layer_norm")
    return true;
  return fresh.count(aten_op_name(n)) > 0;
}

NodeOrder::NodeOrder(const Graph& g) {
  size_t i = 0;
  for (const Node* n : g.nodes()) position_[n] = i++;
}

bool NodeOrder::dead_after(const Node* value, const Node* user) const {
  for (const Node* u : value->users()) {
    if (u == user) continue;
    if (u->op() == Opcode::Output || position_.at(u) > position_.at(user)) return false;
  }
  return true;
}

bool NodeOrder::may_overwrite(const Node* value, const Node* user) const {
  if (!is_fresh(value) || !dead_after(value, user)) return false;
  for (const Node* u : value->users())
    if (u != user && !is_fresh(u)) return false;
  return true;
}

}  // namespace fx::passes_detail
