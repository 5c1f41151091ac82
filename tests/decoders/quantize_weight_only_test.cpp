// fx::quantize_weight_only on the captured LLaMA fixture: every linear
// layer becomes one fxcpp::linear_weight_only node (the pass proven where
// it fires), the logits stay near float32's, teacher-forced top-1 agrees,
// generation runs plain and optimised, and the quantized graph saves and
// loads as an ordinary .fx file computing the same logits.
#include <fx/decoders/capture.h>
#include <fx/decoders/quantize_weight_only.h>
#include <fx/graph.h>
#include <fx/serialize.h>
#include <fx/tensor_file.h>

#include "llama_fixture.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>

namespace quantize_weight_only_test {

struct Fixture {
  fx::decoders::LlamaForCausalLM model;
  at::Tensor prompt;
};

Fixture load() {
  const std::string dir = fx_test::llama_fixture("f32", "");
  const auto t = fx::load_value(dir + "/expected.pt").toTupleRef().elements();
  return {fx::decoders::load_llama(dir, {1, 64}), t[0].toTensor()};
}

size_t count(const fx::Graph& g, fx::Opcode op, const std::string& target) {
  size_t n = 0;
  for (const fx::Node* node : g.nodes()) n += node->op() == op && node->target() == target;
  return n;
}

size_t count_modules(const fx::Graph& g) {
  size_t n = 0;
  for (const fx::Node* node : g.nodes()) n += node->op() == fx::Opcode::CallModule;
  return n;
}

/// Logits of a teacher-forced sequence of 48 tokens (the prompt, then ids drawn from a seeded generator).
at::Tensor teacher_forced(const std::shared_ptr<fx::GraphModule>& gm, const at::Tensor& prompt, int64_t vocab) {
  fx::decoders::reset_cache(*gm);
  at::NoGradGuard no_grad;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  const at::Tensor rest = at::randint(vocab, {1, 48 - prompt.size(1)}, gen);
  const at::Tensor tokens = at::cat({prompt, rest}, 1);
  return gm->forward({tokens, torch::arange(48)}).toTensor()[0];
}

TEST(QuantizeWeightOnly, EveryLinearBecomesOneNodeAndLogitsStayNearFloat) {
  Fixture f = load();
  auto gm = fx::decoders::capture(f.model);
  const int64_t layers = f.model->config().num_hidden_layers, vocab = f.model->config().vocab_size;
  const size_t linears = static_cast<size_t>(7 * layers + 1);
  ASSERT_EQ(count_modules(gm->graph()), linears + 1);  // and embed_tokens
  const at::Tensor reference = teacher_forced(gm, f.prompt, vocab);
  const double scale = reference.abs().max().item<double>();
  struct Case {
    fx::decoders::WeightOnlyScheme scheme;
    double min_top1;  ///< agreement of the most likely token with float32's
  };
  // int8 steps are 1/127 of a row's (or group's) largest weight, int4's 1/7 or 1/15.
  for (const Case& c : {Case{{8, 0, true}, 0.95}, Case{{8, 32, true}, 0.95}, Case{{4, 32, true}, 0.65},
                        Case{{4, 32, false}, 0.65}}) {
    SCOPED_TRACE(c10::str("bits ", c.scheme.bits, " group ", c.scheme.group_size, " symmetric ", c.scheme.symmetric));
    // The same model in float32 with the weights the quantized layers hold: the
    // graph differs from it by the activations' rounding to int8 alone.
    Fixture dq = load();
    {
      at::NoGradGuard no_grad;
      for (auto& p : dq.model->named_parameters())
        if (p.key() != "model.embed_tokens.weight" && p.value().dim() == 2)
          p.value().copy_(fx::decoders::dequantize_weight_only(fx::decoders::pack_weight_only(p.value(), c.scheme)));
    }
    const at::Tensor dequantized = teacher_forced(fx::decoders::capture(dq.model), f.prompt, vocab);
    fx::WeightOnlyOptions o;
    o.scheme = c.scheme;
    fx::WeightOnlyReport r;
    auto q = fx::quantize_weight_only(gm, o, &r);
    EXPECT_EQ(r.layers, linears);
    // The float weights lie in the checkpoint's mapping: their pages went back once packed.
    EXPECT_GT(r.bytes_released, 0);
    EXPECT_EQ(count(q->graph(), fx::Opcode::CallFunction, "fxcpp::linear_weight_only"), linears);
    EXPECT_EQ(count_modules(q->graph()), 1u);  // embed_tokens alone
    EXPECT_EQ(r.kernel, fx::decoders::weight_only_kernel(c.scheme.bits));
    EXPECT_LT(r.bytes_after * (c.scheme.bits == 8 ? 3 : 5), r.bytes_before);
    // The layer keeps its node name; the input module is unchanged.
    bool named = false;
    for (const fx::Node* n : q->graph().nodes())
      named |= n->name() == "model_layers_0_self_attn_q_proj" && n->target() == "fxcpp::linear_weight_only";
    EXPECT_TRUE(named);
    EXPECT_EQ(count(gm->graph(), fx::Opcode::CallFunction, "fxcpp::linear_weight_only"), 0u);
    const at::Tensor logits = teacher_forced(q, f.prompt, vocab);
    EXPECT_LT((logits - dequantized).abs().max().item<double>(), 0.02 * scale);
    const double top1 = logits.argmax(-1).eq(reference.argmax(-1)).to(at::kDouble).mean().item<double>();
    EXPECT_GE(top1, c.min_top1);
  }
}

TEST(QuantizeWeightOnly, OptimisedGenerationAndAnFxFileComputeTheSame) {
  Fixture f = load();
  fx::WeightOnlyOptions o;
  o.scheme = {4, 32, true};
  auto q = fx::quantize_weight_only(fx::decoders::capture(f.model), o);
  fx::OptimizeReport report;
  fx::decoders::DecoderPassReport passes;
  auto fast = fx::decoders::optimize_decoder(q, {}, &report, &passes);
  // q / k / v and gate / up merged (merge_projections): 4 GEMMs a layer, and the head.
  const int64_t layers = f.model->config().num_hidden_layers;
  EXPECT_EQ(passes.merged_projections, static_cast<size_t>(2 * layers));
  EXPECT_EQ(count(fast->graph(), fx::Opcode::CallFunction, "fxcpp::linear_weight_only"),
            static_cast<size_t>(4 * layers + 1));
  fx::decoders::GenerateOptions g;
  g.max_new_tokens = 16;
  const auto plain = fx::decoders::generate(q, std::vector<int64_t>{3, 1, 4, 1, 5}, g).tokens;
  EXPECT_EQ(fx::decoders::generate(fast, std::vector<int64_t>{3, 1, 4, 1, 5}, g).tokens, plain);
  // An ordinary .fx file.
  const std::string path = (std::filesystem::path(::testing::TempDir()) / "int4_decoder.fx").string();
  fx::save(*q, path);
  auto loaded = fx::load(path);
  const auto s = fx::decoders::check_decoder(*loaded);
  EXPECT_EQ(s.caches.size(), static_cast<size_t>(2 * f.model->config().num_hidden_layers));
  EXPECT_EQ(fx::decoders::generate(loaded, std::vector<int64_t>{3, 1, 4, 1, 5}, g).tokens, plain);
  const int64_t vocab = f.model->config().vocab_size;
  EXPECT_TRUE(at::equal(teacher_forced(loaded, f.prompt, vocab), teacher_forced(q, f.prompt, vocab)));
}

TEST(QuantizeWeightOnly, ChoosingLayersAndBadSchemes) {
  Fixture f = load();
  auto gm = fx::decoders::capture(f.model);
  fx::WeightOnlyOptions o;
  o.skip = {"lm_head"};
  o.names = {"model.layers.1"};
  fx::WeightOnlyReport r;
  auto q = fx::quantize_weight_only(gm, o, &r);
  EXPECT_EQ(r.layers, 7u);
  EXPECT_EQ(r.left.size(), 8u);
  EXPECT_EQ(r.left.back(), "lm_head: not chosen");
  o = {};
  o.scheme.bits = 3;
  EXPECT_EQ(fx_test::error_of([&] { fx::quantize_weight_only(gm, o); }),
            "quantize_weight_only: bits must be 8 or 4, not 3");
  o.scheme = {4, 64, true};  // down_proj's in_features 160 is no multiple of 64
  EXPECT_EQ(fx_test::error_of([&] { fx::quantize_weight_only(gm, o); }),
            "quantize_weight_only: layer model.layers.0.mlp.down_proj: pack_weight_only: group_size 64 does not "
            "divide in_features 160");
  EXPECT_EQ(count(gm->graph(), fx::Opcode::CallFunction, "fxcpp::linear_weight_only"), 0u);
}

}  // namespace quantize_weight_only_test
