// fxcpp quantize --weight-only int8|int4 CHECKPOINT -o model.fx
// [--group-size G] [--asymmetric] [--max-seq L]: a LLaMA-family checkpoint
// folder captured as a decoder graph (fx::decoders::capture) with its linear
// layers' weights quantized (fx::quantize_weight_only), saved with fx::save:
// an ordinary .fx file that `fxcpp generate model.fx` decodes with, and
// that loads in C++ (fx::load) and Python (fxcpp.load).
#include "decoder_model.h"
#include "quantize_io.h"
#include "train_io.h"

#include <fx/decoders/capture.h>
#include <fx/decoders/quantize_weight_only.h>
#include <fx/serialize.h>

#include <cstdio>
#include <filesystem>

namespace fx::cli {

int run_weight_only_quantize(const ModelArgs& args) {
  if (!args.has("output")) throw Error("-o OUT.fx is required: where the quantized decoder goes");
  for (const char* ptq : {"calibration", "weight-bits", "train", "epochs", "batch", "optimizer", "lr", "momentum",
                          "freeze-bn-after"})
    if (args.has(ptq)) throw Error(std::string("--") + ptq + " is for int8 quantization of whole models, not --weight-only");
  if (args.has("qat")) throw Error("--qat and --weight-only are two kinds of quantization: choose one");
  if (!std::filesystem::is_directory(args.model))
    throw Error(args.model + ": not a folder; --weight-only reads a checkpoint folder (config.json and safetensors)");
  WeightOnlyOptions o;
  o.scheme = weight_only_scheme(args, "weight-only");
  for (const auto& s : args.lists.count("skip") ? args.lists.at("skip") : std::vector<std::string>{})
    o.skip.push_back(s);
  decoders::LlamaCacheOptions cache;
  cache.max_seq = args.get_int("max-seq", 0, /*min=*/0);
  set_activity("loading " + args.model);
  auto model = decoders::load_llama(args.model, cache);
  set_activity("capturing");
  auto gm = decoders::capture(model);
  set_activity("quantizing");
  WeightOnlyReport r;
  auto q = quantize_weight_only(gm, o, &r);
  const std::string out = args.get("output");
  set_activity("saving " + out);
  fx::save(*q, out);
  std::fprintf(stderr,
               "fxcpp quantize: %zu linear layers and %zu embedding table%s, weights %s MB -> %s MB (int%d, %s%s), "
               "kernel %s; %zu left; %s\n",
               r.layers, r.embeddings, r.embeddings == 1 ? "" : "s", format_number(static_cast<double>(r.bytes_before) / 1e6).c_str(),
               format_number(static_cast<double>(r.bytes_after) / 1e6).c_str(), o.scheme.bits,
               o.scheme.group_size ? ("group " + std::to_string(o.scheme.group_size)).c_str() : "per channel",
               o.scheme.symmetric ? "" : ", asymmetric", r.kernel.c_str(), r.left.size(), out.c_str());
  return 0;
}

}  // namespace fx::cli
