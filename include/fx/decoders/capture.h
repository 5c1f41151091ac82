#pragma once
/// \file
/// A decoder as a graph (issue 67): fx::symbolic_trace of a
/// LlamaForCausalLM with the new-token count T dynamic, so that one graph
/// runs the prompt (T = its length) and every decode step (T = 1), its KV
/// caches buffers the graph updates in place (`aten::index_copy_` on their
/// get_attr nodes at `input_pos`: gpt-fast's `k_cache[:, :, input_pos] = k`).
/// The graph is an ordinary GraphModule: passes rewrite it,
/// optimize_for_inference lowers its linears and matmuls, fx::save writes it.
///
///     auto model = fx::decoders::load_llama("TinyLlama/", {1, 256});
///     auto gm = fx::decoders::capture(model);          // one graph, T dynamic
///     auto fast = fx::decoders::optimize_decoder(gm);  // oneDNN linears, packed weights
///     auto result = fx::decoders::generate(fast, prompt, options);
///
/// Any graph may be driven by generate if it follows the decoder convention
/// (fx/decoders/llama.h): two inputs (tokens int64 [B, T], input_pos int64
/// [T]), logits out, and caches it updates in place at input_pos.
/// check_decoder says which part of the convention a graph breaks, in one line.

#include <fx/decoders/generate.h>
#include <fx/decoders/llama.h>
#include <fx/graph_module.h>
#include <fx/optimize/optimize_for_inference.h>

#include <memory>
#include <string>
#include <vector>

namespace fx::decoders {

/// What a graph following the decoder convention is, as check_decoder finds it.
struct DecoderSignature {
  /// The batch the graph was captured for (its caches' first dimension).
  int64_t max_batch = 0;
  /// The positions each cache holds.
  int64_t max_seq = 0;
  /// The logits' last dimension (0 when the graph's output carries no tensor_meta).
  int64_t vocab_size = 0;
  /// The qualified names of the cache buffers the graph writes in place, in graph order.
  std::vector<std::string> caches;
};

/// `model`'s forward (without its input checks: decoder_step makes them) as a
/// GraphModule sharing the model's parameters and caches, captured by
/// fx::symbolic_trace on meta tensors for the batch of the model's cache
/// (LlamaCacheOptions::max_batch) with T dynamic.
std::shared_ptr<GraphModule> capture(LlamaForCausalLM& model);

/// Checks that `gm` follows the decoder convention and returns what it is.
/// Throws fx::Error, one line starting "decoder convention: ", naming what
/// is wrong: the number of inputs, no cache written in place at input_pos,
/// caches of different lengths or batches.
DecoderSignature check_decoder(const GraphModule& gm);

/// What optimize_decoder's decoder passes (fx/decoders/passes.h) did.
struct DecoderPassReport {
  /// Groups of sibling weight-only projections made one GEMM (merge_projections: q/k/v and gate/up, two a layer).
  size_t merged_projections = 0;
  /// Nodes CSEPass removed as duplicates of earlier ones (each layer's copy of the causal mask).
  size_t merged_duplicates = 0;
  /// Attentions over the cache made one fxcpp::decoder_attention (fuse_attention).
  size_t fused_attention = 0;
  /// RMSNorms, rotary embeddings and SiLU-gated products made one kernel each.
  size_t fused_rms_norm = 0, fused_rotary = 0, fused_silu_mul = 0;
};

/// A decoder graph made fast: the decoder passes (fx/decoders/passes.h:
/// merge_projections of weight-only layers, CSEPass, fuse_attention,
/// fuse_rms_norm, fuse_rotary_embedding, fuse_silu_mul), then fx::optimize_for_inference, its weights packed for
/// decoding (T = 1) at optimise time. `gm` is not changed; the result still
/// follows the convention and shares `gm`'s caches.
std::shared_ptr<GraphModule> optimize_decoder(const std::shared_ptr<GraphModule>& gm, OptimizeOptions options = {},
                                              OptimizeReport* report = nullptr, DecoderPassReport* passes = nullptr);

/// A DecoderStep running `gm` (checked by check_decoder first). Each call's
/// inputs are checked as LlamaForCausalLM::forward checks them: tokens
/// int64 [B, T] with B the captured batch, input_pos int64 [T], positions
/// within the caches, token ids within the vocabulary; a call that breaks
/// it throws fx::Error naming what is wrong.
DecoderStep decoder_step(std::shared_ptr<GraphModule> gm);

/// Zeroes the caches of a decoder graph (a new sequence).
void reset_cache(GraphModule& gm);

/// generate on a decoder graph: its caches reset first, max_seq its caches'.
GenerateResult generate(const std::shared_ptr<GraphModule>& gm, const std::vector<int64_t>& prompt,
                        GenerateOptions options);

}  // namespace fx::decoders
