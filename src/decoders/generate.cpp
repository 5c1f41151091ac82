// fx::decoders::generate (include/fx/decoders/generate.h): prefill, then one
// token per forward; Hugging Face's logits processors for sampling.
#include <fx/decoders/generate.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/multinomial.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/topk.h>
#include <torch/types.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <set>

namespace fx::decoders {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void check_options(const GenerateOptions& o, size_t prompt_size) {
  const std::string where = "generate: ";
  if (prompt_size == 0) throw Error(where + "the prompt is empty");
  if (o.max_new_tokens < 1) throw Error(where + "max_new_tokens must be at least 1, not " + std::to_string(o.max_new_tokens));
  if (o.temperature < 0) throw Error(where + "temperature must be 0 (greedy) or positive, not " + std::to_string(o.temperature));
  if (o.top_k < 0) throw Error(where + "top_k must be 0 (off) or positive, not " + std::to_string(o.top_k));
  if (!(o.top_p > 0 && o.top_p <= 1)) throw Error(where + "top_p must be in (0, 1], not " + std::to_string(o.top_p));
  if (!(o.repetition_penalty > 0))
    throw Error(where + "repetition_penalty must be positive, not " + std::to_string(o.repetition_penalty));
  const int64_t needed = static_cast<int64_t>(prompt_size) + o.max_new_tokens - 1;  // the last token is not fed back
  if (o.max_seq > 0 && needed > o.max_seq)
    throw Error(where + "a prompt of " + std::to_string(prompt_size) + " tokens and " +
                std::to_string(o.max_new_tokens) + " new ones need " + std::to_string(needed) +
                " positions, the decoder has " + std::to_string(o.max_seq));
}

}  // namespace

at::Tensor next_token_probabilities(const at::Tensor& logits_in, const std::vector<int64_t>& sequence,
                                    const GenerateOptions& o) {
  at::Tensor logits = logits_in.to(at::kFloat).flatten().clone();
  const int64_t vocab = logits.size(0);
  if (o.repetition_penalty != 1.0) {  // HF's RepetitionPenaltyLogitsProcessor
    float* l = logits.data_ptr<float>();
    for (int64_t id : std::set<int64_t>(sequence.begin(), sequence.end()))
      if (id >= 0 && id < vocab)
        l[id] = l[id] < 0 ? static_cast<float>(l[id] * o.repetition_penalty)
                          : static_cast<float>(l[id] / o.repetition_penalty);
  }
  if (o.temperature == 0.0) {  // greedy: the first most likely token, as argmax picks it
    at::Tensor one_hot = torch::zeros({vocab});
    one_hot[logits.argmax().item<int64_t>()] = 1.0;
    return one_hot;
  }
  logits = logits / o.temperature;
  const float minus_inf = -std::numeric_limits<float>::infinity();
  if (o.top_k > 0 && o.top_k < vocab) {  // HF's TopKLogitsWarper
    const float kth = std::get<0>(at::topk(logits, o.top_k)).min().item<float>();
    logits = logits.masked_fill(logits < kth, minus_inf);
  }
  if (o.top_p < 1.0) {  // HF's TopPLogitsWarper: drop the least likely while their total stays <= 1 - p
    auto [sorted, order] = at::sort(logits, /*dim=*/0, /*descending=*/false);
    const at::Tensor cumulative = at::softmax(sorted, 0).cumsum(0);
    at::Tensor remove = cumulative <= (1.0 - o.top_p);
    remove[vocab - 1] = false;  // the most likely stays
    logits = logits.index_put({order.masked_select(remove)}, torch::tensor(minus_inf));
  }
  return at::softmax(logits, 0);
}

GenerateResult generate(const DecoderStep& step, const std::vector<int64_t>& prompt, const GenerateOptions& o) {
  check_options(o, prompt.size());
  torch::NoGradGuard no_grad;
  at::Generator gen = at::detail::createCPUGenerator(o.seed);
  std::vector<int64_t> sequence = prompt;
  GenerateResult result;
  auto choose = [&](const at::Tensor& logits) {
    const at::Tensor probs = next_token_probabilities(logits.select(1, -1).select(0, 0), sequence, o);
    return o.temperature == 0.0 ? probs.argmax().item<int64_t>()
                                : at::multinomial(probs, 1, /*replacement=*/false, gen).item<int64_t>();
  };
  const int64_t p = static_cast<int64_t>(prompt.size());
  auto t0 = std::chrono::steady_clock::now();
  at::Tensor logits = step(torch::tensor(prompt, at::kLong).view({1, p}), at::arange(p, at::kLong));
  result.prefill_seconds = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < o.max_new_tokens; ++i) {
    const int64_t next = choose(logits);
    result.tokens.push_back(next);
    sequence.push_back(next);
    const bool go_on = !o.on_token || o.on_token(next);
    if (std::find(o.stop_ids.begin(), o.stop_ids.end(), next) != o.stop_ids.end()) {
      result.stopped = true;
      break;
    }
    if (!go_on || i + 1 == o.max_new_tokens) break;
    logits = step(torch::tensor({next}, at::kLong).view({1, 1}), torch::tensor({p + i}, at::kLong));
  }
  result.decode_seconds = seconds_since(t0);
  return result;
}

GenerateResult generate(LlamaForCausalLM& model, const std::vector<int64_t>& prompt, GenerateOptions options) {
  if (options.max_seq <= 0 || options.max_seq > model->cache_options().max_seq)
    options.max_seq = model->cache_options().max_seq;
  model->reset_cache();
  return generate([&model](const at::Tensor& t, const at::Tensor& pos) { return model->forward(t, pos); }, prompt,
                  options);
}

}  // namespace fx::decoders
