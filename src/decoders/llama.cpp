// LLaMA-family decoders (include/fx/decoders/llama.h): Hugging Face's
// LlamaForCausalLM as torch::nn modules with gpt-fast's static KV cache.
#include <fx/decoders/llama.h>

#include "decoders/convention.h"

#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/outer.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/silu.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/zeros.h>
#include <torch/types.h>

#include <cmath>
#include <limits>

namespace fx::decoders {

namespace {

/// HF's rotate_half: (x1, x2) -> (-x2, x1) over the last dimension's halves.
at::Tensor rotate_half(const at::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

}  // namespace

void LlamaConfig::check(const std::string& where) const {
  auto positive = [&](int64_t v, const char* name) {
    if (v <= 0) throw Error(where + ": " + name + " must be positive, not " + std::to_string(v));
  };
  positive(vocab_size, "vocab_size");
  positive(hidden_size, "hidden_size");
  positive(intermediate_size, "intermediate_size");
  positive(num_hidden_layers, "num_hidden_layers");
  positive(num_attention_heads, "num_attention_heads");
  positive(num_key_value_heads, "num_key_value_heads");
  positive(max_position_embeddings, "max_position_embeddings");
  if (hidden_size % num_attention_heads != 0)
    throw Error(where + ": hidden_size " + std::to_string(hidden_size) + " is not a multiple of num_attention_heads " +
                std::to_string(num_attention_heads));
  if (head_dim() % 2 != 0) throw Error(where + ": the head dimension " + std::to_string(head_dim()) + " is odd");
  if (num_attention_heads % num_key_value_heads != 0)
    throw Error(where + ": num_attention_heads " + std::to_string(num_attention_heads) +
                " is not a multiple of num_key_value_heads " + std::to_string(num_key_value_heads));
  if (!(rms_norm_eps > 0) || !(rope_theta > 0))
    throw Error(where + ": rms_norm_eps and rope_theta must be positive");
}

LlamaRMSNormImpl::LlamaRMSNormImpl(int64_t hidden_size, double eps_)
    : weight(register_parameter("weight", torch::ones({hidden_size}))), eps(eps_) {}

at::Tensor LlamaRMSNormImpl::forward(const at::Tensor& x) {
  const at::Tensor x32 = x.to(at::kFloat);
  const at::Tensor variance = x32.pow(2).mean(-1, /*keepdim=*/true);
  return weight * (x32 * (variance + eps).rsqrt()).to(x.scalar_type());
}

LlamaAttentionImpl::LlamaAttentionImpl(const LlamaConfig& c, const LlamaCacheOptions& cache)
    : num_heads(c.num_attention_heads), num_kv_heads(c.num_key_value_heads), head_dim(c.head_dim()) {
  using torch::nn::LinearOptions;
  q_proj = register_module("q_proj", torch::nn::Linear(LinearOptions(c.hidden_size, num_heads * head_dim).bias(false)));
  k_proj = register_module("k_proj", torch::nn::Linear(LinearOptions(c.hidden_size, num_kv_heads * head_dim).bias(false)));
  v_proj = register_module("v_proj", torch::nn::Linear(LinearOptions(c.hidden_size, num_kv_heads * head_dim).bias(false)));
  o_proj = register_module("o_proj", torch::nn::Linear(LinearOptions(num_heads * head_dim, c.hidden_size).bias(false)));
  k_cache = register_buffer("k_cache", torch::zeros({cache.max_batch, num_kv_heads, cache.max_seq, head_dim}));
  v_cache = register_buffer("v_cache", torch::zeros({cache.max_batch, num_kv_heads, cache.max_seq, head_dim}));
}

at::Tensor LlamaAttentionImpl::forward(const at::Tensor& x, const at::Tensor& input_pos, const at::Tensor& cos,
                                       const at::Tensor& sin) {
  const int64_t b = x.size(0), t = x.size(1);
  at::Tensor q = q_proj->forward(x).view({b, t, num_heads, head_dim}).transpose(1, 2);
  at::Tensor k = k_proj->forward(x).view({b, t, num_kv_heads, head_dim}).transpose(1, 2);
  at::Tensor v = v_proj->forward(x).view({b, t, num_kv_heads, head_dim}).transpose(1, 2);
  q = q * cos + rotate_half(q) * sin;  // HF's apply_rotary_pos_emb
  k = k * cos + rotate_half(k) * sin;
  // gpt-fast's KVCache.update: k_cache[:, :, input_pos] = k, in place. A
  // full batch writes the buffers themselves (no view), so that a trace
  // records the update on the buffer's get_attr (fx::decoders::capture).
  const bool full = b == k_cache.size(0);
  at::Tensor keys = full ? k_cache : k_cache.narrow(0, 0, b), values = full ? v_cache : v_cache.narrow(0, 0, b);
  keys.index_copy_(2, input_pos, k.to(keys.scalar_type()));
  values.index_copy_(2, input_pos, v.to(values.scalar_type()));
  const int64_t rep = num_heads / num_kv_heads;  // HF's repeat_kv
  if (rep > 1) {
    keys = keys.repeat_interleave(rep, 1);
    values = values.repeat_interleave(rep, 1);
  }
  // A token sees every cached position up to its own.
  const at::Tensor visible =
      at::arange(keys.size(2), input_pos.options()).unsqueeze(0) <= input_pos.unsqueeze(1);  // [T, max_seq]
  at::Tensor scores = at::matmul(q, keys.transpose(2, 3)) / std::sqrt(static_cast<double>(head_dim));
  scores = scores.masked_fill(visible.logical_not(), -std::numeric_limits<float>::infinity());
  const at::Tensor probs = at::softmax(scores, -1, at::kFloat).to(q.scalar_type());
  const at::Tensor out = at::matmul(probs, values).transpose(1, 2).reshape({b, t, num_heads * head_dim});
  return o_proj->forward(out);
}

LlamaMLPImpl::LlamaMLPImpl(const LlamaConfig& c) {
  using torch::nn::LinearOptions;
  gate_proj = register_module("gate_proj", torch::nn::Linear(LinearOptions(c.hidden_size, c.intermediate_size).bias(false)));
  up_proj = register_module("up_proj", torch::nn::Linear(LinearOptions(c.hidden_size, c.intermediate_size).bias(false)));
  down_proj = register_module("down_proj", torch::nn::Linear(LinearOptions(c.intermediate_size, c.hidden_size).bias(false)));
}

at::Tensor LlamaMLPImpl::forward(const at::Tensor& x) {
  return down_proj->forward(at::silu(gate_proj->forward(x)) * up_proj->forward(x));
}

LlamaDecoderLayerImpl::LlamaDecoderLayerImpl(const LlamaConfig& c, const LlamaCacheOptions& cache) {
  self_attn = register_module("self_attn", LlamaAttention(c, cache));
  mlp = register_module("mlp", LlamaMLP(c));
  input_layernorm = register_module("input_layernorm", LlamaRMSNorm(c.hidden_size, c.rms_norm_eps));
  post_attention_layernorm = register_module("post_attention_layernorm", LlamaRMSNorm(c.hidden_size, c.rms_norm_eps));
}

at::Tensor LlamaDecoderLayerImpl::forward(const at::Tensor& x, const at::Tensor& input_pos, const at::Tensor& cos,
                                          const at::Tensor& sin) {
  const at::Tensor h = x + self_attn->forward(input_layernorm->forward(x), input_pos, cos, sin);
  return h + mlp->forward(post_attention_layernorm->forward(h));
}

LlamaModelImpl::LlamaModelImpl(const LlamaConfig& c, const LlamaCacheOptions& cache) {
  embed_tokens = register_module("embed_tokens", torch::nn::Embedding(c.vocab_size, c.hidden_size));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) layers->push_back(LlamaDecoderLayer(c, cache));
  norm = register_module("norm", LlamaRMSNorm(c.hidden_size, c.rms_norm_eps));
  // HF's LlamaRotaryEmbedding: inv_freq = 1 / theta^(2i / d), emb = cat(freqs, freqs).
  const int64_t d = c.head_dim();
  const at::Tensor inv_freq = 1.0 / at::pow(c.rope_theta, at::arange(0, d, 2, at::kLong).to(at::kFloat) / d);
  const at::Tensor freqs = at::outer(at::arange(cache.max_seq, at::kLong).to(at::kFloat), inv_freq);
  const at::Tensor emb = at::cat({freqs, freqs}, -1);
  rope_cos = register_buffer("rope_cos", emb.cos());
  rope_sin = register_buffer("rope_sin", emb.sin());
}

at::Tensor LlamaModelImpl::forward(const at::Tensor& tokens, const at::Tensor& input_pos) {
  const at::Tensor cos = rope_cos.index_select(0, input_pos), sin = rope_sin.index_select(0, input_pos);
  at::Tensor h = embed_tokens->forward(tokens);
  for (const auto& layer : *layers) h = layer->as<LlamaDecoderLayer>()->forward(h, input_pos, cos, sin);
  return norm->forward(h);
}

LlamaForCausalLMImpl::LlamaForCausalLMImpl(LlamaConfig config, LlamaCacheOptions cache)
    : config_(std::move(config)), cache_(cache) {
  if (cache_.max_seq <= 0) cache_.max_seq = config_.max_position_embeddings;
  config_.check("LlamaForCausalLM");
  if (cache_.max_batch <= 0) throw Error("LlamaForCausalLM: max_batch must be positive");
  model = register_module("model", LlamaModel(config_, cache_));
  lm_head = register_module("lm_head", torch::nn::Linear(
                                           torch::nn::LinearOptions(config_.hidden_size, config_.vocab_size).bias(false)));
  if (config_.tie_word_embeddings) {  // one storage, as HF ties them
    torch::NoGradGuard no_grad;
    lm_head->weight.set_data(model->embed_tokens->weight);
  }
}

at::Tensor LlamaForCausalLMImpl::forward(const at::Tensor& tokens, const at::Tensor& input_pos) {
  detail::DecoderLimits limits;
  limits.max_batch = cache_.max_batch;
  limits.max_seq = cache_.max_seq;
  limits.vocab_size = config_.vocab_size;
  detail::check_decoder_inputs("LlamaForCausalLM.forward(tokens, input_pos)", tokens, input_pos, limits);
  return lm_head->forward(model->forward(tokens, input_pos));
}

void LlamaForCausalLMImpl::reset_cache() {
  torch::NoGradGuard no_grad;
  for (const auto& layer : *model->layers) {
    auto attn = layer->as<LlamaDecoderLayer>()->self_attn;
    attn->k_cache.zero_();
    attn->v_cache.zero_();
  }
}

}  // namespace fx::decoders
