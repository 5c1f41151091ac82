#pragma once
// Internal: when may an op write into an input's buffer? Shared by
// lower_to_onednn (residual sums in place) and reinplace.
#include <fx/graph.h>
#include <fx/tensor_meta.h>

#include <string>
#include <unordered_map>

namespace fx::passes_detail {

/// "aten::relu_.default" → "relu_"; "" for anything but an ATen call_function.
std::string aten_op_name(const Node* n);

/// Whether n's result is a new tensor that no other value aliases (an ATen
/// op that allocates its output, an fxcpp::onednn_* kernel, fxcpp::restore_layout,
/// fxcpp::max_pool2d, fxcpp::adaptive_avg_pool2d, fxcpp::softmax or fxcpp::layer_norm).
bool is_fresh(const Node* n);

/// Positions of a graph's nodes, for "is this value read later?".
class NodeOrder {
 public:
  /// Numbers the nodes of `g` in order.
  explicit NodeOrder(const Graph& g);
  /// Gives `n` (new) the position of `like`.
  void place(const Node* n, const Node* like) { position_[n] = position_.at(like); }
  /// Whether nothing after `user` reads `value` (nor the graph's output).
  bool dead_after(const Node* value, const Node* user) const;
  /// Whether `user` may overwrite `value`'s buffer: value is fresh, dead
  /// after user, and every other reader makes a fresh result (no view of
  /// value outlives it).
  bool may_overwrite(const Node* value, const Node* user) const;

 private:
  std::unordered_map<const Node*, size_t> position_;
};

}  // namespace fx::passes_detail
