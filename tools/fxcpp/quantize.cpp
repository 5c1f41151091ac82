// fxcpp quantize MODEL --calibration DATA.pt [-o OUT.fx] [--skip NAME]...
// [--report] [--reference]: int8 post-training quantization in one call
// (fx::quantization::quantize: fuse + observers, a forward on every
// calibration batch, convert, lowering to oneDNN's int8 kernels), saved with
// fx::save. DATA.pt is written by plain torch.save: a tuple of forward
// arguments whose tensors hold calibration samples along dim 0, or a list of
// such tuples. With --qat, quantization-aware training instead (quantize_qat.cpp).
// Every error is one line, exit 2.
#include "command.h"
#include "model_io.h"
#include "quantize_io.h"

#include <fx/serialize.h>

#include <ATen/core/ivalue.h>

#include <iostream>

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
                                            bool lower) {
  fx::quantization::QuantizeOptions options;
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

namespace {

/// The report and the saved file, as both paths end.
int finish(const ModelArgs& args, GraphModule& q, const fx::quantization::QuantizeReport& report) {
  if (args.has("report")) std::cout << fx::quantization::format_report(report.nodes);
  std::cout << report.summary() << "\n";
  for (const std::string& w : report.warnings) std::cout << "note: " << w << "\n";
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
      argv, {"calibration", "output", "train", "epochs", "batch", "optimizer", "lr", "momentum", "freeze-bn-after"},
      {"report", "reference", "qat"}, /*model_optional=*/false, /*repeatable=*/{"skip"});
  if (args.has("output")) check_output_path(args.get("output"), "-o");
  fx::quantization::QuantizeReport report;
  if (args.has("qat")) {
    auto q = quantize_qat(args, report);
    return finish(args, *q, report);
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
  auto q = quantize_model(gm, batches, args.lists["skip"], &report, data, !args.has("reference"));
  gm.reset();
  return finish(args, *q, report);
}

}  // namespace

FX_COMMAND("quantize",
           "quantize MODEL (--calibration DATA.pt [--skip NAME]... | --qat --train DATA.pt [--epochs N] [--batch B] "
           "[--optimizer sgd|adam] [--lr X] [--momentum M] [--freeze-bn-after K]) [-o OUT.fx] [--report] [--reference]",
           "int8 quantization, post-training (prepare, calibrate, convert) or quantization-aware training "
           "(prepare_qat, train, convert), oneDNN int8 kernels, saved with fx::save",
           run_quantize);

}  // namespace fx::cli
