// fxcpp quantize MODEL --calibration DATA.pt [-o OUT.fx] [--skip NAME]...
// [--weight-bits 7|8] [--report] [--reference]: int8 post-training quantization in one call
// (fx::quantization::quantize: fuse + observers, a forward on every
// calibration batch, convert, lowering to oneDNN's int8 kernels), saved with
// fx::save. DATA.pt is written by plain torch.save: a tuple of forward
// arguments whose tensors hold calibration samples along dim 0, or a list of
// such tuples. With --qat, quantization-aware training instead (quantize_qat.cpp).
// Every error is one line, exit 2.
#include "command.h"
#include "model_io.h"
#include "optimize_io.h"
#include "quantize_io.h"
#include "train_io.h"

#include <fx/onednn.h>
#include <fx/serialize.h>

#include <ATen/core/ivalue.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <limits>

namespace fx::cli {

c10::IValue calibration_example(const std::vector<fx::quantization::CalibrationBatch>& batches) {
  if (batches.empty()) throw Error("no calibration batches");
  return c10::ivalue::Tuple::create(batches.front());
}

void check_calibration(GraphModule& gm, const std::vector<fx::quantization::CalibrationBatch>& batches,
                       const std::string& path) {
  for (size_t i = 0; i < batches.size(); ++i) {
    const std::string where = batches.size() == 1 ? path : path + ": element " + std::to_string(i);
    model_inputs(gm, c10::ivalue::Tuple::create(batches[i]), where);
  }
}

std::shared_ptr<GraphModule> quantize_model(const std::shared_ptr<GraphModule>& gm,
                                            const std::vector<fx::quantization::CalibrationBatch>& batches,
                                            const std::vector<std::string>& skip,
                                            fx::quantization::QuantizeReport* report, const std::string& where,
                                            bool lower, int weight_bits) {
  fx::quantization::QuantizeOptions options;
  options.mapping = options.mapping.with_weight_bits(weight_bits);
  options.skip = skip;
  options.lower = lower;
  set_activity("quantizing (" + std::to_string(batches.size()) + " calibration batches)");
  try {
    return fx::quantization::quantize(gm, batches.empty() ? std::vector<c10::IValue>{} : batches.front(), batches,
                                      options, report);
  } catch (const fx::quantization::CalibrationError& e) {
    // The example inputs are the first batch: the file and the batch, one line.
    const size_t i = e.batch() == fx::quantization::CalibrationError::kExampleInputs ? 0 : e.batch();
    throw Error(where + ": calibration batch " + std::to_string(i) + " of " + std::to_string(batches.size()) +
                " does not run on the model: " + e.cause());
  } catch (const Error& e) {
    // "fxcpp quantize: skip 'x' ...", not "fxcpp quantize: quantize: skip 'x' ..."
    const std::string what = e.what();
    if (what.rfind("quantize: ", 0) == 0) throw Error(what.substr(10));
    throw;
  }
}

int weight_bits_arg(const ModelArgs& args) {
  if (!args.has("weight-bits")) return 8;
  const std::string v = args.get("weight-bits");
  if (v == "7" || v == "8") return v[0] - '0';
  throw Error("--weight-bits takes 7 or 8, got '" + v + "'");
}

namespace {

/// Where oneDNN has no int8 dot products (no VNNI / AMX), whether int8 pays
/// here: one line comparing the int8 module with `fp32` (the float model
/// optimised for inference), timed side by side on `inputs`: one forward of
/// each in turn, at least 3 rounds and until ~1 s has passed (at most 50), the
/// best of each.
std::string int8_against_float(GraphModule& int8, GraphModule& fp32, const std::vector<c10::IValue>& inputs,
                               const std::string& what) {
  at::NoGradGuard no_grad;
  auto ms = [&](GraphModule& m) {
    const auto start = std::chrono::steady_clock::now();
    m.forward(inputs);
    return ms_since(start);
  };
  ms(int8);  // kernels made, weights packed: not timed
  ms(fp32);
  double best_int8 = std::numeric_limits<double>::infinity(), best_fp32 = best_int8, spent = 0;
  for (int round = 0; round < 3 || (round < 50 && spent < 1000); ++round) {
    const double a = ms(int8), b = ms(fp32);
    best_int8 = std::min(best_int8, a);
    best_fp32 = std::min(best_fp32, b);
    spent += a + b;
  }
  char line[256];
  const double ratio = best_int8 / best_fp32;
  std::snprintf(line, sizeof line,
                "int8 against float32 here: %.3f ms against %.3f ms per forward of %s "
                "(float32 optimised by fxcpp): int8 is %.2fx %s",
                best_int8, best_fp32, what.c_str(), ratio >= 1 ? ratio : 1 / ratio, ratio >= 1 ? "slower" : "faster");
  return line;
}

/// The float model of `args.model` optimised for inference on `inputs`,
/// to time int8 against where there are no int8 dot products (no VNNI /
/// AMX), else null.
std::shared_ptr<GraphModule> float_to_compare(const ModelArgs& args, std::shared_ptr<GraphModule> gm,
                                              const fx::quantization::QuantizeReport& report,
                                              const std::vector<c10::IValue>& inputs, const std::string& data) {
  if (onednn::has_int8_dot_product() || !report.lowered) return nullptr;
  set_activity("optimising the float32 model to compare");
  if (!gm) {
    const c10::IValue example = c10::ivalue::Tuple::create(inputs);
    gm = import_model(args.model, nullptr, &example, false, data);
  }
  OptimizeReport ignored;
  return optimize_model(gm, inputs, /*bf16=*/false, &ignored);
}

/// The report and the saved file, as both paths end. `fp32`: the float
/// model optimised, where int8 is to be compared with it (no VNNI), else
/// null; `inputs` and `what` they are, to time both on.
int finish(const ModelArgs& args, GraphModule& q, const fx::quantization::QuantizeReport& report,
           const std::shared_ptr<GraphModule>& fp32 = nullptr, const std::vector<c10::IValue>& inputs = {},
           const std::string& what = "") {
  if (args.has("report")) std::cout << fx::quantization::format_report(report.nodes);
  std::cout << report.summary() << "\n";
  for (const std::string& w : report.warnings) std::cout << "note: " << w << "\n";
  if (fp32 && report.lower.int8_kernels > 0) {
    set_activity("timing int8 against float32");
    std::cout << "note: " << int8_against_float(q, *fp32, inputs, what) << "\n";
  }
  if (args.has("output")) {
    const std::string out = args.get("output");
    set_activity("writing " + out);
    const SaveReport saved = save(q, out);
    std::cout << "wrote " << out << " (" << saved.bytes << " bytes, " << q.graph().nodes().size() << " nodes, "
              << saved.storages << " storages)\n";
  }
  return 0;
}

/// --qat: train with fake quantization, then convert and lower as post-training quantize does.
std::shared_ptr<GraphModule> quantize_qat(const ModelArgs& args, fx::quantization::QuantizeReport& report) {
  if (!args.has("train")) throw Error("--qat needs --train DATA.pt: the (inputs, labels) to train on");
  if (args.has("calibration"))
    throw Error("--calibration is for post-training quantization: --qat measures ranges while it trains on --train");
  if (args.lists.count("skip") && !args.lists.at("skip").empty())
    throw Error("--skip is for post-training quantization (not with --qat)");
  auto qat = qat_train(args, report);
  set_activity("converting");
  return fx::quantization::convert_and_lower(qat, !args.has("reference"), report);
}

int run_quantize(const std::vector<std::string>& argv) {
  ModelArgs args = parse_model_args(
      argv,
      {"calibration", "output", "train", "epochs", "batch", "optimizer", "lr", "momentum", "freeze-bn-after",
       "weight-bits", "weight-only", "group-size", "max-seq"},
      {"report", "reference", "qat", "asymmetric"}, /*model_optional=*/false, /*repeatable=*/{"skip"});
  if (args.has("output")) check_output_path(args.get("output"), "-o");
  if (args.has("weight-only")) return run_weight_only_quantize(args);
  for (const char* decoder_only : {"group-size", "max-seq", "asymmetric"})
    if (args.has(decoder_only)) throw Error(std::string("--") + decoder_only + " is for --weight-only int8|int4");
  const int weight_bits = weight_bits_arg(args);
  fx::quantization::QuantizeReport report;
  if (args.has("qat")) {
    auto q = quantize_qat(args, report);
    // Without int8 dot products int8 may not pay: timed against the float
    // model (the one given, untrained: the same arithmetic) on one batch.
    std::vector<c10::IValue> inputs;
    std::shared_ptr<GraphModule> fp32;
    if (!onednn::has_int8_dot_product() && report.lowered) {
      const std::string path = args.get("train");
      const at::Tensor samples = load_training_data(path).inputs;
      inputs = {samples.slice(0, 0, std::min<int64_t>(args.get_int("batch", 32), samples.size(0)))};
      fp32 = float_to_compare(args, nullptr, report, inputs, path);
    }
    return finish(args, *q, report, fp32, inputs, "the first training batch");
  }
  for (const char* qat_only : {"train", "epochs", "batch", "optimizer", "lr", "momentum", "freeze-bn-after"})
    if (args.has(qat_only)) throw Error(std::string("--") + qat_only + " is for quantization-aware training: add --qat");
  if (!args.has("calibration")) throw Error("--calibration DATA.pt is required");
  const std::string data = args.get("calibration");
  set_activity("reading " + data);
  const auto batches = fx::quantization::load_calibration(data);
  const c10::IValue example = calibration_example(batches);
  auto gm = import_model(args.model, nullptr, &example, false, data);
  check_calibration(*gm, batches, data);
  auto q = quantize_model(gm, batches, args.lists["skip"], &report, data, !args.has("reference"), weight_bits);
  // Without int8 dot products int8 may not pay: measured against float32, optimised.
  std::shared_ptr<GraphModule> fp32 = float_to_compare(args, gm, report, batches.front(), data);
  gm.reset();
  return finish(args, *q, report, fp32, batches.front(), "the first calibration batch");
}

}  // namespace

FX_COMMAND("quantize",
           "quantize MODEL (--calibration DATA.pt [--skip NAME]... | --qat --train DATA.pt [--epochs N] [--batch B] "
           "[--optimizer sgd|adam] [--lr X] [--momentum M] [--freeze-bn-after K]) [--weight-bits 7|8] [-o OUT.fx] "
           "[--report] [--reference] | --weight-only int8|int4 CHECKPOINT [--group-size 32|64|128] [--asymmetric] "
           "[--max-seq L] [--skip NAME]... -o OUT.fx",
           "int8 quantization, post-training (prepare, calibrate, convert) or quantization-aware training "
           "(prepare_qat, train, convert), oneDNN int8 kernels, saved with fx::save; or a decoder LLM's weights "
           "alone (--weight-only: int8 per channel, int4 per group of 32 ...)",
           run_quantize);

}  // namespace fx::cli
