// The decoder fxcpp generate runs (decoder_model.h): a checkpoint folder as
// the C++ model (--engine eager) or captured, quantized and optimised
// (--engine fxcpp); a .fx file of a decoder graph as it is or optimised.
#include "decoder_model.h"

#include <fx/decoders/capture.h>
#include <fx/decoders/passes.h>
#include <fx/decoders/quantize_weight_only.h>
#include <fx/serialize.h>

#include <filesystem>

namespace fx::cli {

const std::vector<std::string> kDecoderFlags = {"engine", "quantize", "group-size"};
const std::vector<std::string> kDecoderSwitches = {"asymmetric", "bf16"};

decoders::WeightOnlyScheme weight_only_scheme(const ModelArgs& args, const std::string& flag) {
  decoders::WeightOnlyScheme s;
  const std::string bits = args.get(flag);
  if (bits == "int8")
    s.bits = 8;
  else if (bits == "int4")
    s.bits = 4;
  else
    throw Error("--" + flag + " must be int8 or int4, not '" + bits + "'");
  // int8 defaults to a scale per output channel, int4 to groups of 32 (llama.cpp's Q8_0 / Q4_0 blocks are 32).
  s.group_size = args.get_int("group-size", s.bits == 8 ? 0 : 32, /*min=*/0);
  if (s.group_size != 0 && s.group_size != 32 && s.group_size != 64 && s.group_size != 128)
    throw Error("--group-size must be 32, 64 or 128 (or 0 for int8: a scale per output channel), not " +
                std::to_string(s.group_size));
  if (s.bits == 4 && s.group_size == 0) throw Error("--group-size 0 (per channel) is for int8; int4 takes 32, 64 or 128");
  s.symmetric = !args.has("asymmetric");
  return s;
}

namespace {

std::string describe_scheme(const decoders::WeightOnlyScheme& s, const std::string& kernel) {
  return "int" + std::to_string(s.bits) + (s.group_size ? " group " + std::to_string(s.group_size) : " per channel") +
         (s.symmetric ? "" : " asymmetric") + " (" + kernel + ")";
}

OpenedDecoder decoder_from_graph(std::shared_ptr<GraphModule> gm, const ModelArgs& args, const std::string& engine) {
  std::string what = engine;
  if (args.has("quantize")) {
    if (engine != "fxcpp") throw Error("--quantize needs --engine fxcpp (the eager model computes in float32)");
    WeightOnlyOptions o;
    o.scheme = weight_only_scheme(args, "quantize");
    WeightOnlyReport r;
    set_activity("quantizing the weights");
    gm = quantize_weight_only(gm, o, &r);
    what += ", " + describe_scheme(o.scheme, r.kernel);
  }
  if (engine == "fxcpp") {
    set_activity("optimising");
    OptimizeOptions options;
    if (args.has("bf16")) options.dtype = at::kBFloat16;
    OptimizeReport report;
    gm = decoders::optimize_decoder(gm, options, &report);
    // bf16 where oneDNN has bf16 kernels (AVX-512 and later); elsewhere float32, and the report says why.
    if (args.has("bf16"))
      what += report.dtype == at::kBFloat16 ? ", bf16 (oneDNN)"
                                            : ", float32 (" + (report.warnings.empty() ? std::string("no bf16 kernels")
                                                                                       : report.warnings.front()) + ")";
    // Decoding reads the last position's logits only; teacher forcing reads them all.
    if (!args.has("teacher-forced")) decoders::keep_last_logits(*gm);
  }
  const decoders::DecoderSignature s = decoders::check_decoder(*gm);
  OpenedDecoder d;
  d.step = decoders::decoder_step(gm);
  d.reset = [gm] { decoders::reset_cache(*gm); };
  d.max_seq = s.max_seq;
  d.vocab_size = s.vocab_size;
  d.engine = what;
  return d;
}

}  // namespace

OpenedDecoder open_decoder(const ModelArgs& args, int64_t max_seq) {
  const std::string engine = args.get("engine", "fxcpp");
  if (engine != "fxcpp" && engine != "eager") throw Error("--engine must be fxcpp or eager, not '" + engine + "'");
  if (args.has("bf16") && engine != "fxcpp") throw Error("--bf16 needs --engine fxcpp (the eager model computes in float32)");
  if (args.has("bf16") && args.has("quantize"))
    throw Error("--bf16 and --quantize are two kinds of weights (bfloat16, int8 / int4): choose one");
  if (!args.has("quantize") && (args.has("group-size") || args.has("asymmetric")))
    throw Error("--group-size and --asymmetric choose how --quantize int8|int4 quantizes: add --quantize");
  namespace fs = std::filesystem;
  if (fs::is_directory(args.model)) {
    decoders::LlamaCacheOptions cache;
    cache.max_seq = max_seq;
    set_activity("loading " + args.model);
    auto model = decoders::load_llama(args.model, cache);
    if (engine == "fxcpp" || args.has("quantize")) {
      set_activity("capturing");
      return decoder_from_graph(decoders::capture(model), args, engine);
    }
    OpenedDecoder d;
    d.step = [model](const at::Tensor& tokens, const at::Tensor& input_pos) mutable {
      return model->forward(tokens, input_pos);
    };
    d.reset = [model]() mutable { model->reset_cache(); };
    d.max_seq = model->cache_options().max_seq;
    d.vocab_size = model->config().vocab_size;
    d.engine = "eager (libtorch, the C++ model)";
    return d;
  }
  if (fs::path(args.model).extension() == ".fx") {
    set_activity("loading " + args.model);
    auto gm = fx::load(args.model);
    const decoders::DecoderSignature s = decoders::check_decoder(*gm);
    if (max_seq > s.max_seq)
      throw Error(args.model + " holds " + std::to_string(s.max_seq) + " positions, --max-seq asks for " +
                  std::to_string(max_seq));
    return decoder_from_graph(gm, args, engine);
  }
  throw Error(args.model + ": not a checkpoint folder (config.json and safetensors) nor a decoder graph (.fx)");
}

}  // namespace fx::cli
