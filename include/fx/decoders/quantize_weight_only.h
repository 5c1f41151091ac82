#pragma once
/// \file
/// fx::quantize_weight_only (issue 67): the linear layers of a graph with
/// int8 or int4 weights, float activations (gpt-fast's `quantize.py`
/// WeightOnlyInt8QuantHandler / WeightOnlyInt4QuantHandler, llama.cpp's
/// Q8_0 / Q4_0): decoding one token reads every weight once, so a quarter or
/// an eighth of the bytes is that much less time at the memory-bandwidth limit.
///
/// Each chosen layer becomes one node
///
///     q_proj = fxcpp.linear_weight_only(x, self._weight_only.q_proj.data, self._weight_only.q_proj.scales,
///                                       None, 4, 32, 2048)
///
/// of the operator fx/decoders/weight_only.h registers, on the packed
/// weight's tensors (new attributes under `_weight_only.`, named after the
/// layer; the input module's layers are left as they are). The node keeps
/// the layer's name. The result runs, prints, and saves with fx::save as any
/// graph (the packed tensors are ordinary attributes), so a quantized
/// decoder is an ordinary `.fx` file; optimize_decoder lowers what is left
/// (attention's matmuls) after it.
///
/// Layers: call_module nodes of a Linear, and aten::linear whose weight (and
/// bias) are get_attr nodes. Embedding tables (call_module of an Embedding
/// without max_norm, aten::embedding of a get_attr weight) are packed the
/// same way, a row per token, and looked up by fxcpp::embedding_weight_only
/// (llama.cpp's quantized token_embd): a table that is a quantized layer's
/// weight (a tied lm_head) reads that layer's packed tensors. The kernel is chosen once per process from the
/// CPU's features (weight_only_kernel) and named in the report; the packed
/// layout does not depend on it, so a file quantized on one CPU runs on any.

#include <fx/decoders/weight_only.h>
#include <fx/graph_module.h>

#include <memory>
#include <string>
#include <vector>

namespace fx {

/// What quantize_weight_only quantizes, and how.
struct WeightOnlyOptions {
  /// Bits, group size, symmetric or not (decoders::WeightOnlyScheme).
  decoders::WeightOnlyScheme scheme;
  /// When not empty, only these layers: a module's qualified name, a prefix
  /// of it ("model.layers.0" takes every layer below it), or a node's name.
  std::vector<std::string> names;
  /// Never these (same matching; wins over `names`).
  std::vector<std::string> skip;
  /// Embedding tables too (off: they stay float, as gpt-fast's quantize.py leaves them).
  bool embeddings = true;
};

/// What quantize_weight_only did.
struct WeightOnlyReport {
  /// Linear layers quantized.
  size_t layers = 0;
  /// Embedding tables quantized (one reading a tied layer's packed tensors included).
  size_t embeddings = 0;
  /// Bytes of their weights before (as stored) and after (integers, scales, zero points; a tied table's
  /// count once).
  int64_t bytes_before = 0, bytes_after = 0;
  /// Bytes of float weights handed back to the system after packing (release_mapped_pages: weights
  /// in a safetensors file's mapping; without it a checkpoint's every page stayed resident).
  int64_t bytes_released = 0;
  /// The kernel the layers run on this CPU ("avx512-vnni", "avx2", "scalar").
  std::string kernel;
  /// Linear layers left as they were, each with why ("lm_head: skipped").
  std::vector<std::string> left;
};

/// A new GraphModule whose chosen linear layers compute with weight-only
/// quantized weights (see the file comment); `gm` is not changed. Throws
/// fx::Error for a bad scheme (one line naming the value), or for a layer
/// whose in_features the group size does not divide (naming the layer).
std::shared_ptr<GraphModule> quantize_weight_only(const std::shared_ptr<GraphModule>& gm,
                                                  const WeightOnlyOptions& options = {},
                                                  WeightOnlyReport* report = nullptr);

}  // namespace fx
