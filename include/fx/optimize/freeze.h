#pragma once
/// \file
/// freeze_modules: every call of a known torch.nn layer becomes the ATen
/// call_function it runs, with its parameters and buffers as get_attr nodes
/// (what torch.jit.freeze + inlining do for TorchScript). `conv1(x)` becomes
/// `aten::conv2d(x, conv1.weight, conv1.bias, [2, 2], [3, 3], [1, 1], 1)`,
/// ReLU6 `aten::hardtanh(x, 0.0, 6.0)`, and Dropout / Identity disappear.
/// Later passes (fold_batch_norm, lower_to_onednn) then see one spelling of
/// each op whether the graph was traced from C++ modules or imported from
/// TorchScript (both kinds of leaves are read through fx::module_attributes).
///
/// Layers frozen: Conv2d (zeros padding), Linear, BatchNorm1d/2d (eval,
/// running stats), LayerNorm, ReLU, ReLU6, Hardtanh, SiLU, GELU, Sigmoid,
/// Tanh, Hardswish, Hardsigmoid, MaxPool2d, AdaptiveAvgPool2d, Flatten,
/// Softmax, Dropout*, Identity, and MultiheadAttention used as
/// self-attention (batch_first, no masks, only output [0] read: linear →
/// heads → matmul → softmax → matmul → linear, the 1/sqrt(head_dim) scale
/// folded into the query projection). Other modules stay call_module, and
/// so does a known layer whose configuration cannot be read. Leaves exported
/// with torch.jit.trace (the most common export) keep their tensors but not
/// their configuration; the importer reads it from the leaf's own forward,
/// the one ATen call the layer made (aten::_convolution's stride, padding
/// ..., aten::batch_norm's eps): a traced Conv2d freezes as a scripted one
/// does. A traced MultiheadAttention (one aten::_native_multi_head_attention
/// call taking one input and returning one tensor, batch_first and
/// num_heads not kept) stays a call_module: it runs, unlowered. Freezing is
/// for inference: a BatchNorm or Dropout in training mode is an fx::Error
/// (torch.jit.freeze also requires eval mode), and the graph is unchanged.
/// Control flow: one graph; a cond / loop call stays a call_module (its
/// branches hold their own leaves: run it on them, as PassManager and
/// optimize_for_inference do).

#include <fx/passes/pass_manager.h>

namespace fx {

/// Freezes `gm` in place (see the file comment); modified when any call
/// changed. The modules themselves are not changed.
PassResult freeze_modules(std::shared_ptr<GraphModule> gm);

}  // namespace fx
