// fxcpp optimize MODEL -o OUT.fx [--input IN.pt] [--bf16]: fx::optimize_for_inference
// once, saved with fx::save (atomically), so a deployment loads the optimised
// module (fx::load: kernels and packed weights made for the loading CPU at its
// first forward) instead of optimising at every start. With --input, the
// optimiser knows the shapes (the residual sums fuse into the convolutions).
// With --aot, the generated kernels' compiled objects go into the file too
// (fx::SaveOptions::kernel_objects): a machine without a compiler runs them.
#include "command.h"
#include "model_io.h"
#include "optimize_io.h"

#include <fx/optimize/optimize_for_inference.h>
#include <fx/serialize.h>

#include <iostream>

namespace fx::cli {
namespace {

int run_optimize(const std::vector<std::string>& argv) {
  ModelArgs args = parse_model_args(argv, {"input", "output", "linear-kernel"}, {"bf16", "no-winograd", "no-fuse", "aot"});  // -i / -o as well
  if (!args.has("output")) throw Error("-o OUT.fx is required");
  const std::string out = args.get("output");
  check_output_path(out, "-o");
  std::shared_ptr<GraphModule> gm;
  OptimizeOptions options;
  if (args.has("input")) {
    auto [model, inputs] = import_model_with_inputs(args.model, args.get("input"));
    gm = std::move(model);
    options.example_inputs = std::move(inputs);
  } else {
    gm = import_model(args.model);
  }
  if (args.has("bf16")) options.dtype = at::kBFloat16;
  options.winograd = !args.has("no-winograd");
  options.fuse_kernels = !args.has("no-fuse");
  options.linear_kernel = linear_kernel_option(args.get("linear-kernel", "auto"));
  options.warm_up = false;  // kernels are made where the file is loaded, for that CPU
  set_activity("optimising " + args.model);
  OptimizeReport report;
  torch::NoGradGuard no_grad;
  auto opt = optimize_for_inference(gm, options, &report);
  print_warnings("optimize", report);
  gm.reset();  // the original parameters are not needed for saving
  set_activity("writing " + out);
  SaveOptions save_options;
  save_options.kernel_objects = args.has("aot");
  const SaveReport saved = save(*opt, out, save_options);
  std::cout << report_line(report) << "\n";
  for (const std::string& l : linear_choice_lines(report)) std::cout << l << "\n";
  std::cout << "wrote " << out << " (" << saved.bytes << " bytes, " << opt->graph().nodes().size() << " nodes, "
            << saved.storages << " storages";
  if (args.has("aot")) {
    std::cout << ", " << saved.kernel_objects << (saved.kernel_objects == 1 ? " kernel object" : " kernel objects");
    if (saved.kernel_objects) {
      std::cout << " for CPUs with";
      for (const std::string& isa : saved.kernel_object_isa) std::cout << " " << isa;
    }
  }
  std::cout << ")\n";
  return 0;
}

}  // namespace

FX_COMMAND("optimize", "optimize MODEL -o OUT.fx [--input IN.pt] [--bf16] [--linear-kernel auto|onednn|aten] [--aot]",
           "fx::optimize_for_inference once and save the result (fx::save): run, bench, inspect and draw take it",
           run_optimize);

}  // namespace fx::cli
