// fxcpp bench-worker MODEL.pt --input IN.pt [--threads N] [--batch N]
// [--engine NAME]...: prepares TorchScript's optimize_for_inference
// ("torchscript_opt") and fxcpp's ("fxcpp_opt"), or the engines named, then
// times forwards on request, so that a driver can interleave them with
// another process's engine (scripts/bench_ort.py: ONNX Runtime under
// Node.js). Both processes stay loaded and warm; each waits on its pipe
// while the other runs.
//
// Protocol, one JSON object per line on stdout (nothing else goes there):
//   ready   {"ready": true, "flops": F, "threads": N, "batch": B, "inputs": "...",
//            "engines": [{"engine": K, "prepare_ms": P, "max_rel_diff": D}, ...]}
//           after every engine's first forward; max_rel_diff: max |out - eager| / max |eager|
//           against eager TorchScript (run once here, then dropped).
//   stdin "run ENGINE K"  K forwards of ENGINE  -> {"engine": ENGINE, "ms": [t1, ..., tK]}
//   stdin "quit" or end of input: exit 0.
// A bad request gets {"error": "..."} and the worker goes on.
#include "command.h"
#include "model_io.h"
#include "optimize_io.h"

#include <fx/import.h>
#include <fx/tensor_file.h>
#include <fx/passes/model_summary.h>
#include <fx/passes/shape_prop.h>

#include <torch/csrc/jit/api/module.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>

namespace fx::cli {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

/// max |out - ref| / max |ref| over the output tensors (a tensor, or a tuple / list of them).
double relative_diff(const c10::IValue& out, const c10::IValue& ref) {
  std::vector<at::Tensor> a, b;
  auto flatten = [](const c10::IValue& v, std::vector<at::Tensor>& into) {
    if (v.isTensor()) into.push_back(v.toTensor());
    else if (v.isTuple())
      for (const auto& e : v.toTupleRef().elements())
        if (e.isTensor()) into.push_back(e.toTensor());
  };
  flatten(out, a);
  flatten(ref, b);
  if (a.size() != b.size()) throw Error("the engines return different numbers of tensors");
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].sizes() != b[i].sizes()) throw Error("output " + std::to_string(i) + ": the shapes differ");
    if (b[i].numel() == 0) continue;
    const at::Tensor x = a[i].to(at::kDouble), y = b[i].to(at::kDouble);
    diff = std::max(diff, (x - y).abs().max().item<double>());
    scale = std::max(scale, y.abs().max().item<double>());
  }
  return scale > 0 ? diff / scale : diff;
}

struct WorkerEngine {
  std::function<c10::IValue()> forward;
  double prepare_ms = 0, max_rel_diff = 0;
};

/// Answers "run ENGINE K" / "quit" lines until the input ends.
void serve(std::map<std::string, WorkerEngine>& engines) {
  for (std::string line; std::getline(std::cin, line);) {
    std::istringstream in(line);
    std::string verb, name;
    long count = 0;
    in >> verb;
    if (verb.empty()) continue;
    if (verb == "quit") return;
    json reply;
    if (verb != "run" || !(in >> name >> count) || count < 1 || count > 100000) {
      reply = {{"error", "bad request '" + line + "' (expected 'run ENGINE K' or 'quit')"}};
    } else if (engines.count(name) == 0) {
      reply = {{"error", "engine '" + name + "' is not prepared"}};
    } else {
      std::vector<double> ms;
      for (long i = 0; i < count; ++i) {
        const auto t0 = Clock::now();
        engines[name].forward();
        ms.push_back(ms_since(t0));
      }
      reply = {{"engine", name}, {"ms", ms}};
    }
    std::cout << reply.dump() << std::endl;  // flushed: the driver waits for it
  }
}

int run_bench_worker(const std::vector<std::string>& argv) {
  ModelArgs args = parse_model_args(argv, {"input", "threads", "batch"}, {}, /*model_optional=*/false,
                                    /*repeatable=*/{"engine"});
  std::vector<std::string> wanted = args.lists["engine"];
  if (wanted.empty()) wanted = {"torchscript_opt", "fxcpp_opt"};
  for (const std::string& name : wanted)
    if (name != "torchscript_opt" && name != "fxcpp_opt")
      throw Error("--engine: unknown engine '" + name + "' (valid: torchscript_opt, fxcpp_opt)");
  if (!args.has("input")) throw Error("--input IN.pt is required");
  if (is_fx_model(args.model)) throw Error(args.model + ": bench-worker takes a TorchScript file");
  const int threads = set_threads(args);
  const int batch = args.get_int("batch", 1);
  torch::NoGradGuard no_grad;

  std::vector<c10::IValue> inputs;
  std::map<std::string, WorkerEngine> engines;
  json ready = {{"ready", true}, {"threads", threads}, {"batch", batch}, {"engines", json::array()}};
  try {
    set_activity("reading " + args.model);
    auto ts = std::make_shared<torch::jit::Module>(load_torchscript(args.model));
    ts->eval();
    ImportOptions import_options;
    import_options.example_inputs = fx::load_inputs(args.get("input"));
    std::shared_ptr<GraphModule> gm = import_torchscript(*ts, import_options);
    inputs = batched(load_model_inputs(*gm, args.get("input")), batch);
    const c10::IValue eager = ts->forward(inputs);
    try {
      ShapeProp(gm).propagate_meta(inputs);
    } catch (const std::exception&) {
      ShapeProp(gm).propagate(inputs);
    }
    ready["flops"] = summarize_model(*gm).total_flops;
    std::ostringstream shapes;
    for (const c10::IValue& v : inputs)
      if (v.isTensor()) shapes << v.toTensor().sizes();
    ready["inputs"] = shapes.str();
    for (const std::string& name : wanted) {
      if (engines.count(name)) continue;
      set_activity("preparing " + name + " of " + args.model);
      WorkerEngine e;
      const auto t0 = Clock::now();
      if (name == "torchscript_opt") {
        torch::jit::Module clone = ts->clone();
        clone.eval();
        auto opt = std::make_shared<torch::jit::Module>(torch::jit::freeze(clone));
        *opt = torch::jit::optimize_for_inference(*opt);
        e.forward = [opt, &inputs] { return opt->forward(inputs); };
      } else {
        OptimizeReport report;
        auto opt = optimize_model(gm, inputs, /*bf16=*/false, &report);
        e.forward = [opt, &inputs] { return opt->forward(inputs); };
      }
      e.prepare_ms = ms_since(t0);
      e.max_rel_diff = relative_diff(e.forward(), eager);
      ready["engines"].push_back({{"engine", name}, {"prepare_ms", e.prepare_ms}, {"max_rel_diff", e.max_rel_diff}});
      engines[name] = std::move(e);
    }
  } catch (const std::exception& e) {
    if (dynamic_cast<const Error*>(&e) != nullptr && !names_a_node(e)) throw;
    return report_run_error("bench-worker", args.model, args.get("input"), e);
  }
  std::cout << ready.dump() << std::endl;
  set_activity("serving timing requests for " + args.model);
  serve(engines);
  return 0;
}

}  // namespace

FX_COMMAND("bench-worker",
           "bench-worker MODEL.pt --input IN.pt [--threads N] [--batch N] [--engine torchscript_opt|fxcpp_opt]...",
           "prepare optimised engines, then time forwards on request (stdin; for scripts/bench_ort.py)",
           run_bench_worker);

}  // namespace fx::cli
