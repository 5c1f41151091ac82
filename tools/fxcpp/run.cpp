// fxcpp run MODEL.pt --input IN.pt [--output OUT.pt] [--optimize [--bf16]]
// [--quantize [--calibration DATA.pt]]: runs an imported model, or
// fx::optimize_for_inference's version of it, or its int8 quantization
// (calibrated on DATA.pt, or on the input itself).
// Bad inputs exit 2; a model failing while it runs exits 1, naming the node.
#include "command.h"
#include "model_io.h"
#include "optimize_io.h"
#include "quantize_io.h"

#include <fx/interpreter.h>
#include <fx/tensor_file.h>

#include <iostream>

namespace fx::cli {
namespace {

int run_run(const std::vector<std::string>& argv) {
  ModelArgs args =
      parse_model_args(argv, {"input", "output", "calibration", "linear-kernel"},
                       {"interpreter", "optimize", "bf16", "report", "specialize-shapes", "quantize", "no-winograd", "no-fuse"});
  if (!args.has("input")) throw Error("--input IN.pt is required");
  if (args.has("calibration") && !args.has("quantize")) throw Error("--calibration goes with --quantize");
  if (args.has("quantize") && args.has("optimize")) throw Error("--quantize and --optimize: give one of them");
  if ((args.has("bf16") || (args.has("report") && !args.has("quantize"))) && !args.has("optimize"))
    throw Error(std::string("--") + (args.has("bf16") ? "bf16" : "report") + " goes with --optimize");
  for (const char* o : {"no-winograd", "no-fuse", "linear-kernel"})
    if (args.has(o) && !args.has("optimize")) throw Error(std::string("--") + o + " goes with --optimize");
  const LinearKernel linear = linear_kernel_option(args.get("linear-kernel", "auto"));
  if (args.has("output")) check_output_path(args.get("output"), "--output");
  auto [gm, inputs] = import_model_with_inputs(args.model, args.get("input"), args.has("specialize-shapes"));
  torch::NoGradGuard no_grad;
  if (args.has("optimize")) {  // its errors (fx::Error) are one line from main.cpp
    set_activity("optimising " + args.model + " for " + args.get("input"));
    OptimizeReport report;
    // Moved in: the imported module (its original parameters) is freed
    // before the optimised one packs its weights.
    gm = optimize_model(std::move(gm), inputs, args.has("bf16"), &report, /*plan_memory=*/true,
                        !args.has("no-winograd"), linear, /*blocked=*/true, !args.has("no-fuse"));
    print_warnings("run", report);
    if (args.has("report") || progress_enabled()) {
      std::cerr << "fxcpp run: " << report_line(report) << "\n";
      for (const std::string& l : linear_choice_lines(report)) std::cerr << "fxcpp run: " << l << "\n";
    }
  }
  if (args.has("quantize")) {
    std::vector<fx::quantization::CalibrationBatch> batches{inputs};
    if (args.has("calibration")) {
      set_activity("reading " + args.get("calibration"));
      batches = fx::quantization::load_calibration(args.get("calibration"));
      check_calibration(*gm, batches, args.get("calibration"));
    } else {
      std::cerr << "fxcpp run: --quantize without --calibration: calibrated on the input itself\n";
    }
    fx::quantization::QuantizeReport report;
    gm = quantize_model(gm, batches, {}, &report, args.get("calibration", args.get("input")));
    if (args.has("report") || progress_enabled()) std::cerr << "fxcpp run: " << report.summary() << "\n";
  }
  c10::IValue out;
  try {
    set_activity("running " + args.model + " on " + args.get("input"));
    out = args.has("interpreter") ? Interpreter(gm).run(inputs) : gm->forward(inputs);
  } catch (const std::exception& e) {
    return report_run_error("run", args.model, args.get("input"), e);
  }
  describe_value(std::cout, out);
  if (args.has("output")) {
    save_value(args.get("output"), out);
    std::cout << "wrote " << args.get("output") << "\n";
  }
  return 0;
}

}  // namespace

FX_COMMAND("run",
           "run MODEL.pt --input IN.pt [--output OUT.pt] [--interpreter] [--specialize-shapes] [--optimize [--bf16] "
           "[--report]] [--quantize [--calibration DATA.pt]]",
           "run an imported model (or its fx::optimize_for_inference version) on torch.save'd inputs", run_run);

}  // namespace fx::cli
