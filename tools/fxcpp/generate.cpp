// fxcpp generate FOLDER --prompt TEXT | --prompt-ids 1,2,3: a LLaMA-family
// checkpoint folder (config.json and safetensors) decodes from a prompt
// (fx::decoders::generate): with the folder's SentencePiece tokenizer.model
// (or --tokenizer) the prompt may be text and the new tokens stream as text
// (fx::decoders::TokenStream), stopping at its end-of-sequence id; without
// one, ids in and ids out. Then llama.cpp-style timings (prompt tokens/s,
// decode tokens/s, time to first token, peak resident memory); --json
// prints one JSON object instead.
#include "command.h"
#include "decoder_model.h"
#include "model_io.h"
#include "train_io.h"

#include <fx/decoders.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

namespace fx::cli {
namespace {

std::vector<int64_t> id_list(const std::string& text, const std::string& flag) {
  std::vector<int64_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    int64_t v = -1;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v < 0) throw Error(flag + ": '" + item + "' is not a token id");
    ids.push_back(v);
  }
  if (ids.empty()) throw Error(flag + " is empty");
  return ids;
}

/// lscpu's "Model name" (family and model), from /proc/cpuinfo.
std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, name, family, model;
  while (std::getline(in, line)) {
    auto value = [&] { return line.substr(line.find(':') + 2); };
    if (name.empty() && line.rfind("model name", 0) == 0) name = value();
    if (family.empty() && line.rfind("cpu family", 0) == 0) family = value();
    if (model.empty() && line.rfind("model\t", 0) == 0) model = value();
  }
  return name + (family.empty() ? "" : " (family " + family + " model " + model + ")");
}

/// --tokenizer's SentencePiece model, else the checkpoint folder's tokenizer.model when it has one.
std::optional<decoders::Tokenizer> tokenizer_of(const ModelArgs& args) {
  if (args.has("tokenizer")) return decoders::Tokenizer::load(args.get("tokenizer"));
  const std::filesystem::path beside = std::filesystem::path(args.model) / "tokenizer.model";
  if (std::filesystem::is_directory(args.model) && std::filesystem::exists(beside))
    return decoders::Tokenizer::load(beside.string());
  return std::nullopt;
}

