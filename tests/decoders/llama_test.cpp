// fx::decoders::load_llama and LlamaForCausalLM against Hugging Face's
// LlamaForCausalLM arithmetic (tests/decoders/make_llama_fixture.py writes a
// random checkpoint folder and the reference's logits and greedy tokens).
#include <fx/decoders/llama.h>
#include <fx/safetensors.h>
#include <fx/tensor_file.h>

#include "fx_paths.h"
#include "llama_fixture.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace {

namespace fs = std::filesystem;
using fx::decoders::LlamaForCausalLM;

/// A fixture folder made by make_llama_fixture.py with `flags`.
std::string fixture(const std::string& name, const std::string& flags) { return fx_test::llama_fixture(name, flags); }

struct Expected {
  at::Tensor prompt, logits, generated;
};

Expected expected_of(const std::string& dir) {
  const auto t = fx::load_value(dir + "/expected.pt").toTupleRef().elements();
  return {t[0].toTensor(), t[1].toTensor(), t[2].toTensor()};
}

double relative(const at::Tensor& got, const at::Tensor& want) {
  return (got - want).abs().max().item<double>() / want.abs().max().item<double>();
}

/// Greedy decoding with the cache: the prompt in one forward, then one token per forward.
at::Tensor greedy(LlamaForCausalLM& m, const at::Tensor& prompt, int64_t n) {
  m->reset_cache();
  const int64_t t = prompt.size(1);
  at::Tensor logits = m->forward(prompt, torch::arange(t));
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t next = logits.select(1, -1).argmax(-1).item<int64_t>();
    out.push_back(next);
    logits = m->forward(torch::tensor({{next}}), torch::tensor({t + i}));
  }
  return torch::tensor(out);
}

TEST(Llama, PromptLogitsEqualHuggingFaces) {
  const std::string dir = fixture("f32", "");
  torch::NoGradGuard no_grad;
  auto m = fx::decoders::load_llama(dir, {1, 64});
  const Expected e = expected_of(dir);
  const at::Tensor logits = m->forward(e.prompt, torch::arange(e.prompt.size(1)));
  ASSERT_EQ(logits.sizes(), e.logits.sizes());
  EXPECT_LE(relative(logits, e.logits), 1e-4);
  EXPECT_EQ(m->config().num_key_value_heads, 2);
  EXPECT_EQ(m->config().rope_theta, 500.0);
}

// 24 greedy tokens from the cache equal the reference's, which recomputes the
// whole prefix each step; and at each step the cached forward's logits equal
// a fresh forward over the whole sequence.
TEST(Llama, GenerationWithTheCacheEqualsRecomputingThePrefix) {
  const std::string dir = fixture("f32", "");
  torch::NoGradGuard no_grad;
  auto m = fx::decoders::load_llama(dir, {1, 64});
  const Expected e = expected_of(dir);
  const at::Tensor tokens = greedy(m, e.prompt, e.generated.size(0));
  EXPECT_TRUE(at::equal(tokens, e.generated)) << tokens << e.generated;
  EXPECT_GE(std::get<0>(at::_unique(tokens)).numel(), 6);  // not one token repeated

  auto fresh = fx::decoders::load_llama(dir, {1, 64});
  at::Tensor seq = e.prompt;
  m->reset_cache();
  at::Tensor cached = m->forward(seq, torch::arange(seq.size(1))).select(1, -1);
  for (int64_t i = 0; i < 6; ++i) {
    fresh->reset_cache();
    const at::Tensor full = fresh->forward(seq, torch::arange(seq.size(1))).select(1, -1);
    EXPECT_LE(relative(cached, full), 1e-5) << "step " << i;
    const at::Tensor next = full.argmax(-1, true);
    cached = m->forward(next, torch::tensor({seq.size(1)})).select(1, -1);
    seq = torch::cat({seq, next}, 1);
  }
}

