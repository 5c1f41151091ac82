// The decoder convention's check of one call's inputs (src/decoders/convention.h).
#include "decoders/convention.h"

#include <fx/error.h>

#include <ATen/ops/aminmax.h>

#include <sstream>

namespace fx::decoders::detail {

std::string described(const at::Tensor& t) {
  return t.defined() ? c10::str(t.scalar_type(), " ", t.sizes()) : "None";
}

void check_decoder_inputs(const char* where, const at::Tensor& tokens, const at::Tensor& input_pos,
                          const DecoderLimits& limits) {
  std::ostringstream os;
  if (!tokens.defined() || tokens.dim() != 2 || tokens.scalar_type() != at::kLong)
    os << where << ": tokens must be int64 [B, T], not " << described(tokens);
  else if (!input_pos.defined() || input_pos.dim() != 1 || input_pos.scalar_type() != at::kLong ||
           input_pos.size(0) != tokens.size(1))
    os << where << ": input_pos must be int64 [T] with T = " << tokens.size(1) << ", not " << described(input_pos);
  else if (limits.exact_batch && tokens.size(0) != limits.max_batch)
    os << where << ": " << tokens.size(0) << " sequences, the graph was captured for " << limits.max_batch;
  else if (tokens.size(0) > limits.max_batch || tokens.size(0) == 0)
    os << where << ": " << tokens.size(0) << " sequences, the cache holds 1 to " << limits.max_batch;
  if (!os.str().empty()) throw Error(os.str());
  if (tokens.numel() == 0) return;
  // One pass each for the smallest and the largest: this runs once per decoded token.
  const auto [pos_lo, pos_hi] = at::aminmax(input_pos);
  const int64_t pmin = pos_lo.item<int64_t>(), pmax = pos_hi.item<int64_t>();
  const auto [tok_lo, tok_hi] = at::aminmax(tokens);
  const int64_t tmin = tok_lo.item<int64_t>(), tmax = tok_hi.item<int64_t>();
  if (pmin < 0 || pmax >= limits.max_seq)
    os << where << ": positions " << pmin << " to " << pmax << " are outside the cache's 0 to " << limits.max_seq - 1;
  else if (tmin < 0 || (limits.vocab_size > 0 && tmax >= limits.vocab_size))
    os << where << ": token ids " << tmin << " to " << tmax << " are outside the vocabulary's 0 to "
       << limits.vocab_size - 1;
  if (!os.str().empty()) throw Error(os.str());
}

}  // namespace fx::decoders::detail
