// fx::quantize_weight_only on the captured LLaMA fixture: every linear
// layer becomes one fxcpp::linear_weight_only node and the token table one
// fxcpp::embedding_weight_only node (the pass proven where it fires; a
// tied table reads the head's packed tensors), the logits stay near float32's, teacher-forced top-1 agrees,
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
#include <limits>

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
        if (p.value().dim() == 2)  // the token table's rows too
          p.value().copy_(fx::decoders::dequantize_weight_only(fx::decoders::pack_weight_only(p.value(), c.scheme)));
    }
    const at::Tensor dequantized = teacher_forced(fx::decoders::capture(dq.model), f.prompt, vocab);
    fx::WeightOnlyOptions o;
    o.scheme = c.scheme;
    fx::WeightOnlyReport r;
    auto q = fx::quantize_weight_only(gm, o, &r);
    EXPECT_EQ(r.layers, linears);
    EXPECT_EQ(r.embeddings, 1u);
    // The float weights lie in the checkpoint's mapping: their pages went back once packed.
    EXPECT_GT(r.bytes_released, 0);
    EXPECT_EQ(count(q->graph(), fx::Opcode::CallFunction, "fxcpp::linear_weight_only"), linears);
    EXPECT_EQ(count(q->graph(), fx::Opcode::CallFunction, "fxcpp::embedding_weight_only"), 1u);
    EXPECT_EQ(count_modules(q->graph()), 0u);  // embed_tokens is packed too
    for (const auto& p : q->named_parameters()) EXPECT_EQ(p.value().dim(), 1) << p.key();  // the norms' alone    EXPECT_EQ(r.kernel, fx::decoders::weight_only_kernel(c.scheme.bits));
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
  // Siblings were packed side by side: the merged q / k / v and gate / up are views of the members' buffer.
  const auto data_of = [](const fx::GraphModule& m, const std::string& layer) {
    return m.fetch_attr("_weight_only.model.layers.0." + layer + ".data").data_ptr();
  };
  EXPECT_EQ(data_of(*fast, "self_attn.q_proj_k_proj_v_proj"), data_of(*q, "self_attn.q_proj"));
  EXPECT_EQ(data_of(*fast, "mlp.up_proj_gate_proj"), data_of(*q, "mlp.up_proj"));
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
  // The file keeps them one storage: merged after loading, still no copy.
  auto loaded_fast = fx::decoders::optimize_decoder(loaded);
  EXPECT_EQ(data_of(*loaded_fast, "self_attn.q_proj_k_proj_v_proj"), data_of(*loaded, "self_attn.q_proj"));
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
  EXPECT_EQ(r.embeddings, 0u);
  ASSERT_EQ(r.left.size(), 9u);
  EXPECT_EQ(r.left[7], "lm_head: not chosen");
  EXPECT_EQ(r.left[8], "model.embed_tokens: not chosen");
  EXPECT_EQ(count(q->graph(), fx::Opcode::CallModule, "model.embed_tokens"), 1u);
  o.names = {"model.embed_tokens"};
  o.embeddings = false;  // wins over names
  EXPECT_EQ(count(fx::quantize_weight_only(gm, o)->graph(), fx::Opcode::CallModule, "model.embed_tokens"), 1u);
  o.embeddings = true;
  q = fx::quantize_weight_only(gm, o, &r);
  EXPECT_EQ(r.layers, 0u);
  EXPECT_EQ(r.embeddings, 1u);
  EXPECT_EQ(count(q->graph(), fx::Opcode::CallFunction, "fxcpp::embedding_weight_only"), 1u);
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

// A weight past 8 MB of float32 is packed a block of rows at a time (each block's mapped pages released
// before the next is read): the same bytes as packing it whole, and a bad row named by its own index.
TEST(QuantizeWeightOnly, LargeWeightsArePackedABlockAtATime) {
  at::manual_seed(4);
  const int64_t rows = 40000, k = 64;  // blocks of 32768 rows
  auto root = std::make_shared<torch::nn::Module>();
  auto head = std::make_shared<torch::nn::Module>();
  head->register_parameter("weight", at::randn({rows, k}), false);
  root->register_module("head", head);
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  g->output(g->call_function("aten::linear", {x, g->get_attr("head.weight")}));
  auto gm = std::make_shared<fx::GraphModule>(root, g);
  for (const fx::decoders::WeightOnlyScheme scheme :
       {fx::decoders::WeightOnlyScheme{8, 0, true}, fx::decoders::WeightOnlyScheme{4, 32, false}}) {
    fx::WeightOnlyOptions o;
    o.scheme = scheme;
    auto q = fx::quantize_weight_only(gm, o);
    const auto whole = fx::decoders::pack_weight_only(gm->fetch_attr("head.weight"), scheme);
    EXPECT_TRUE(at::equal(q->fetch_attr("_weight_only.head.data"), whole.data));
    EXPECT_TRUE(at::equal(q->fetch_attr("_weight_only.head.scales"), whole.scales));
    if (!scheme.symmetric) {
      EXPECT_TRUE(at::equal(q->fetch_attr("_weight_only.head.zeros"), whole.zeros));
    }
  }
  {
    at::NoGradGuard no_grad;
    gm->fetch_attr("head.weight")[33000][5] = std::numeric_limits<float>::infinity();
  }
  EXPECT_EQ(fx_test::error_of([&] { fx::quantize_weight_only(gm); }),
            "quantize_weight_only: layer head: pack_weight_only: weight's row 33000 has a non-finite value");
}

