#pragma once
// Internal (freeze_modules): a self-attention nn.MultiheadAttention call
// written as the ATen ops of its math path.
#include <fx/graph_module.h>
#include <fx/module_attributes.h>

namespace fx::passes_detail {

/// Replaces the call_module `n` of the MultiheadAttention `module` (its
/// attributes `a`) by linear → heads → matmul → softmax → matmul → linear,
/// with 1/sqrt(head_dim) folded into the query rows of the input
/// projection (new attributes of `gm`), when `n` is self-attention
/// (query = key = value), batch_first, without masks, bias_k/bias_v or
/// zero attention, and only its output [0] is read. Returns whether it did.
bool freeze_attention(GraphModule& gm, Node* n, const torch::nn::Module& module, const ModuleAttributes& a);

}  // namespace fx::passes_detail
