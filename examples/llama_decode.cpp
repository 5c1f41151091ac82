// A LLaMA-family decoder from a Hugging Face checkpoint folder, decoding
// greedily with its static KV cache.
//
// A checkpoint folder holds config.json and model.safetensors (or shards and
// model.safetensors.index.json). This example writes a tiny random one the
// way Hugging Face lays it out (fx::save_safetensors), loads it with
// fx::decoders::load_llama (every tensor checked against config.json), then
// generates: the prompt in one forward (prefill), then one token per
// forward, each reading the cache in place. It checks that every cached step
// gives the logits a forward over the whole sequence gives.
#include <fx/decoders/llama.h>
#include <fx/safetensors.h>

#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <iostream>

int main() {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "fxcpp_example_llama";
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"model_type": "llama", "vocab_size": 50, "hidden_size": 32,
    "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 128, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": true})";
  {
    // Random weights with Hugging Face's names: a model's own named_parameters().
    torch::manual_seed(0);
    fx::decoders::LlamaForCausalLM init(fx::decoders::LlamaConfig::from_json_file((dir / "config.json").string()),
                                        fx::decoders::LlamaCacheOptions{1, 8});
    std::vector<std::pair<std::string, at::Tensor>> weights;
    for (const auto& p : init->named_parameters())
      if (p.key() != "lm_head.weight") weights.emplace_back(p.key(), p.value().detach() * 6);  // tied: not stored
    fx::save_safetensors((dir / "model.safetensors").string(), weights);
  }

  torch::NoGradGuard no_grad;
  auto model = fx::decoders::load_llama(dir.string(), {/*max_batch=*/1, /*max_seq=*/64});
  const at::Tensor prompt = torch::tensor({{1, 7, 3, 12, 5}});
  at::Tensor logits = model->forward(prompt, torch::arange(prompt.size(1)));  // prefill
  at::Tensor sequence = prompt;
  auto check = fx::decoders::load_llama(dir.string(), {1, 64});
  for (int step = 0; step < 12; ++step) {
    const at::Tensor next = logits.select(1, -1).argmax(-1, /*keepdim=*/true);  // greedy
    // The cached step's logits against a forward over the whole sequence.
    check->reset_cache();
    const at::Tensor full = check->forward(sequence, torch::arange(sequence.size(1))).select(1, -1);
    const double err = (full - logits.select(1, -1)).abs().max().item<double>();
    if (err > 1e-4 * full.abs().max().item<double>()) {
      std::cerr << "step " << step << ": the cached logits differ from the full forward's by " << err << "\n";
      return 1;
    }
    sequence = torch::cat({sequence, next}, 1);
    logits = model->forward(next, torch::tensor({sequence.size(1) - 1}));  // one token, the cache in place
  }
  std::cout << "prompt " << prompt << "\ngenerated " << sequence.narrow(1, prompt.size(1), 12)
            << "\n12 cached steps equal full forwards\n";
  return 0;
}
