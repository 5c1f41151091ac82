#pragma once
/// \file
/// fx::decoders::generate: autoregressive decoding of any module that
/// follows the decoder convention (fx/decoders/llama.h): the prompt in one
/// forward (prefill), then one token per forward, each reading the module's
/// KV cache; greedy or sampled (temperature, top-k, top-p, repetition
/// penalty, a seed), stop ids, a token budget, and a callback per token.
/// One sequence at a time (batch 1).

#include <fx/decoders/llama.h>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace fx::decoders {

/// How generate chooses and stops.
struct GenerateOptions {
  /// New tokens at most.
  int64_t max_new_tokens = 32;
  /// 0: greedy (the most likely token); else the logits are divided by it and sampled.
  double temperature = 0.0;
  /// Sampling keeps the k most likely tokens (0: all).
  int64_t top_k = 0;
  /// Sampling keeps the smallest set of most likely tokens whose probability reaches p (1: all).
  double top_p = 1.0;
  /// Hugging Face's: the logit of every token already in the sequence (prompt
  /// included) is divided by it when positive, multiplied when negative (1: off).
  double repetition_penalty = 1.0;
  /// The sampling generator's seed (the same seed, the same tokens).
  uint64_t seed = 0;
  /// Generation stops after any of these tokens (it is returned).
  std::vector<int64_t> stop_ids;
  /// Called with each new token as it is chosen; returning false stops.
  std::function<bool(int64_t token)> on_token;
  /// The most positions the module takes (prompt and new tokens; 0: not checked).
  int64_t max_seq = 0;
};

/// What generate did.
struct GenerateResult {
  /// The new tokens (the prompt not included).
  std::vector<int64_t> tokens;
  /// Whether a stop id ended it.
  bool stopped = false;
  /// Seconds of the prefill forward and of the decode forwards.
  double prefill_seconds = 0, decode_seconds = 0;
};

/// One forward of a decoder: tokens int64 [1, T], input_pos int64 [T] -> logits [1, T, V].
using DecoderStep = std::function<at::Tensor(const at::Tensor& tokens, const at::Tensor& input_pos)>;

/// The probabilities generate draws the next token from, given the last
/// position's logits [V] and the sequence so far: repetition penalty, then
/// temperature, top-k and top-p. With temperature 0, one-hot on the most
/// likely token (after the penalty).
at::Tensor next_token_probabilities(const at::Tensor& logits, const std::vector<int64_t>& sequence,
                                    const GenerateOptions& options);

/// Generates from `prompt` (token ids) with `step`, whose cache must be
/// empty or hold nothing the prompt's positions do not overwrite. Throws
/// fx::Error for an empty prompt, options out of range, or a prompt and
/// budget longer than max_seq (one line naming the numbers).
GenerateResult generate(const DecoderStep& step, const std::vector<int64_t>& prompt, const GenerateOptions& options);

/// generate on a LlamaForCausalLM: its cache reset first, max_seq its cache's.
GenerateResult generate(LlamaForCausalLM& model, const std::vector<int64_t>& prompt, GenerateOptions options);

}  // namespace fx::decoders