TEST(QuantizeWeightOnly, EmbeddingRowsAreExactlyTheDequantizedTable) {
  at::manual_seed(2);
  const at::Tensor table = at::randn({50, 64});
  for (const fx::decoders::WeightOnlyScheme scheme :
       {fx::decoders::WeightOnlyScheme{8, 0, true}, fx::decoders::WeightOnlyScheme{8, 32, false},
        fx::decoders::WeightOnlyScheme{4, 32, true}, fx::decoders::WeightOnlyScheme{4, 64, false}}) {
    SCOPED_TRACE(c10::str("bits ", scheme.bits, " group ", scheme.group_size, " symmetric ", scheme.symmetric));
    const auto packed = fx::decoders::pack_weight_only(table, scheme);
    const at::Tensor ids = at::tensor({3, 49, 0, 3, 17, 8}, at::kLong).reshape({2, 3});
    const at::Tensor rows = fx::decoders::embedding_weight_only(ids, packed);
    EXPECT_EQ(rows.sizes(), (std::vector<int64_t>{2, 3, 64}));
    EXPECT_TRUE(at::equal(rows, fx::decoders::dequantize_weight_only(packed).index_select(0, ids.flatten()).reshape(
                                    {2, 3, 64})));
    EXPECT_TRUE(at::equal(fx::decoders::embedding_weight_only(ids.to(at::kInt), packed), rows));
    const at::Tensor meta = fx::decoders::embedding_weight_only(ids.to(at::kMeta), packed);
    EXPECT_TRUE(meta.is_meta());
    EXPECT_EQ(meta.sizes(), rows.sizes());
  }
  const auto packed = fx::decoders::pack_weight_only(table, {4, 32, true});
  const auto error_of = [&](const at::Tensor& ids) -> std::string {
    try {
      fx::decoders::embedding_weight_only(ids, packed);
    } catch (const fx::Error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(error_of(at::tensor({1, 50}, at::kLong)),
            "embedding_weight_only: index 50 at position 1 is outside the table's 50 rows");
  EXPECT_EQ(error_of(at::tensor({-1}, at::kLong)),
            "embedding_weight_only: index -1 at position 0 is outside the table's 50 rows");
  EXPECT_EQ(error_of(at::ones({2})), "embedding_weight_only: indices is Float, expected an integer dtype");
}

TEST(QuantizeWeightOnly, ATiedTableReadsTheHeadsPackedTensors) {
  const std::string dir = fx_test::llama_fixture("f32_tied", "--tied");
  auto model = fx::decoders::load_llama(dir, {1, 64});
  ASSERT_EQ(model->lm_head->weight.data_ptr(), model->model->embed_tokens->weight.data_ptr());
  auto gm = fx::decoders::capture(model);
  fx::WeightOnlyOptions o;
  o.scheme = {4, 32, true};
  fx::WeightOnlyReport r;
  auto q = fx::quantize_weight_only(gm, o, &r);
  EXPECT_EQ(r.embeddings, 1u);
  // One packed copy: the lookup's get_attr nodes name the head's tensors, and nothing under embed_tokens exists.
  std::vector<std::string> table_args;
  for (const fx::Node* n : q->graph().nodes())
    if (n->target() == "fxcpp::embedding_weight_only")
      for (size_t i = 1; i < 3; ++i) table_args.push_back(n->args()[i].to_node()->target());
  EXPECT_EQ(table_args, (std::vector<std::string>{"_weight_only.lm_head.data", "_weight_only.lm_head.scales"}));
  for (const auto& b : q->named_buffers()) EXPECT_EQ(b.key().find("embed_tokens"), std::string::npos) << b.key();
  // bytes_after counts the shared tensors once: the head's int4 (+ scales) against two float tables.
  const int64_t v = model->config().vocab_size, h = model->config().hidden_size;
  EXPECT_LT(r.bytes_after, r.bytes_before / 6);
  EXPECT_GE(r.bytes_before, 2 * v * h * 4);
  // Generation: the quantized tied model greedy-decodes as the float model with the same dequantized table.
  auto dq = fx::decoders::load_llama(dir, {1, 64});
  {
    at::NoGradGuard no_grad;
    for (auto& p : dq->named_parameters())
      if (p.value().dim() == 2)
        p.value().copy_(fx::decoders::dequantize_weight_only(fx::decoders::pack_weight_only(p.value(), o.scheme)));
  }
  fx::decoders::GenerateOptions g;
  g.max_new_tokens = 8;
  const std::vector<int64_t> prompt{3, 1, 4, 1, 5};
  const auto want = fx::decoders::generate(fx::decoders::capture(dq), prompt, g).tokens;
  const auto got = fx::decoders::generate(q, prompt, g).tokens;
  size_t same = 0;
  for (size_t i = 0; i < std::min(want.size(), got.size()); ++i) same += want[i] == got[i];
  EXPECT_GE(same, want.size() - 1);  // the activations' int8 rounding may flip a close call
}

}  // namespace quantize_weight_only_test
