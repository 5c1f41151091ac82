#pragma once
// Internal: folding an op that follows a conv2d / linear of constants into
// the layer's weight and bias (fold_batch_norm, fold_conv_add_mul).
#include <fx/graph.h>
#include <fx/graph_module.h>

#include <ATen/core/Tensor.h>

namespace fx::passes_detail {

/// The tensor of a get_attr argument, or an undefined tensor for None.
at::Tensor attr_tensor(GraphModule& gm, const Argument& a);

/// Whether `a` is a get_attr node.
bool is_get_attr(const Argument& a);

/// A list argument of ints ([1, 1] for {1, 1}).
Argument int_list_argument(const std::vector<int64_t>& v);

/// Whether `n` is aten::conv2d or aten::linear (any overload) whose weight
/// (and bias, if any) are get_attr nodes, with no keyword arguments and one
/// user: something may be folded into it. `linear` tells which.
bool is_constant_layer(const Node* n, bool* linear = nullptr);

/// Gives `layer` the new `weight` and `bias` (attributes of gm named after
/// the layer: "_folded.<layer>.weight" / ".bias") and replaces
/// `folded` (the layer's only user) by the layer.
void fold_into_layer(GraphModule& gm, Node* layer, Node* folded, const at::Tensor& weight, const at::Tensor& bias);

}  // namespace fx::passes_detail
