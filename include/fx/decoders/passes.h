#pragma once
/// \file
/// Graph passes that make a captured decoder fast (issue 67), each a
/// torch.fx-style pass over a GraphModule, visible in the graph it leaves.
///
/// fuse_attention: attention over the KV cache as one kernel. The captured
/// pattern, HF's and gpt-fast's,
///
///     keys = repeat_interleave(k_cache, heads / kv_heads, 1)     # GQA: the cache copied per step
///     scores = matmul(q, keys.transpose(2, 3)) / sqrt(head_dim)
///     probs = softmax(masked_fill(scores, mask, -inf), -1)
///     out = matmul(probs, repeat_interleave(v_cache, heads / kv_heads, 1))
///
/// reads and writes the whole cache (every position, visible or not) four
/// times a step and repeats it per query head; fxcpp::decoder_attention reads
/// each visible cache row once, in place, the query heads of a group sharing
/// their key / value head, with an online softmax (flash attention's running
/// maximum), so the positions past the current one cost nothing.

#include <fx/graph_module.h>

#include <ATen/core/Tensor.h>

#include <string>

namespace fx::decoders {

/// softmax(q k^T * scale + mask) v with q [B, H, T, D] float32, k and v
/// [B, KV, S, D] (KV dividing H: query head h reads key / value head
/// h / (H / KV), as repeat_interleave on dim 1 lays them out), mask bool
/// [T, S] true where a position is hidden: [B, H, T, D]. A row with every
/// position hidden is NaN, as softmax over -inf is. The operator
/// `fxcpp::decoder_attention(Tensor q, Tensor k, Tensor v, Tensor mask, float scale) -> Tensor`.
/// Throws fx::Error (one line naming the shapes) on anything else.
at::Tensor decoder_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                             double scale);

/// The inner products' instruction set on this CPU: "avx512", "avx2" or "plain".
std::string decoder_attention_kernel();

/// Replaces each attention over a cache (see the file comment) by one
/// fxcpp::decoder_attention node (decoder_attention, decoder_attention_1 ...) and
/// returns how many it replaced. A site whose intermediate values have other
/// users, whose mask is not a bool [T, S], or whose heads are repeated
/// otherwise than repeat_interleave on dim 1 is left as it is.
size_t fuse_attention(GraphModule& gm);

}  // namespace fx::decoders