int run_generate(const std::vector<std::string>& argv) {
  std::vector<std::string> flags = {"prompt-ids", "prompt", "tokenizer", "max-new-tokens", "temperature", "top-k",
                                    "top-p", "repetition-penalty", "seed", "stop-ids", "threads", "max-seq"};
  std::vector<std::string> switches = {"json", "ignore-eos", "teacher-forced"};
  flags.insert(flags.end(), kDecoderFlags.begin(), kDecoderFlags.end());
  switches.insert(switches.end(), kDecoderSwitches.begin(), kDecoderSwitches.end());
  ModelArgs args = parse_model_args(argv, flags, switches);
  if (args.has("prompt") && args.has("prompt-ids")) throw Error("give --prompt TEXT or --prompt-ids 1,2,3, not both");
  if (!args.has("prompt") && !args.has("prompt-ids")) throw Error("--prompt TEXT or --prompt-ids 1,2,3 is required");
  const std::optional<decoders::Tokenizer> tokenizer = tokenizer_of(args);
  if (args.has("prompt") && !tokenizer)
    throw Error(args.model + " has no tokenizer.model: --prompt TEXT needs the checkpoint's SentencePiece tokenizer "
                             "(or --tokenizer PATH); give --prompt-ids 1,2,3");
  const std::vector<int64_t> prompt =
      args.has("prompt") ? tokenizer->encode(args.get("prompt")) : id_list(args.get("prompt-ids"), "--prompt-ids");
  const int threads = set_threads(args);
  decoders::GenerateOptions o;
  o.max_new_tokens = args.get_int("max-new-tokens", 32);
  const std::string temperature = args.get("temperature", "0");
  o.temperature = temperature == "0" || temperature == "0.0" ? 0.0 : args.get_positive("temperature", 1.0);
  o.top_k = args.get_int("top-k", 0, /*min=*/0);
  o.top_p = args.has("top-p") ? args.get_positive("top-p", 1.0) : 1.0;
  o.repetition_penalty = args.has("repetition-penalty") ? args.get_positive("repetition-penalty", 1.0) : 1.0;
  o.seed = static_cast<uint64_t>(args.get_int("seed", 0, /*min=*/0));
  if (args.has("stop-ids")) o.stop_ids = id_list(args.get("stop-ids"), "--stop-ids");
  const int64_t eos = tokenizer && !args.has("ignore-eos") ? tokenizer->eos_id() : -1;
  if (eos >= 0) o.stop_ids.push_back(eos);
  OpenedDecoder model = open_decoder(args, args.get_int("max-seq", 0, /*min=*/0));
  const int64_t max_seq = args.has("max-seq") ? args.get_int("max-seq", 0, /*min=*/0) : model.max_seq;
  if (args.has("teacher-forced")) {
    // One forward over the whole sequence: the most likely next token at every position (for comparing precisions).
    if (static_cast<int64_t>(prompt.size()) > max_seq)
      throw Error("--teacher-forced: " + std::to_string(prompt.size()) + " tokens, --max-seq is " +
                  std::to_string(max_seq));
    model.reset();
    at::NoGradGuard no_grad;
    const at::Tensor logits = model.step(torch::tensor(prompt).unsqueeze(0), torch::arange(int64_t(prompt.size())));
    const at::Tensor top1 = logits[0].argmax(-1).contiguous();
    nlohmann::ordered_json j;
    j["top1"] = std::vector<int64_t>(top1.data_ptr<int64_t>(), top1.data_ptr<int64_t>() + top1.numel());
    j["engine"] = model.engine;
    std::cout << j.dump() << "\n";
    return 0;
  }
  const int64_t positions = static_cast<int64_t>(prompt.size()) + o.max_new_tokens - 1;
  if (positions > max_seq)
    throw Error("the prompt (" + std::to_string(prompt.size()) + " tokens) and -n " +
                std::to_string(o.max_new_tokens) + " need " + std::to_string(positions) + " positions, --max-seq is " +
                std::to_string(max_seq));
  const bool json = args.has("json");
  // With a tokenizer the new tokens stream as text (held back while a character is incomplete), else as ids.
  std::optional<decoders::TokenStream> stream;
  std::string text;
  auto print = [&](const std::string& piece) {
    text += piece;
    if (json || piece.empty()) return;
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  };
  if (tokenizer) {
    stream.emplace(*tokenizer, prompt);
    o.on_token = [&](int64_t t) {
      print(stream->push(t));
      return true;
    };
  } else if (!json) {
    o.on_token = [](int64_t t) {
      std::printf("%lld ", static_cast<long long>(t));
      std::fflush(stdout);
      return true;
    };
  }
  set_activity("generating from " + args.model);
  model.reset();
  o.max_seq = max_seq;
  at::NoGradGuard no_grad;
  const decoders::GenerateResult r = decoders::generate(model.step, prompt, o);
  if (stream) print(stream->flush());
  const double prompt_rate = static_cast<double>(prompt.size()) / r.prefill_seconds;
  const double decode_rate =
      r.tokens.size() > 1 ? static_cast<double>(r.tokens.size() - 1) / r.decode_seconds : 0.0;  // forwards after the first token
  if (json) {
    nlohmann::ordered_json j;
    j["generated"] = r.tokens;
    if (tokenizer)
      j["text"] = text;  // the new tokens' text (the prompt's not included)
    else
      j["text"] = nullptr;
    j["stopped"] = r.stopped;
    j["prompt_tokens_per_s"] = prompt_rate;
    j["decode_tokens_per_s"] = decode_rate;
    j["time_to_first_token_ms"] = r.prefill_seconds * 1e3;
    j["peak_rss_mb"] = peak_resident_mib();
    j["cpu"] = cpu_name();
    j["threads"] = threads;
    j["engine"] = model.engine;
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::printf("\n");
  const char* stop = !r.stopped                              ? ""
                     : eos >= 0 && r.tokens.back() == eos   ? "; stopped at the end-of-sequence id"
                                                            : "; stopped at a stop id";
  std::fprintf(stderr,
               "fxcpp generate: prompt %zu tokens, %s tokens/s; decode %zu tokens, %s tokens/s; time to first token "
               "%s ms; peak resident memory %s MB; %d thread%s; %s%s\n",
               prompt.size(), format_number(prompt_rate).c_str(), r.tokens.size(), format_number(decode_rate).c_str(),
               format_number(r.prefill_seconds * 1e3).c_str(), format_number(peak_resident_mib()).c_str(), threads,
               threads == 1 ? "" : "s", model.engine.c_str(), stop);
  return 0;
}

}  // namespace

FX_COMMAND("generate",
           "generate (FOLDER | DECODER.fx) (--prompt TEXT | --prompt-ids 1,2,3) [--tokenizer PATH] "
           "[--engine fxcpp|eager] [--quantize int8|int4 [--group-size G] "
           "[--asymmetric] | --bf16] [--teacher-forced] [-n|--max-new-tokens N] [--temperature T] [--top-k K] [--top-p P] "
           "[--repetition-penalty R] [--seed S] [--stop-ids 2,3] [--ignore-eos] [--threads N] [--max-seq L] [--json]",
           "decode from a LLaMA-family checkpoint folder (config.json, safetensors; tokenizer.model for text) or a "
           "decoder graph: captured, optimised, weights optionally int8 / int4",
           run_generate);

}  // namespace fx::cli
