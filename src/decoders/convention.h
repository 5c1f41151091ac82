#pragma once
// The decoder convention's check of one call's inputs (fx/decoders/llama.h),
// shared by LlamaForCausalLM::forward and the captured graphs' decoder_step.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace fx::decoders::detail {

/// "Long [2, 3]", or "None".
std::string described(const at::Tensor& t);

/// What a decoder takes.
struct DecoderLimits {
  /// Sequences per call: at most this many, or exactly this many when exact_batch.
  int64_t max_batch = 1;
  bool exact_batch = false;
  /// Positions in the caches.
  int64_t max_seq = 0;
  /// Token ids below it (0: not checked).
  int64_t vocab_size = 0;
};

/// Throws fx::Error "WHERE: ..." naming the first thing wrong with tokens
/// int64 [B, T] and input_pos int64 [T] against `limits`.
void check_decoder_inputs(const char* where, const at::Tensor& tokens, const at::Tensor& input_pos,
                          const DecoderLimits& limits);

}  // namespace fx::decoders::detail
