// fxcpp profile MODEL.pt --input IN.pt: time every node of an imported model
// (the profiling interpreter of torch.fx's documentation, for real): a table
// of the slowest nodes, a table per op type, and a Chrome trace JSON file.
// --optimize profiles fx::optimize_for_inference's graph (its oneDNN kernels
// are nodes like any other), --threads/--batch as in `fxcpp bench`.
#include "command.h"
#include "model_io.h"
#include "optimize_io.h"

#include <fx/passes/profiler.h>

#include <cstdio>
#include <iostream>

namespace fx::cli {
namespace {

int run_profile(const std::vector<std::string>& argv) {
  ModelArgs args = parse_model_args(argv, {"input", "top", "runs", "warmup", "trace", "threads", "batch", "linear-kernel"},
                                    {"optimize", "bf16", "no-winograd", "no-fuse"});
  if (!args.has("input")) throw Error("--input IN.pt is required");
  if (args.has("bf16") && !args.has("optimize")) throw Error("--bf16 goes with --optimize");
  for (const char* o : {"no-winograd", "no-fuse", "linear-kernel"})
    if (args.has(o) && !args.has("optimize")) throw Error(std::string("--") + o + " goes with --optimize");
  const LinearKernel linear = linear_kernel_option(args.get("linear-kernel", "auto"));
  set_threads(args);
  const int top = args.get_int("top", 20);
  const int runs = args.get_int("runs", 5);
  const int warmup = args.get_int("warmup", 2, /*min=*/0);
  const std::string trace_path = args.get("trace", args.model + ".trace.json");
  check_output_path(trace_path, "--trace");
  auto [gm, inputs] = import_model_with_inputs(args.model, args.get("input"));
  inputs = batched(inputs, args.get_int("batch", 1));
  torch::NoGradGuard no_grad;
  if (args.has("optimize")) {
    set_activity("optimising " + args.model + " for " + args.get("input"));
    OptimizeReport report;
    gm = optimize_model(gm, inputs, args.has("bf16"), &report, /*plan_memory=*/true, !args.has("no-winograd"),
                        linear, /*blocked=*/true, !args.has("no-fuse"));
    print_warnings("profile", report);
    std::cerr << "fxcpp profile: " << report_line(report) << "\n";
    for (const std::string& l : linear_choice_lines(report)) std::cerr << "fxcpp profile: " << l << "\n";
  }

  set_activity("running " + args.model + " on " + args.get("input"));
  ProfilingInterpreter interp(gm);
  try {
    for (int i = 0; i < warmup; ++i) interp.profile_run(inputs, /*record=*/false);
    for (int i = 0; i < runs; ++i) {
      set_activity("timed run " + std::to_string(i + 1) + " of " + std::to_string(runs) + " of " + args.model);
      interp.profile_run(inputs);
    }
  } catch (const std::exception& e) {
    return report_run_error("profile", args.model, args.get("input"), e);
  }
  double total_us = 0;
  for (const auto& kv : interp.node_us()) total_us += kv.second;
  std::printf("%s: %zu nodes, %d timed runs (after %d warm-up), %.3f ms per run in nodes\n\n", args.model.c_str(),
              gm->graph().nodes().size(), runs, warmup, total_us / 1e3 / runs);
  std::printf("top %d nodes\n%s", top, interp.report(static_cast<size_t>(top)).c_str());
  interp.write_chrome_trace(trace_path);
  std::printf("\nwrote %s (chrome://tracing or ui.perfetto.dev)\n", trace_path.c_str());
  return 0;
}

}  // namespace

FX_COMMAND("profile",
           "profile MODEL.pt --input IN.pt [--top N] [--runs N] [--warmup N] [--trace OUT.json] [--threads N] "
           "[--batch N] [--optimize [--bf16]]",
           "time every node of an imported model; write a Chrome trace", run_profile);

}  // namespace fx::cli
