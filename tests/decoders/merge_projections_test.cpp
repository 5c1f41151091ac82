// fx::decoders::merge_projections on the captured LLaMA fixture: q / k / v
// and gate / up become one GEMM each (the pass proven where it fires: the
// node counts, the stacked weights), the logits stay float32's and Hugging
// Face's greedy tokens come out; weight-only layers merge to the bit, merged
// before quantizing or after; siblings that differ stay apart.
#include <fx/decoders/capture.h>
#include <fx/decoders/passes.h>
#include <fx/decoders/quantize_weight_only.h>
#include <fx/graph.h>
#include <fx/tensor_file.h>

#include "llama_fixture.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace merge_projections_test {

using fx_test::count_calls;

size_t count_modules(const fx::Graph& g) {
  size_t n = 0;
  for (const fx::Node* node : g.nodes()) n += node->op() == fx::Opcode::CallModule;
  return n;
}

const fx::Node* named(const fx::Graph& g, const std::string& name) {
  for (const fx::Node* n : g.nodes())
    if (n->name() == name) return n;
  return nullptr;
}

bool holds(const fx::GraphModule& gm, const std::string& name) {
  for (const auto& p : gm.named_parameters()) if (p.key() == name) return true;
  for (const auto& b : gm.named_buffers()) if (b.key() == name) return true;
  return false;
}

/// The logits of the prompt, the caches emptied first.
at::Tensor logits_of(const std::shared_ptr<fx::GraphModule>& gm, const std::vector<int64_t>& prompt) {
  fx::decoders::reset_cache(*gm);
  at::NoGradGuard no_grad;
  const int64_t t = static_cast<int64_t>(prompt.size());
  return gm->forward({torch::tensor(prompt).view({1, t}), torch::arange(t)}).toTensor();
}

TEST(MergeProjections, QkvAndGateUpBecomeOneGemmEach) {
  const std::string dir = fx_test::llama_fixture("f32", "");
  const auto [prompt, greedy, hf_logits] = fx_test::llama_expected(dir);
  auto model = fx::decoders::load_llama(dir, {1, 64});
  const size_t layers = static_cast<size_t>(model->config().num_hidden_layers);
  auto gm = fx::decoders::capture(model);
  ASSERT_EQ(count_modules(gm->graph()), 7 * layers + 2);  // the linears (call_module), lm_head and embed_tokens
  const size_t narrows = count_calls(gm->graph(), "aten::narrow");
  size_t groups = 0;
  auto merged = fx::decoders::merge_projections(gm, &groups);
  EXPECT_EQ(groups, 2 * layers);
  EXPECT_EQ(count_calls(merged->graph(), "aten::linear"), 2 * layers);
  EXPECT_EQ(count_modules(merged->graph()), 2 * layers + 2);  // o_proj, down_proj, lm_head, embed_tokens
  EXPECT_EQ(count_calls(merged->graph(), "aten::narrow"), narrows + 5 * layers);
  // The merged weight is the members' stacked by output channel; their own are not held.
  const fx::Node* qkv = named(merged->graph(), "model_layers_0_self_attn_q_proj_k_proj_v_proj");
  ASSERT_NE(qkv, nullptr);
  EXPECT_EQ(qkv->target(), "aten::linear");
  const at::Tensor stacked = merged->fetch_attr("model.layers.0.self_attn.q_proj_k_proj_v_proj.weight");
  const auto params = model->named_parameters();
  const std::string a = "model.layers.0.self_attn.";
  EXPECT_TRUE(at::equal(stacked, at::cat(std::vector<at::Tensor>{params[a + "q_proj.weight"], params[a + "k_proj.weight"],
                                                                  params[a + "v_proj.weight"]},
                                         0)));
  EXPECT_FALSE(holds(*merged, "model.layers.0.self_attn.q_proj.weight"));
  EXPECT_TRUE(holds(*merged, "model.layers.0.self_attn.o_proj.weight"));
  // Named in graph order (the C++ model computes up_proj(x) before gate_proj(x)).
  ASSERT_NE(named(merged->graph(), "model_layers_1_mlp_up_proj_gate_proj"), nullptr);
  // The input module is unchanged, and computes what the merged one does.
  EXPECT_EQ(count_modules(gm->graph()), 7 * layers + 2);
  const at::Tensor before = logits_of(gm, prompt), after = logits_of(merged, prompt);
  EXPECT_LT((after - before).abs().max().item<double>(), 1e-5 * before.abs().max().item<double>());
  fx::decoders::GenerateOptions o;
  o.max_new_tokens = static_cast<int64_t>(greedy.size());
  EXPECT_EQ(fx::decoders::generate(merged, prompt, o).tokens, greedy);
  // Nothing left to merge: the module itself comes back.
  size_t again = 1;
  EXPECT_EQ(fx::decoders::merge_projections(merged, &again), merged);
  EXPECT_EQ(again, 0u);
  // optimize_decoder merges weight-only layers only (float ones would double their memory): a merged
  // graph is optimised as it is, fused and lowered, and the greedy tokens stay.
  fx::decoders::DecoderPassReport passes;
  fx::OptimizeReport report;
  auto fast = fx::decoders::optimize_decoder(merged, {}, &report, &passes);
  EXPECT_EQ(passes.merged_projections, 0u);
  EXPECT_EQ(report.onednn_linears, 4 * layers + 1);
  EXPECT_EQ(passes.fused_silu_mul, layers);  // silu_mul over the two halves of up_gate
  EXPECT_EQ(passes.fused_rotary, 2 * layers);
  EXPECT_EQ(passes.fused_attention, layers);
  EXPECT_EQ(fx::decoders::generate(fast, prompt, o).tokens, greedy);
  fx::decoders::optimize_decoder(gm, {}, nullptr, &passes);
  EXPECT_EQ(passes.merged_projections, 0u);
}

