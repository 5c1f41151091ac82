// load_llama and LlamaConfig::from_json_file: a Hugging Face checkpoint
// folder (config.json and safetensors) as a LlamaForCausalLM, every tensor
// checked against config.json.
#include "torchscript/file_checks.h"

#include <fx/decoders/llama.h>

#include "serialize/document.h"
#include <fx/onednn.h>
#include <fx/safetensors.h>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace fx::decoders {

namespace {

/// A checkpoint's float weights lie in a private mapping of its file (load_safetensors), alive while any of
/// its tensors is: once a oneDNN kernel (optimize_decoder's float32 / bf16 linears) has its packed copy of a
/// weight, the weight's pages go back (read again from the file only if the float module runs), layer by layer
/// as the kernels are made, instead of every page staying resident beside the packed copies.
void release_packed_weight(const at::Tensor& plain) { release_mapped_pages(plain); }
const bool kReleasesPackedWeights = (onednn::set_weights_packed_hook(&release_packed_weight), true);

}  // namespace

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) { throw ImportError(path + ": " + what); }


}  // namespace

LlamaConfig LlamaConfig::from_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail(path, "not valid JSON (" + import_detail::one_line(e.what()) + ")");
  }
  if (!j.is_object()) fail(path, "not a JSON object");
  LlamaConfig c;
  auto integer = [&](const char* key, int64_t& out, bool required) {
    if (!j.contains(key) || j[key].is_null()) {
      if (required) fail(path, std::string("has no ") + key);
      return;
    }
    if (!j[key].is_number_integer()) fail(path, std::string(key) + " must be an integer, not " + j[key].dump());
    out = j[key].get<int64_t>();
  };
  auto number = [&](const char* key, double& out) {
    if (!j.contains(key) || j[key].is_null()) return;
    if (!j[key].is_number()) fail(path, std::string(key) + " must be a number, not " + j[key].dump());
    out = j[key].get<double>();
  };
  integer("vocab_size", c.vocab_size, true);
  integer("hidden_size", c.hidden_size, true);
  integer("intermediate_size", c.intermediate_size, true);
  integer("num_hidden_layers", c.num_hidden_layers, true);
  integer("num_attention_heads", c.num_attention_heads, true);
  c.num_key_value_heads = c.num_attention_heads;
  integer("num_key_value_heads", c.num_key_value_heads, false);
  integer("max_position_embeddings", c.max_position_embeddings, false);
  number("rms_norm_eps", c.rms_norm_eps);
  number("rope_theta", c.rope_theta);
  if (j.contains("tie_word_embeddings")) {
    if (!j["tie_word_embeddings"].is_boolean()) fail(path, "tie_word_embeddings must be true or false");
    c.tie_word_embeddings = j["tie_word_embeddings"].get<bool>();
  }
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
    fail(path, "rope_scaling " + j["rope_scaling"].dump() + " is not supported (plain rotary embeddings only)");
  if (j.contains("hidden_act") && j["hidden_act"] != "silu")
    fail(path, "hidden_act " + j["hidden_act"].dump() + " is not supported (silu only)");
  c.check(path);
  return c;
}

LlamaForCausalLM load_llama(const std::string& folder, LlamaCacheOptions cache) {
  namespace fs = std::filesystem;
  const std::string config_path = (fs::path(folder) / "config.json").string();
  if (!fs::exists(config_path)) fail(folder, "has no config.json");
  const LlamaConfig config = LlamaConfig::from_json_file(config_path);
  SafeTensors weights = load_safetensors_folder(folder);
  // The layers' random initial weights are never drawn (every one is replaced below).
  LlamaForCausalLM model = [&] {
    serialize_detail::SkipInitGuard skip_init;
    return LlamaForCausalLM(config, cache);
  }();
  const std::string where = (fs::path(folder) / "model.safetensors").string() +
                            (fs::exists(fs::path(folder) / "model.safetensors.index.json") ? " (sharded)" : "");
  torch::NoGradGuard no_grad;
  std::set<std::string> used;
  for (auto& item : model->named_parameters(/*recurse=*/true)) {
    const std::string& name = item.key();
    at::Tensor& param = item.value();
    if (name == "lm_head.weight" && config.tie_word_embeddings && !weights.find(name)) {
      used.insert(name);
      continue;  // the embedding's own tensor
    }
    const at::Tensor* t = weights.find(name);
    if (!t) fail(where, "has no tensor '" + name + "' (config.json: " + c10::str(param.sizes()) + ")");
    if (t->sizes() != param.sizes())
      fail(where, "tensor '" + name + "' has shape " + c10::str(t->sizes()) + ", config.json gives it " +
                      c10::str(param.sizes()));
    const auto dtype = t->scalar_type();
    if (dtype != at::kFloat && dtype != at::kHalf && dtype != at::kBFloat16)
      fail(where, "tensor '" + name + "' is " + c10::toString(dtype) + ", not F32, F16 or BF16");
    // A float32 tensor is used where it lies in the file's private mapping (read on
    // first use, copied only where written): one copy of the weights in memory, not two.
    if (dtype == at::kFloat)
      param.set_data(*t);
    else
      param.set_data(t->to(at::kFloat));
    used.insert(name);
  }
  if (config.tie_word_embeddings) model->lm_head->weight.set_data(model->model->embed_tokens->weight);
  if (config.tie_word_embeddings && weights.find("lm_head.weight"))
    fail(where, "holds lm_head.weight though config.json ties it to model.embed_tokens.weight");
  for (const auto& [name, t] : weights.tensors) {
    const std::string suffix = ".rotary_emb.inv_freq";  // older HF checkpoints save the rotary table
    const bool rotary_buffer =
        name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    if (!used.count(name) && !rotary_buffer)
      fail(where, "holds tensor '" + name + "', which a LlamaForCausalLM of this config.json has no place for");
  }
  model->eval();
  return model;
}

}  // namespace fx::decoders
