// A LLaMA-family decoder as a graph: captured, made fast by the decoder
// passes and the optimiser, its weights quantized to int4, generating.
//
// fx::decoders::capture traces the C++ model once with the new-token count
// dynamic: one graph runs the prompt and every decode step, its KV caches
// the model's buffers written in place. optimize_decoder fuses attention over
// the cache, RMSNorm, the rotary embedding and SiLU·mul into one kernel each,
// then lowers what is left (oneDNN linears, packed at optimise time).
// fx::quantize_weight_only turns every linear layer into an int4 one (groups
// of 32); the result is an ordinary graph that fx::save writes as a .fx file.
#include <fx/decoders.h>
#include <fx/decoders/capture.h>
#include <fx/decoders/quantize_weight_only.h>

#include <torch/torch.h>

#include <iostream>

int main() {
  using namespace fx::decoders;
  LlamaConfig config;
  config.vocab_size = 64;
  config.hidden_size = 64;
  config.intermediate_size = 128;
  config.num_hidden_layers = 2;
  config.num_attention_heads = 4;
  config.num_key_value_heads = 2;
  torch::manual_seed(0);
  LlamaForCausalLM model(config, LlamaCacheOptions{/*max_batch=*/1, /*max_seq=*/64});
  {
    torch::NoGradGuard no_grad;  // random weights whose greedy output varies
    for (auto& p : model->parameters()) p.normal_(0, 0.5);
  }
  const std::vector<int64_t> prompt = {1, 7, 3, 12, 5};
  GenerateOptions options;
  options.max_new_tokens = 12;
  const auto eager = generate(model, prompt, options).tokens;

  auto graph = capture(model);  // one graph, T dynamic
  DecoderPassReport passes;
  fx::OptimizeReport report;
  auto fast = optimize_decoder(graph, {}, &report, &passes);
  std::cout << "captured " << graph->graph().nodes().to_vector().size() << " nodes; optimised "
            << fast->graph().nodes().to_vector().size() << " (" << passes.fused_attention << " attentions, "
            << passes.fused_rms_norm << " RMSNorms, " << passes.fused_rotary << " rotaries, " << passes.fused_silu_mul
            << " SiLU products fused; " << report.onednn_linears << " oneDNN linears)\n";
  const auto optimised = generate(fast, prompt, options).tokens;

  fx::WeightOnlyOptions int4;
  int4.scheme = {/*bits=*/4, /*group_size=*/32, /*symmetric=*/true};
  fx::WeightOnlyReport q;
  auto quantized = optimize_decoder(fx::quantize_weight_only(graph, int4, &q));
  const auto tokens4 = generate(quantized, prompt, options).tokens;
  std::cout << "int4: " << q.layers << " layers, " << q.bytes_before << " -> " << q.bytes_after
            << " bytes of weights, kernel " << q.kernel << "\n";

  auto print = [](const char* what, const std::vector<int64_t>& t) {
    std::cout << what;
    for (int64_t id : t) std::cout << " " << id;
    std::cout << "\n";
  };
  print("eager    ", eager);
  print("optimised", optimised);
  print("int4     ", tokens4);
  if (optimised != eager) {
    std::cerr << "the optimised graph's greedy tokens differ from the eager model's\n";
    return 1;
  }
  return 0;
}
