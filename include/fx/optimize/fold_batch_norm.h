#pragma once
/// \file
/// fold_batch_norm: an inference batch norm whose input is a convolution or
/// linear layer (and nothing else reads that input) is folded into the
/// layer's weight and bias (torch.fx `experimental/optimization.fuse`,
/// torch.nn.utils.fuse_conv_bn_eval): with s = gamma / sqrt(var + eps),
/// W' = W * s (per output channel) and b' = (b - mean) * s + beta.
///
/// Works on frozen graphs (fx::freeze_modules): aten::conv2d / aten::linear
/// followed by aten::batch_norm(training=False), all parameters get_attr
/// nodes. The folded tensors are new attributes of `gm` named
/// `_folded.<conv node>.weight` / `.bias` (one submodule per layer, so
/// delete_all_unused_submodules frees them once unused); the original parameters
/// (shared with the module the graph came from) are never changed.
/// Control flow: one graph; nothing is folded across a cond / loop call (its
/// operands are call_module inputs, never a batch norm's); branches are
/// folded when the pass runs on them (PassManager, optimize_for_inference).

#include <fx/passes/pass_manager.h>

namespace fx {

/// Folds every foldable batch norm of `gm` (see the file comment); in place.
PassResult fold_batch_norm(std::shared_ptr<GraphModule> gm);

}  // namespace fx
