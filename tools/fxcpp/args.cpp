// Argument parsing of the subcommands, with CLI11: --name value and
// --name=value, -i/-o short forms, `--` to end options, per-command --help
// (parse_options; parse_model_args, and the distributed commands'
// parse_dist_args, build on it).
#include "args.h"

#include <fx/error.h>
#include <fx/load_library.h>

#include <CLI/CLI.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <sys/stat.h>

namespace fx::cli {
namespace {

const Command* current = nullptr;

/// `names` joined by ", ".
std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

/// What each common option means, for --help.
const std::map<std::string, std::string>& descriptions() {
  static const std::map<std::string, std::string> d = {
      {"input", "inputs file (torch.save of a tensor, or a tuple/list of them)"},
      {"output", "output file"},
      {"runs", "timed runs (default 5)"},
      {"warmup", "untimed runs first (default 2; 0 for none)"},
      {"top", "rows of the slowest-nodes table (default 20)"},
      {"trace", "Chrome trace JSON file (default MODEL.trace.json)"},
      {"graph", "print str(graph) too"},
      {"no-code", "do not print the generated code"},
      {"interpreter", "run through fx::Interpreter instead of the compiled forward"},
      {"optimize", "run fx::optimize_for_inference's module (prepared for the inputs)"},
      {"no-fuse", "optimise without fusing pointwise / reduction chains into generated kernels (fx::compiler::fuse_kernels); with --optimize or optimize"},
      {"aot", "optimize: store each generated kernel's compiled object in the file (fx::SaveOptions::kernel_objects), "
              "so it runs where no compiler does, on a CPU with the same instruction sets"},
      {"no-winograd", "optimise without Winograd 3x3 convolutions (oneDNN's, or below AVX-512 fxcpp's; all direct); with --optimize or optimize"},
      {"linear-kernel", "which kernel runs float32 linear layers: auto (default: oneDNN on AVX-512, below it the "
                        "faster of oneDNN and ATen/BLAS per shape, timed once), onednn or aten; with --optimize or "
                        "optimize"},
      {"bf16", "optimise for bfloat16 (oneDNN bf16 kernels, fp32 accumulation); with --optimize or bench, and "
               "generate (the decoder's linears on bf16 weights: half float32's bytes a token)"},
      {"report", "print the optimiser's report on stderr (shown anyway when stderr is a terminal); quantize: "
                 "the per-node table"},
      {"specialize-shapes", "import for the inputs' exact sizes: conditions and loops on sizes fold (shape guards)"},
      {"threads", "intra-op threads, ATen and oneDNN (default 1)"},
      {"engine", "run only this engine: " + joined(engine_names()) +
                     "; generate: fxcpp (default: captured, the decoder passes, optimised) or eager"},
      {"batch", "repeat the input along dim 0 to this batch (torch::cat; default 1: as saved)"},
      {"iters", "timed rounds (one forward of each engine per round)"},
      {"seconds", "time budget of the timed rounds, at least --min-rounds (default 2 s)"},
      {"min-rounds", "fewest timed rounds with --seconds (default 3)"},
      {"json", "print the results as one JSON object"},
      {"roofline", "measure the matmul roofline (GFLOP/s of an NxNxN matmul; no MODEL)"},
      {"size", "matrix size N of --roofline (default 1024)"},
      {"calibration", "int8 calibration data: torch.save of a tuple of forward arguments (samples along dim 0), "
                      "or a list of such tuples"},
      {"quantize", "run the int8 quantization (fx::quantization::quantize; calibrated on --calibration, else on "
                   "the input); generate: int8 or int4 weights (fx::quantize_weight_only)"},
      {"weight-only", "quantize: a decoder checkpoint's linear layers alone, int8 or int4 (-o OUT.fx)"},
      {"group-size", "weight-only int8 / int4: weights per scale, 32, 64 or 128 (default int8 0: per output "
                     "channel; int4 32)"},
      {"asymmetric", "weight-only: a zero point per group besides its scale"},
      {"reference", "keep the reference quantized graph (float ops between quantize / dequantize), not lowered"},
      {"skip", "keep this module float (qualified name or call_module node name)"},
      {"weight-bits", "quantize: 8 (default) or 7: weights in [-64, 63], which oneDNN's int8 kernels run exactly "
                      "on CPUs without VNNI (8-bit weights compute in float32 there)"},
      {"int8-torchscript", "Python's quantized TorchScript of the model, for --engine python_int8 "
                           "(python/quantize_baseline.py)"},
      {"prompt-ids", "generate: the prompt's token ids, comma-separated"},
      {"prompt", "generate: the prompt as text (the SentencePiece tokenizer's ids, BOS first)"},
      {"tokenizer", "generate: the SentencePiece tokenizer.model (default FOLDER/tokenizer.model)"},
      {"ignore-eos", "generate: do not stop at the tokenizer's end-of-sequence id"},
      {"teacher-forced", "generate: no decoding; one forward over the prompt, its most likely next token at every "
                         "position as JSON {\"top1\": [...]}"},
      {"max-new-tokens", "generate: new tokens at most (default 32)"},
      {"temperature", "generate: 0 greedy (default), else sampled at this temperature"},
      {"top-k", "generate: sample among the k most likely tokens (0: all)"},
      {"top-p", "generate: sample among the most likely tokens whose probability reaches p (default 1: all)"},
      {"repetition-penalty", "generate: Hugging Face's repetition penalty (default 1: off)"},
      {"seed", "generate: the sampling seed (default 0)"},
      {"stop-ids", "generate: stop after any of these token ids, comma-separated"},
      {"max-seq", "generate, quantize --weight-only: positions of the KV cache (default config.json's "
                  "max_position_embeddings; a .fx decoder's own)"},
  };
  return d;
}

const std::map<std::string, std::string>& short_names() {
  static const std::map<std::string, std::string> s = {{"input", "-i"}, {"output", "-o"}, {"max-new-tokens", "-n"}};
  return s;
}

std::string description(const std::string& name) {
  auto it = descriptions().find(name);
  return it == descriptions().end() ? "" : it->second;
}

}  // namespace

void set_current_command(const Command* command) { current = command; }

std::string ModelArgs::get(const std::string& name, const std::string& fallback) const {
  auto it = values.find(name);
  return it == values.end() ? fallback : it->second;
}

int ModelArgs::get_int(const std::string& name, int fallback, int min) const {
  auto it = values.find(name);
  if (it == values.end()) return fallback;
  try {
    size_t used = 0;
    const int v = std::stoi(it->second, &used);
    if (used != it->second.size() || v < min) throw std::invalid_argument("");
    return v;
  } catch (const std::exception&) {
    throw Error("--" + name + " expects " + (min == 1 ? std::string("a positive integer") : "an integer >= " + std::to_string(min)) +
                ", got '" + it->second + "'");
  }
}

double ModelArgs::get_positive(const std::string& name, double fallback) const {
  auto it = values.find(name);
  if (it == values.end()) return fallback;
  try {
    size_t used = 0;
    const double v = std::stod(it->second, &used);
    if (used != it->second.size() || !(v > 0) || !std::isfinite(v)) throw std::invalid_argument("");
    return v;
  } catch (const std::exception&) {
    throw Error("--" + name + " expects a number > 0, got '" + it->second + "'");
  }
}

ModelArgs parse_options(const std::vector<std::string>& args, const Command* command, const std::string& program,
                        const std::string& model_help, const std::vector<OptionSpec>& options, bool model_optional,
                        const std::vector<std::string>& repeatable) {
  CLI::App app(command ? command->summary : "", program);
  app.set_help_flag("-h,--help", "show this help and exit");
  app.footer(command ? std::string("usage: fxcpp ") + command->usage : "");
  ModelArgs out;
  CLI::Option* model = app.add_option("model", out.model, model_help);
  if (!model_optional) model->required();
  for (const OptionSpec& o : options) {
    const std::string names = (o.short_name.empty() ? "" : o.short_name + ",") + "--" + o.name;
    const std::string name = o.name;
    if (!o.value.empty()) {
      app.add_option_function<std::string>(
          names, [&out, name](const std::string& v) { out.values[name] = v; }, o.description)
          ->type_name(o.value);
    } else {
      app.add_flag_callback(names, [&out, name] { out.values[name] = "1"; }, o.description);
    }
  }
  auto add_repeatable = [&app](const std::string& name, std::vector<std::string>& into, const std::string& help,
                               const char* type) {
    app.add_option("--" + name, into, help)
        ->type_name(type)
        ->allow_extra_args(false)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  };
  add_repeatable("load-library", out.libraries,
                 "load an operator library first (fx::load_library, as torch.ops.load_library; repeatable)", "PATH");
  for (const std::string& r : repeatable) add_repeatable(r, out.lists[r], description(r) + " (repeatable)", "VALUE");
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    throw HelpRequested{app.help()};
  } catch (const CLI::RequiredError& e) {
    if (out.model.empty()) throw Error("no model file given (MODEL)");
    throw Error(e.what());
  } catch (const CLI::ParseError& e) {
    throw Error(e.what());
  }
  for (const std::string& lib : out.libraries) {
    set_activity("loading " + lib);
    load_library(lib);
  }
  return out;
}

ModelArgs parse_model_args(const std::vector<std::string>& args, const std::vector<std::string>& flags,
                           const std::vector<std::string>& switches, bool model_optional,
                           const std::vector<std::string>& repeatable) {
  std::vector<OptionSpec> options;
  for (const std::string& f : flags) {
    auto s = short_names().find(f);
    options.push_back({f, s != short_names().end() ? s->second : "", "VALUE", description(f)});
  }
  for (const std::string& sw : switches) options.push_back({sw, "", "", description(sw)});
  return parse_options(args, current, current ? std::string("fxcpp ") + current->name : "fxcpp", "the model file",
                       options, model_optional, repeatable);
}

void check_output_path(const std::string& path, const std::string& option) {
  if (path.empty()) throw Error(option + " needs a file name");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) throw Error(path + ": is a directory (" + option + ")");
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw Error(path + ": no such directory '" + dir + "' (" + option + ")");
  if (::access(dir.c_str(), W_OK) != 0) throw Error(path + ": directory '" + dir + "' is not writable (" + option + ")");
}

}  // namespace fx::cli
