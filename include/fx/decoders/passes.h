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
///
/// fuse_rms_norm, fuse_rotary_embedding, fuse_silu_mul: HF's RMSNorm (8
/// operators with its casts), rotary embedding (rotate_half's narrow, neg,
/// cat, then two products and a sum: 7) and SiLU-gated product (2) as one
/// kernel each, one pass over the inputs instead of a tensor written between
/// every two operators; what decoding one token spends outside the weights
/// is mostly these small operators' calls.

#include <fx/graph_module.h>

#include <ATen/core/Tensor.h>

#include <memory>
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

/// The instruction set decoder_attention and silu_mul run at on this CPU: "avx512", "avx2" or "plain".
std::string decoder_attention_kernel();

/// Replaces each attention over a cache (see the file comment) by one
/// fxcpp::decoder_attention node (decoder_attention, decoder_attention_1 ...) and
/// returns how many it replaced. A site whose intermediate values have other
/// users, whose mask is not a bool [T, S], or whose heads are repeated
/// otherwise than repeat_interleave on dim 1 is left as it is.
size_t fuse_attention(GraphModule& gm);

/// weight * (x * rsqrt(mean(x^2, -1, keepdim=True) + eps)) for float32 x [..., H] and weight [H]:
/// the operator `fxcpp::rms_norm(Tensor x, Tensor weight, float eps) -> Tensor` (the sum of squares in double).
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

/// x * cos + rotate_half(x) * sin (HF's apply_rotary_pos_emb) for float32 x [B, heads, T, D] and cos,
/// sin [T, D]: the operator `fxcpp::rotary_embedding(Tensor x, Tensor cos, Tensor sin) -> Tensor`.
at::Tensor rotary_embedding(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

/// silu(gate) * up for float32 tensors of one shape: the operator `fxcpp::silu_mul(Tensor gate, Tensor up) -> Tensor`.
at::Tensor silu_mul(const at::Tensor& gate, const at::Tensor& up);

/// Replaces each RMSNorm (weight a get_attr [H], HF's casts to float32 and
/// back included) by one fxcpp::rms_norm node; returns how many.
size_t fuse_rms_norm(GraphModule& gm);

/// Replaces each rotary embedding of a float32 [B, heads, T, D] value with
/// cos and sin [T, D] by one fxcpp::rotary_embedding node; returns how many.
size_t fuse_rotary_embedding(GraphModule& gm);

/// Replaces each silu(gate) * up of one shape by one fxcpp::silu_mul node; returns how many.
size_t fuse_silu_mul(GraphModule& gm);

/// Sibling linear layers reading one value (a decoder's q / k / v
/// projections, its gate / up pair) as one GEMM: the layers' weights stacked
/// by output channel under a new attribute (weight-only layers' packed rows,
/// scales and zero points likewise, under `_weight_only.`), named after the
/// members ("model.layers.0.self_attn.q_proj_k_proj_v_proj"), and each
/// member's value an aten::narrow of its output (a view, no copy). Layers
/// merge when they read the same node with the same kind (float aten::linear
/// or Linear modules; fxcpp::linear_weight_only of one scheme), input
/// features, dtype and bias or none. One GEMV per group when decoding: the
/// activations quantized once, the fixed cost of a call paid once. Exact for
/// weight-only layers (each channel's sum unchanged); float layers run
/// through oneDNN, whose blocking may round differently. Returns a new
/// module holding only what its graph reads (the members' own weights are
/// not kept); `gm` itself when nothing merges. `merged`: how many groups.
/// `float_layers` false: weight-only layers only (optimize_decoder's choice:
/// stacking float weights copies them while the caller's module still holds
/// the originals, and oneDNN packs a copy of its own: F32 TinyLlama's peak
/// grew from 3.4 to 4.2 GB for no measured gain).
std::shared_ptr<GraphModule> merge_projections(const std::shared_ptr<GraphModule>& gm, size_t* merged = nullptr,
                                               bool float_layers = true);

/// The head of a decoder graph (the output's producer: a linear layer,
/// oneDNN's or weight-only, or a matmul, over a [B, T, H] input) applied to
/// the last position only, through aten::slice(x, 1, -1): the graph then
/// returns the logits [B, 1, V] generate() reads, to the bit, without
/// computing the other T - 1 positions' (HF's num_logits_to_keep = 1). For
/// decoding only: teacher forcing wants every position. Returns 1 when it
/// sliced, 0 when the graph has no such head (or is sliced already).
size_t keep_last_logits(GraphModule& gm);

}  // namespace fx::decoders
