#pragma once
/// \file
/// LLaMA-family decoders as plain torch::nn modules (issue 67): the
/// structure and parameter names of Hugging Face's `LlamaForCausalLM`
/// (RMSNorm, rotary embeddings as HF computes them with `rotate_half` and
/// `rope_theta`, grouped-query attention, SiLU-gated MLP, tied or untied
/// `lm_head`), built from a checkpoint folder as users have it
/// (`config.json` and safetensors), with a static KV cache as gpt-fast keeps
/// it, so every shape but the new tokens' count is fixed.
///
/// The decoder convention fxcpp's decoders follow:
///     forward(tokens: int64 [B, T], input_pos: int64 [T]) -> logits [B, T, V]
/// `input_pos` are the positions of the T new tokens; the keys and values of
/// each layer go into its cache buffers (`k_cache`, `v_cache`:
/// [max_batch, num_key_value_heads, max_seq, head_dim]) in place, and a
/// token attends to every cached position up to its own.
///
///     auto model = fx::decoders::load_llama("TinyLlama-1.1B/", {/*max_batch=*/1, /*max_seq=*/256});
///     at::Tensor logits = model->forward(prompt, torch::arange(prompt.size(1)));

#include <fx/error.h>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include <memory>
#include <string>

namespace fx::decoders {

/// The fields of a Hugging Face LlamaConfig fxcpp reads (config.json).
struct LlamaConfig {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  /// Grouped-query attention: key / value heads (config.json's default: num_attention_heads).
  int64_t num_key_value_heads = 0;
  int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  bool tie_word_embeddings = false;

  int64_t head_dim() const { return hidden_size / num_attention_heads; }
  /// Checks the fields' values and relations (heads divide the hidden size, key / value heads divide the heads);
  /// throws fx::Error "WHERE: ..." naming the field.
  void check(const std::string& where) const;
  /// Reads `path` (a config.json): the fields above; a missing required one,
  /// a wrong type, or a value check() refuses is one fx::ImportError line.
  static LlamaConfig from_json_file(const std::string& path);
};

/// The cache sizes a loaded decoder keeps.
struct LlamaCacheOptions {
  /// Sequences per forward, at most.
  int64_t max_batch = 1;
  /// Positions per sequence, at most (0: max_position_embeddings).
  int64_t max_seq = 0;
};

/// Root-mean-square normalisation as HF computes it: in float32, then the input's dtype, times `weight`.
class LlamaRMSNormImpl : public torch::nn::Module {
 public:
  LlamaRMSNormImpl(int64_t hidden_size, double eps);
  at::Tensor forward(const at::Tensor& x);
  at::Tensor weight;
  double eps;
};
TORCH_MODULE(LlamaRMSNorm);

/// Self-attention with rotary embeddings, grouped-query heads and the static KV cache.
class LlamaAttentionImpl : public torch::nn::Module {
 public:
  LlamaAttentionImpl(const LlamaConfig& config, const LlamaCacheOptions& cache);
  /// x [B, T, hidden]; cos / sin [T, head_dim] of the positions `input_pos` [T].
  at::Tensor forward(const at::Tensor& x, const at::Tensor& input_pos, const at::Tensor& cos, const at::Tensor& sin);
  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
  at::Tensor k_cache, v_cache;
  int64_t num_heads, num_kv_heads, head_dim;
};
TORCH_MODULE(LlamaAttention);

/// down_proj(silu(gate_proj(x)) * up_proj(x)).
class LlamaMLPImpl : public torch::nn::Module {
 public:
  explicit LlamaMLPImpl(const LlamaConfig& config);
  at::Tensor forward(const at::Tensor& x);
  torch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
};
TORCH_MODULE(LlamaMLP);

/// One pre-norm block: x + attention(norm(x)), then h + mlp(norm(h)).
class LlamaDecoderLayerImpl : public torch::nn::Module {
 public:
  LlamaDecoderLayerImpl(const LlamaConfig& config, const LlamaCacheOptions& cache);
  at::Tensor forward(const at::Tensor& x, const at::Tensor& input_pos, const at::Tensor& cos, const at::Tensor& sin);
  LlamaAttention self_attn{nullptr};
  LlamaMLP mlp{nullptr};
  LlamaRMSNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
};
TORCH_MODULE(LlamaDecoderLayer);

/// HF's LlamaModel: embed_tokens, layers, norm; the rotary tables as buffers.
class LlamaModelImpl : public torch::nn::Module {
 public:
  LlamaModelImpl(const LlamaConfig& config, const LlamaCacheOptions& cache);
  at::Tensor forward(const at::Tensor& tokens, const at::Tensor& input_pos);
  torch::nn::Embedding embed_tokens{nullptr};
  torch::nn::ModuleList layers{nullptr};
  LlamaRMSNorm norm{nullptr};
  /// cos / sin of every cached position [max_seq, head_dim] (HF's LlamaRotaryEmbedding).
  at::Tensor rope_cos, rope_sin;
};
TORCH_MODULE(LlamaModel);

/// HF's LlamaForCausalLM: the model and lm_head (sharing embed_tokens' weight when tied).
class LlamaForCausalLMImpl : public torch::nn::Module {
 public:
  LlamaForCausalLMImpl(LlamaConfig config, LlamaCacheOptions cache = {});
  /// The decoder convention: tokens int64 [B, T], input_pos int64 [T] ->
  /// logits [B, T, vocab_size]. A call that breaks it (dtypes, ranks, B over
  /// max_batch, a position past max_seq) throws fx::Error naming what is wrong.
  at::Tensor forward(const at::Tensor& tokens, const at::Tensor& input_pos);
  /// Zeroes every layer's cache (a new sequence).
  void reset_cache();
  const LlamaConfig& config() const { return config_; }
  const LlamaCacheOptions& cache_options() const { return cache_; }
  LlamaModel model{nullptr};
  torch::nn::Linear lm_head{nullptr};

 private:
  LlamaConfig config_;
  LlamaCacheOptions cache_;
};
TORCH_MODULE(LlamaForCausalLM);

/// A LlamaForCausalLM from a checkpoint folder: config.json, and
/// model.safetensors or model.safetensors.index.json with its shards
/// (fx::load_safetensors_folder). Every parameter must be in the checkpoint
/// with the shape config.json gives it (lm_head.weight may be absent when
/// tie_word_embeddings); no tensor may be left over (HF's
/// rotary_emb.inv_freq buffers excepted); F16 and BF16 weights become
/// float32. Each problem is one fx::ImportError line naming the file and
/// the tensor.
LlamaForCausalLM load_llama(const std::string& folder, LlamaCacheOptions cache = {});

}  // namespace fx::decoders
