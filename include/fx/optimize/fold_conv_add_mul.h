#pragma once
/// \file
/// fold_conv_add_mul: a constant add / sub / mul / div right after a conv2d
/// or linear of constants (nothing else reading the layer's output) is
/// folded into the layer: x*c scales the weight and bias per output
/// channel, x+c shifts the bias (TorchScript's FoldFrozenConvAddOrSub and
/// FoldFrozenConvMulOrDiv, for fxcpp graphs). The constant is a Python
/// number or a get_attr tensor constant along the output channels only: one
/// element, or [C, 1, 1] / [1, C, 1, 1] after a conv2d, [C] after a linear
/// (anything that would broadcast the output to another shape is left
/// alone). The layer must come first for sub and div (c - x is not folded).
/// Works on frozen graphs (fx::freeze_modules); folded tensors are new
/// attributes of `gm`, the originals are not changed.

#include <fx/passes/pass_manager.h>

namespace fx {

/// Folds every foldable constant add/sub/mul/div of `gm` (see the file
/// comment), repeatedly (conv → mul → add folds both); `count`, when given,
/// receives how many.
PassResult fold_conv_add_mul(std::shared_ptr<GraphModule> gm, size_t* count = nullptr);

}  // namespace fx