// Tied embeddings, BF16 weights, two shards: the loader's other paths.
TEST(Llama, TiedBf16ShardedCheckpoint) {
  const std::string dir = fixture("bf16_tied_sharded", "--tied --dtype BF16 --shards 2");
  torch::NoGradGuard no_grad;
  auto m = fx::decoders::load_llama(dir, {2, 32});
  EXPECT_TRUE(m->config().tie_word_embeddings);
  EXPECT_EQ(m->lm_head->weight.data_ptr(), m->model->embed_tokens->weight.data_ptr());
  EXPECT_EQ(m->lm_head->weight.scalar_type(), at::kFloat);
  const Expected e = expected_of(dir);
  const at::Tensor logits = m->forward(e.prompt, torch::arange(e.prompt.size(1)));
  EXPECT_LE(relative(logits, e.logits), 1e-4);
  // Two sequences at once: each as alone.
  const at::Tensor two = m->forward(torch::cat({e.prompt, e.prompt.flip(1)}), torch::arange(e.prompt.size(1)));
  EXPECT_LE(relative(two.select(0, 0), e.logits[0]), 1e-4);
}

using fx_test::error_of;

TEST(Llama, ACallBreakingTheConventionIsOneLine) {
  const std::string dir = fixture("f32", "");
  torch::NoGradGuard no_grad;
  auto m = fx::decoders::load_llama(dir, {1, 16});
  const std::string w = "LlamaForCausalLM.forward(tokens, input_pos): ";
  EXPECT_EQ(error_of([&] { m->forward(torch::ones({4}, at::kLong), torch::arange(4)); }),
            w + "tokens must be int64 [B, T], not Long [4]");
  EXPECT_EQ(error_of([&] { m->forward(torch::ones({1, 4}, at::kLong), torch::arange(3)); }),
            w + "input_pos must be int64 [T] with T = 4, not Long [3]");
  EXPECT_EQ(error_of([&] { m->forward(torch::ones({2, 4}, at::kLong), torch::arange(4)); }),
            w + "2 sequences, the cache holds 1 to 1");
  EXPECT_EQ(error_of([&] { m->forward(torch::ones({1, 2}, at::kLong), torch::tensor({15, 16})); }),
            w + "positions 15 to 16 are outside the cache's 0 to 15");
  EXPECT_EQ(error_of([&] { m->forward(torch::tensor({{5, 97}}), torch::arange(2)); }),
            w + "token ids 5 to 97 are outside the vocabulary's 0 to 96");
}

TEST(Llama, ACheckpointDisagreeingWithItsConfigIsOneLine) {
  const std::string good = fixture("f32", "");
  const fs::path dir = fs::path(FX_BINARY_DIR) / "decoders_fixtures" / "bad";
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(fs::path(good) / "config.json", dir / "config.json");
  const fx::SafeTensors w = fx::load_safetensors(good + "/model.safetensors");
  const std::string st = (dir / "model.safetensors").string();
  auto with = [&](const std::string& name, const at::Tensor* replacement, bool add_extra) {
    std::vector<std::pair<std::string, at::Tensor>> t;
    for (const auto& [n, v] : w.tensors)
      if (n != name) t.emplace_back(n, v);
      else if (replacement) t.emplace_back(n, *replacement);
    if (add_extra) t.emplace_back("model.layers.2.mlp.up_proj.weight", torch::zeros({2}));
    fx::save_safetensors(st, t);
    return error_of([&] { fx::decoders::load_llama(dir.string(), {1, 16}); });
  };
  const at::Tensor wrong = torch::zeros({64, 64});
  EXPECT_EQ(with("model.layers.1.self_attn.k_proj.weight", &wrong, false),
            st + ": tensor 'model.layers.1.self_attn.k_proj.weight' has shape [64, 64], config.json gives it [32, 64]");
  EXPECT_EQ(with("model.norm.weight", nullptr, false), st + ": has no tensor 'model.norm.weight' (config.json: [64])");
  EXPECT_EQ(with("", nullptr, true),
            st + ": holds tensor 'model.layers.2.mlp.up_proj.weight', which a LlamaForCausalLM of this config.json has "
                 "no place for");
  const at::Tensor ints = torch::zeros({64}, at::kInt);
  EXPECT_EQ(with("model.norm.weight", &ints, false), st + ": tensor 'model.norm.weight' is Int, not F32, F16 or BF16");
  std::ofstream(dir / "config.json") << R"({"vocab_size": 97, "hidden_size": 64, "intermediate_size": 160,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 3})";
  EXPECT_EQ(with("", nullptr, false),
            (dir / "config.json").string() + ": num_attention_heads 4 is not a multiple of num_key_value_heads 3");
  std::ofstream(dir / "config.json") << R"({"vocab_size": 97, "hidden_size": 64})";
  EXPECT_EQ(with("", nullptr, false), (dir / "config.json").string() + ": has no intermediate_size");
}

}  // namespace