TEST(MergeProjections, WeightOnlyLayersMergeToTheBitBeforeOrAfterQuantizing) {
  const std::string dir = fx_test::llama_fixture("f32", "");
  const auto [prompt, greedy, hf_logits] = fx_test::llama_expected(dir);
  auto model = fx::decoders::load_llama(dir, {1, 64});
  const size_t layers = static_cast<size_t>(model->config().num_hidden_layers);
  auto gm = fx::decoders::capture(model);
  for (const fx::decoders::WeightOnlyScheme scheme :
       {fx::decoders::WeightOnlyScheme{8, 0, true}, fx::decoders::WeightOnlyScheme{4, 32, false}}) {
    SCOPED_TRACE(c10::str("bits ", scheme.bits, " group ", scheme.group_size, " symmetric ", scheme.symmetric));
    fx::WeightOnlyOptions o;
    o.scheme = scheme;
    auto q = fx::quantize_weight_only(gm, o);
    size_t groups = 0;
    auto after = fx::decoders::merge_projections(q, &groups);
    EXPECT_EQ(groups, 2 * layers);
    EXPECT_EQ(count_calls(after->graph(), "fxcpp::linear_weight_only"), 4 * layers + 1);
    EXPECT_FALSE(holds(*after, "_weight_only.model.layers.0.self_attn.q_proj.data"));
    const at::Tensor data = after->fetch_attr("_weight_only.model.layers.0.mlp.up_proj_gate_proj.data");
    EXPECT_TRUE(at::equal(data, at::cat({q->fetch_attr("_weight_only.model.layers.0.mlp.up_proj.data"),
                                         q->fetch_attr("_weight_only.model.layers.0.mlp.gate_proj.data")})));
    EXPECT_EQ(scheme.symmetric, !holds(*after, "_weight_only.model.layers.0.mlp.up_proj_gate_proj.zeros"));
    auto before = fx::quantize_weight_only(fx::decoders::merge_projections(gm), o);
    EXPECT_EQ(count_calls(before->graph(), "fxcpp::linear_weight_only"), 4 * layers + 1);
    fx::decoders::DecoderPassReport passes;
    auto fast = fx::decoders::optimize_decoder(q, {}, nullptr, &passes);
    EXPECT_EQ(passes.merged_projections, 2 * layers);
    EXPECT_EQ(count_calls(fast->graph(), "fxcpp::linear_weight_only"), 4 * layers + 1);
    const at::Tensor reference = logits_of(q, prompt);
    EXPECT_TRUE(at::equal(logits_of(after, prompt), reference));
    EXPECT_TRUE(at::equal(logits_of(before, prompt), reference));
  }
}

TEST(MergeProjections, SiblingsThatDifferStayApart) {
  auto root = std::make_shared<torch::nn::Module>();
  torch::manual_seed(0);
  root->register_buffer("a", torch::randn({4, 8}));
  root->register_buffer("b", torch::randn({3, 8}));
  root->register_buffer("c", torch::randn({5, 8}));   // with a bias: apart from a and b
  root->register_buffer("c_bias", torch::randn({5}));
  root->register_buffer("d", torch::randn({2, 6}));   // other input features
  root->register_buffer("e", torch::randn({6, 8}));   // reads y, not x
  // A module already named as the merge of a and b would be: its tensor is not overwritten.
  auto taken = std::make_shared<torch::nn::Module>();
  taken->register_buffer("weight", torch::ones({2}));
  root->register_module("a_b", taken);
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* y = g->placeholder("y");
  fx::Node* z = g->placeholder("z");
  fx::Node* la = g->call_function("aten::linear", {x, g->get_attr("a")});
  fx::Node* lb = g->call_function("aten::linear", {x, g->get_attr("b")});
  fx::Node* lc = g->call_function("aten::linear", {x, g->get_attr("c"), g->get_attr("c_bias")});
  fx::Node* ld = g->call_function("aten::linear", {z, g->get_attr("d")});
  fx::Node* le = g->call_function("aten::linear", {y, g->get_attr("e")});
  g->output(fx::Argument::tuple({la, lb, lc, ld, le, g->get_attr("a_b.weight")}));
  auto gm = std::make_shared<fx::GraphModule>(root, g);
  size_t groups = 0;
  auto merged = fx::decoders::merge_projections(gm, &groups);
  EXPECT_EQ(groups, 1u);
  EXPECT_EQ(count_calls(merged->graph(), "aten::linear"), 4u);
  ASSERT_NE(named(merged->graph(), "a_b_"), nullptr);  // "a_b" was taken
  EXPECT_TRUE(at::equal(merged->fetch_attr("a_b.weight"), torch::ones({2})));
  EXPECT_EQ(merged->fetch_attr("a_b_.weight").size(0), 7);  // a's 4 rows and b's 3
  const at::Tensor xv = torch::randn({2, 8}), yv = torch::randn({2, 8}), zv = torch::randn({2, 6});
  const auto want = gm->forward({xv, yv, zv}).toTupleRef().elements();
  const auto got = merged->forward({xv, yv, zv}).toTupleRef().elements();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_LT((got[i].toTensor() - want[i].toTensor()).abs().max().item<double>(), 1e-5) << i;
}

}  // namespace merge_projections_test
