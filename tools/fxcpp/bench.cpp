// fxcpp bench MODEL.pt|MODEL.fx --input IN.pt: eager TorchScript, TorchScript's
// optimize_for_inference, fxcpp's GraphModule::forward and fxcpp's
// optimize_for_inference (and its bf16 version) side by side, in one process,
// interleaved round-robin: one forward of each engine per round, after
// warm-up, so a busy machine slows every engine alike. Prints median and
// minimum ms, the ratio to TorchScript's optimize_for_inference, GFLOP/s
// (fx::summarize_model's FLOPs), and each output's max difference from eager
// TorchScript relative to its max |output|; --json prints one JSON object.
// --engine NAME (repeatable) runs only the engines named, and the process
// keeps only what they need, so its peak resident memory (reported at the
// end, VmHWM) is that of one engine when it runs alone.
// An fxcpp file (fx::save) runs its TorchScript engines on its export
// (fx::to_torchscript), or without them when it has no TorchScript form.
// --engine fxcpp_int8: fx::quantization::quantize (calibrated on the input,
// or on --calibration DATA.pt; fxcpp_int8_7bit: with 7-bit weights); --engine python_int8: Python's quantized
// TorchScript of the same model (--int8-torchscript FILE, written by
// python/quantize_baseline.py), run on the onednn quantized engine.
// fxcpp bench --roofline measures the matmul roofline instead.
#include "command.h"
#include "args.h"
#include "machine_info.h"
#include "model_io.h"
#include "optimize_io.h"
#include "quantize_io.h"

#include <fx/export.h>
#include <fx/import.h>
#include <fx/serialize.h>
#include <fx/tensor_file.h>
#include <fx/passes/model_summary.h>
#include <fx/passes/shape_prop.h>

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/csrc/jit/api/module.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>

#include <sys/resource.h>

namespace fx::cli {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;


/// One way of running the model.
struct Engine {
  std::string key;      ///< JSON name: "torchscript"
  std::string label;    ///< table name: "TorchScript"
  std::string prepare;  ///< what prepare_ms measured: "load", "freeze + optimize_for_inference" ...
  std::function<c10::IValue()> forward;
  double prepare_ms = 0;
  std::vector<double> samples;  ///< ms of each timed forward
  c10::IValue output;           ///< of the last forward
  double median_ms = 0, min_ms = 0, gflops = 0;
  std::optional<double> ratio;         ///< to TorchScript opt's median (when it runs)
  std::optional<double> max_rel_diff;  ///< from eager TorchScript (when it runs)
};

/// The --engine names, checked against engine_names().
std::vector<std::string> checked_engines(const std::vector<std::string>& names) {
  std::string valid;
  for (const std::string& n : engine_names()) valid += (valid.empty() ? "" : ", ") + n;
  for (const std::string& name : names)
    if (std::find(engine_names().begin(), engine_names().end(), name) == engine_names().end())
      throw Error("--engine: unknown engine '" + name + "' (valid: " + valid + ")");
  return names;
}

/// The process's peak resident set so far, MB: VmHWM of /proc/self/status,
/// this program image's own. getrusage's ru_maxrss is not: Linux carries it
/// across execve, so a child started by a large process (a Python script
/// that imported torch) reported its parent's peak when that was higher.
double peak_rss_mb() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;  // "VmHWM:  123456 kB"
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

Engine make_engine(std::string key, std::string label, std::string prepare, std::function<c10::IValue()> forward,
                   double prepare_ms) {
  Engine e;
  e.key = std::move(key);
  e.label = std::move(label);
  e.prepare = std::move(prepare);
  e.forward = std::move(forward);
  e.prepare_ms = prepare_ms;
  return e;
}

void flatten(const c10::IValue& v, std::vector<at::Tensor>& out) {
  if (v.isTensor()) {
    out.push_back(v.toTensor());
  } else if (v.isTuple()) {
    for (const auto& e : v.toTupleRef().elements()) flatten(e, out);
  } else if (v.isList()) {
    for (const auto& e : v.toListRef()) flatten(e, out);
  } else if (v.isGenericDict()) {
    for (const auto& kv : v.toGenericDict()) flatten(kv.value(), out);
  }
}

/// max |out - ref| / max |ref| over every tensor of the outputs.
double relative_diff(const c10::IValue& out, const c10::IValue& ref, const std::string& engine) {
  std::vector<at::Tensor> a, b;
  flatten(out, a);
  flatten(ref, b);
  if (a.size() != b.size())
    throw Error(engine + " returns " + std::to_string(a.size()) + " tensors, eager TorchScript " +
                std::to_string(b.size()));
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].sizes() != b[i].sizes())
      throw Error(engine + ": output tensor " + std::to_string(i) + " has another shape than eager TorchScript's");
    if (b[i].numel() == 0) continue;
    const at::Tensor x = a[i].to(at::kDouble), y = b[i].to(at::kDouble);
    diff = std::max(diff, (x - y).abs().max().item<double>());
    scale = std::max(scale, y.abs().max().item<double>());
  }
  return scale > 0 ? diff / scale : diff;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string shapes_of(const std::vector<c10::IValue>& inputs) {
  std::ostringstream os;
  for (size_t i = 0; i < inputs.size(); ++i) {
    os << (i ? ", " : "");
    if (inputs[i].isTensor()) os << inputs[i].toTensor().sizes() << " " << inputs[i].toTensor().scalar_type();
    else os << inputs[i].tagKind();
  }
  return os.str();
}

/// How long and how often to measure.
struct Schedule {
  int warmup = 2;       ///< untimed rounds
  int iters = 0;        ///< timed rounds (0: by `seconds`)
  double seconds = 2;   ///< time budget of the timed rounds
  int min_rounds = 3;   ///< fewest timed rounds with `seconds`
};

/// Warm-up, then rounds of one forward per engine (the first engine of a
/// round rotates, so no engine always runs right after another); returns the
/// number of timed rounds.
int measure(std::vector<Engine>& engines, const Schedule& s, const std::string& model) {
  const size_t n = engines.size();
  for (int w = 0; w < s.warmup; ++w) {
    set_activity("warm-up round " + std::to_string(w + 1) + " of " + model);
    for (Engine& e : engines) e.output = e.forward();
  }
  const auto start = Clock::now();
  int rounds = 0;
  while (s.iters > 0 ? rounds < s.iters
                     : (rounds < s.min_rounds || ms_since(start) < s.seconds * 1e3)) {
    set_activity("timed round " + std::to_string(rounds + 1) + " of " + model);
    for (size_t k = 0; k < n; ++k) {
      Engine& e = engines[(static_cast<size_t>(rounds) + k) % n];
      const auto t0 = Clock::now();
      e.output = e.forward();
      e.samples.push_back(ms_since(t0));
    }
    ++rounds;
  }
  return rounds;
}

/// The setup of a bench run, for the table header and the JSON object.
struct Setup {
  std::string model, input_shapes;
  int threads = 1, batch = 1, rounds = 0;
  Schedule schedule;
  BlasInfo blas;
  int64_t flops = 0;
  std::optional<OptimizeReport> report;  ///< when an fxcpp optimised engine runs
  double peak_rss_mb = 0;                ///< of the whole process, at the end
  /// For an fxcpp file: where the TorchScript engines come from, or why they did not run.
  std::string torchscript_from;
};

json report_json(const OptimizeReport& r) {
  return {{"optimize_ms", r.optimize_ms},        {"nodes_before", r.nodes_before},
          {"nodes_after", r.nodes_after},        {"frozen_modules", r.frozen_modules},
          {"folded_batch_norms", r.folded_batch_norms}, {"removed_noops", r.removed_noops},
          {"onednn_convs", r.onednn_convs},      {"onednn_linears", r.onednn_linears},
          {"onednn_matmuls", r.onednn_matmuls},  {"fused_post_ops", r.fused_post_ops},
          {"dtype", r.dtype == at::kBFloat16 ? "bfloat16" : "float32"}, {"cpu", r.cpu},
          {"aten_linears", r.aten_linears},      {"linear_choices", linear_choice_lines(r)},
          {"linear_note", r.linear_note},        {"warnings", r.warnings},
          {"fused_kernels", r.fused_groups},     {"fused_nodes", r.fused_nodes},
          {"kernels_compiled", r.kernels_compiled}, {"kernel_compile_ms", r.kernel_compile_ms}};
}

void print_json(const Setup& s, const std::vector<Engine>& engines) {
  json out = {{"model", s.model},
              {"inputs", s.input_shapes},
              {"threads", s.threads},
              {"batch", s.batch},
              {"blas", s.blas.kind},
              {"blas_path", s.blas.path},
              {"blas_core", s.blas.core},
              {"blas_warning", s.blas.warning},
              {"flops", s.flops},
              {"warmup_rounds", s.schedule.warmup},
              {"rounds", s.rounds},
              {"ratio_to", "torchscript_opt"},
              {"optimize", s.report ? report_json(*s.report) : json()},
              {"peak_rss_mb", s.peak_rss_mb},
              {"torchscript_from", s.torchscript_from.empty() ? json() : json(s.torchscript_from)},
              {"engines", json::array()}};
  auto or_null = [](const std::optional<double>& v) { return v ? json(*v) : json(); };
  for (const Engine& e : engines) {
    out["engines"].push_back({{"engine", e.key},
                              {"label", e.label},
                              {"median_ms", e.median_ms},
                              {"min_ms", e.min_ms},
                              {"ratio", or_null(e.ratio)},
                              {"gflops", e.gflops},
                              {"max_rel_diff", or_null(e.max_rel_diff)},
                              {"prepare_ms", e.prepare_ms},
                              {"prepare", e.prepare},
                              {"samples", e.samples.size()}});
  }
  std::cout << out.dump(1) << "\n";
}

void print_table(const Setup& s, const std::vector<Engine>& engines) {
  std::printf("%s: inputs %s, threads %d, BLAS %s (%s%s%s)\n", s.model.c_str(), s.input_shapes.c_str(), s.threads,
              s.blas.kind.c_str(), s.blas.path.empty() ? "-" : s.blas.path.c_str(),
              s.blas.core.empty() ? "" : ", core ", s.blas.core.c_str());
  std::printf("%.3f GFLOP per forward; %d timed rounds after %d warm-up, one forward of each engine per round\n\n",
              static_cast<double>(s.flops) / 1e9, s.rounds, s.schedule.warmup);
  std::printf("%-22s %10s %10s %9s %9s %10s %11s  %s\n", "engine", "median ms", "min ms", "/ TS-opt", "GFLOP/s",
              "max diff", "prepare ms", "(prepare)");
  char ratio[32], diff[32];
  for (const Engine& e : engines) {
    if (e.ratio) std::snprintf(ratio, sizeof ratio, "%9.3f", *e.ratio);
    else std::snprintf(ratio, sizeof ratio, "%8s\u2014", "");  // one column wide, three bytes
    if (e.max_rel_diff) std::snprintf(diff, sizeof diff, "%10.2e", *e.max_rel_diff);
    else std::snprintf(diff, sizeof diff, "%9s\u2014", "");
    std::printf("%-22s %10.3f %10.3f %s %9.2f %s %11.1f  (%s)\n", e.label.c_str(), e.median_ms, e.min_ms, ratio,
                e.gflops, diff, e.prepare_ms, e.prepare.c_str());
  }
  if (!s.torchscript_from.empty()) std::printf("\nTorchScript engines: %s\n", s.torchscript_from.c_str());
  if (s.report) {
    std::printf("\nfxcpp optimized: %s\n", report_line(*s.report).c_str());
    for (const std::string& l : linear_choice_lines(*s.report)) std::printf("fxcpp optimized: %s\n", l.c_str());
  }
  std::printf("\npeak resident memory of the process: %.1f MB (%s)\n", s.peak_rss_mb,
              engines.size() == 1 ? "this engine alone" : "these engines together");
}

/// fxcpp bench --roofline [--size N] [--threads N] [--seconds S] [--json].
int run_roofline(const ModelArgs& args, int threads) {
  if (!args.model.empty()) throw Error("--roofline takes no MODEL");
  const int n = args.get_int("size", 1024);
  set_activity("timing " + std::to_string(n) + "^3 matmuls");
  const std::vector<MatmulRate> rates = matmul_roofline(n, args.get_positive("seconds", 0.5));
  const BlasInfo blas = loaded_blas();
  if (args.has("json")) {
    json out = {{"roofline", true},
                {"size", n},
                {"threads", threads},
                {"blas", blas.kind},
                {"blas_path", blas.path},
                {"blas_core", blas.core},
                {"blas_warning", blas.warning},
                {"fp32_gflops", best_rate(rates, "fp32")},
                {"bf16_gflops", best_rate(rates, "bf16")},
                {"paths", json::array()}};
    for (const MatmulRate& r : rates)
      out["paths"].push_back({{"dtype", r.dtype}, {"path", r.path}, {"gflops", r.gflops}, {"reps", r.reps}});
    std::cout << out.dump(1) << "\n";
    return 0;
  }
  if (!blas.warning.empty()) std::cerr << "fxcpp bench: warning: " << blas.warning << "\n";  // --json: blas_warning
  std::printf("matmul roofline: %dx%dx%d, threads %d, BLAS %s (%s%s%s)\n", n, n, n, threads, blas.kind.c_str(),
              blas.path.empty() ? "-" : blas.path.c_str(), blas.core.empty() ? "" : ", core ", blas.core.c_str());
  for (const MatmulRate& r : rates)
    std::printf("  %-5s %-22s %8.1f GFLOP/s  (best of %d)\n", r.dtype.c_str(), r.path.c_str(), r.gflops, r.reps);
  std::printf("roofline: fp32 %.1f GFLOP/s, bf16 %.1f GFLOP/s\n", best_rate(rates, "fp32"), best_rate(rates, "bf16"));
  return 0;
}

/// Prepares the engines named in `wanted` (engine_names()' order), keeping
/// only what they need: eager TorchScript's module only for "torchscript",
/// the imported GraphModule only for "fxcpp" (it is imported anyway: the
/// inputs are checked against it and the FLOPs counted on it), the
/// optimised ones alone for "fxcpp_opt" / "fxcpp_opt_bf16".
std::vector<Engine> prepare_engines(const ModelArgs& args, const std::vector<std::string>& wanted, Setup& setup,
                                    std::vector<c10::IValue>& inputs) {
  auto want = [&](const std::string& key) { return std::find(wanted.begin(), wanted.end(), key) != wanted.end(); };
  std::vector<std::optional<Engine>> slots(engine_names().size());  // by engine_names() index
  std::shared_ptr<torch::jit::Module> ts;
  std::shared_ptr<GraphModule> gm;
  double ts_ms = 0, fx_ms = 0;
  const bool fx_file = is_fx_model(args.model);
  if (fx_file) {
    // An fxcpp file: the TorchScript engines run its export (fx::to_torchscript),
    // or are left out, with the reason, when the graph has no TorchScript form.
    set_activity("reading " + args.model);
    const auto t0 = Clock::now();
    gm = load(args.model);
    fx_ms = ms_since(t0);
    if (want("torchscript") || want("torchscript_opt")) {
      set_activity("exporting " + args.model + " to TorchScript");
      const auto t0 = Clock::now();
      try {
        ts = std::make_shared<torch::jit::Module>(to_torchscript(*gm));
        ts->eval();
        ts_ms = ms_since(t0);
        setup.torchscript_from = "fx::to_torchscript of the fxcpp file";
      } catch (const ExportError& e) {
        setup.torchscript_from = std::string("not run: the graph has no TorchScript form (") + e.what() + ")";
      }
    }
  } else {
    set_activity("reading " + args.model);
    auto t0 = Clock::now();
    ts = std::make_shared<torch::jit::Module>(load_torchscript(args.model));
    ts->eval();
    ts_ms = ms_since(t0);
    set_activity("importing " + args.model);
    t0 = Clock::now();
    // Imported as `fxcpp run` does: the inputs' ranks and dtypes fold.
    ImportOptions import_options;
    import_options.example_inputs = fx::load_inputs(args.get("input"));
    gm = import_torchscript(*ts, import_options);
    fx_ms = ms_since(t0);
  }
  if (want("torchscript") && ts)
    slots[0] = make_engine("torchscript", "TorchScript", fx_file ? "export" : "load",
                           [ts, &inputs] { return ts->forward(inputs); }, ts_ms);
  if (want("fxcpp"))
    slots[2] = make_engine("fxcpp", "fxcpp", fx_file ? "load" : "import",
                           [gm, &inputs] { return gm->forward(inputs); }, fx_ms);
  inputs = batched(load_model_inputs(*gm, args.get("input")), setup.batch);
  setup.input_shapes = shapes_of(inputs);

  if (want("torchscript_opt") && ts) {
    set_activity("freezing and optimising " + args.model + " with TorchScript");
    const auto t0 = Clock::now();
    torch::jit::Module clone = ts->clone();
    clone.eval();
    auto ts_opt = std::make_shared<torch::jit::Module>(torch::jit::freeze(clone));
    *ts_opt = torch::jit::optimize_for_inference(*ts_opt);
    slots[1] = make_engine("torchscript_opt", "TorchScript opt", "freeze + optimize_for_inference",
                           [ts_opt, &inputs] { return ts_opt->forward(inputs); }, ms_since(t0));
  }
  ts.reset();  // eager TorchScript's module lives on in its engine only

  set_activity("counting FLOPs of " + args.model);
  // On meta tensors; a model whose control flow depends on the data
  // (detection) from one real run.
  try {
    ShapeProp(gm).propagate_meta(inputs);
  } catch (const std::exception&) {
    ShapeProp(gm).propagate(inputs);
  }
  setup.flops = summarize_model(*gm).total_flops;

  // int8: fxcpp's quantization, and Python's quantized TorchScript of the model.
  // fxcpp_int8_7bit: weights quantized to 7 bits, which oneDNN's int8 kernels run without VNNI.
  // The calibration data is read once for both; each engine's prepare time includes reading it.
  std::vector<fx::quantization::CalibrationBatch> batches{inputs};
  double read_ms = 0;
  if ((want("fxcpp_int8") || want("fxcpp_int8_7bit")) && args.has("calibration")) {
    const auto t0 = Clock::now();
    set_activity("reading " + args.get("calibration"));
    batches = fx::quantization::load_calibration(args.get("calibration"));
    check_calibration(*gm, batches, args.get("calibration"));
    read_ms = ms_since(t0);
  }
  for (const auto& [slot, weight_bits] : {std::pair<size_t, int>{6, 8}, {11, 7}}) {
    if (!want(engine_names()[slot])) continue;
    const auto t0 = Clock::now();
    fx::quantization::QuantizeReport report;
    auto q = quantize_model(gm, batches, {}, &report, args.get("calibration", args.get("input")), true, weight_bits);
    slots[slot] = make_engine(engine_names()[slot], weight_bits == 8 ? "fxcpp int8" : "fxcpp int8 7-bit",
                              "quantize" + std::string(weight_bits == 8 ? "" : " --weight-bits 7") + ", " +
                                  std::to_string(batches.size()) + " calibration batch" +
                                  (batches.size() == 1 ? "" : "es"),
                              [q, &inputs] { return q->forward(inputs); }, read_ms + ms_since(t0));
  }
  if (want("python_int8")) {
    if (!args.has("int8-torchscript"))
      throw Error("--engine python_int8 needs --int8-torchscript FILE (python/quantize_baseline.py)");
    set_activity("reading " + args.get("int8-torchscript"));
    const auto t0 = Clock::now();
    at::globalContext().setQEngine(at::QEngine::ONEDNN);  // as Python quantized it
    auto py = std::make_shared<torch::jit::Module>(load_torchscript(args.get("int8-torchscript")));
    py->eval();
    slots[7] = make_engine("python_int8", "Python int8 (TS)", "load",
                           [py, &inputs] { return py->forward(inputs); }, ms_since(t0));
  }

  // The optimised engines: fp32, bf16, and fp32 without the memory plan,
  // without Winograd convolutions or with every linear layer on oneDNN
  // (only when asked for: they measure what the plan, Winograd and the
  // timed choice of linear kernels are worth).
  struct Variant {
    size_t slot;
    bool bf16, plan_memory, winograd;
    LinearKernel linear;
    const char *label, *prepare;
    bool blocked = true, fuse = true;
  };
  const LinearKernel automatic = LinearKernel::Auto;
  const Variant variants[] = {
      {3, false, true, true, automatic, "fxcpp optimized", "optimize_for_inference"},
      {4, true, true, true, automatic, "fxcpp optimized bf16", "optimize_for_inference bf16"},
      {5, false, false, true, automatic, "fxcpp opt, no mem plan", "optimize_for_inference, plan_memory off"},
      {8, false, true, false, automatic, "fxcpp opt, direct conv", "optimize_for_inference, winograd off"},
      {9, false, true, true, LinearKernel::OneDnn, "fxcpp opt, oneDNN linear",
       "optimize_for_inference, every linear on oneDNN"},
      {10, false, true, true, automatic, "fxcpp opt, NHWC only", "optimize_for_inference, blocked_activations off",
       false},
      {12, false, true, true, automatic, "fxcpp opt, no fusion", "optimize_for_inference, fuse_kernels off", true,
       false}};
  size_t optimised_left = 0;
  for (const Variant& v : variants) optimised_left += want(engine_names()[v.slot]) ? 1 : 0;
  for (const Variant& v : variants) {
    if (!want(engine_names()[v.slot])) continue;
    set_activity("optimising " + args.model + " with fxcpp (" + v.prepare + ")");
    const auto t0 = Clock::now();
    OptimizeReport report;
    // Its last use moves the imported module in: its parameters are freed
    // before the optimised module packs its weights (optimize_model).
    const bool last_use = !want("fxcpp") && --optimised_left == 0;
    auto opt = optimize_model(last_use ? std::move(gm) : gm, inputs, v.bf16, &report, v.plan_memory, v.winograd,
                              v.linear, v.blocked, v.fuse);
    if (!args.has("json")) print_warnings("bench", report);  // --json: in its "optimize" object
    if (!setup.report) {
      setup.report = report;  // fp32's when it runs
    } else {
      for (const std::string& w : report.warnings)  // bf16's, where this CPU has no bf16 kernels
        if (std::find(setup.report->warnings.begin(), setup.report->warnings.end(), w) == setup.report->warnings.end())
          setup.report->warnings.push_back(w);
    }
    slots[v.slot] = make_engine(engine_names()[v.slot], v.label, v.prepare,
                                [opt, &inputs] { return opt->forward(inputs); }, ms_since(t0));
  }
  gm.reset();  // the imported module lives on in its engine only
  std::vector<Engine> engines;
  for (auto& e : slots)
    if (e) engines.push_back(std::move(*e));
  return engines;
}

int run_bench(const std::vector<std::string>& argv) {
  ModelArgs args = parse_model_args(
      argv, {"input", "threads", "batch", "iters", "seconds", "min-rounds", "warmup", "size", "calibration",
             "int8-torchscript"},
      {"bf16", "json", "roofline"}, /*model_optional=*/true, /*repeatable=*/{"engine"});
  std::vector<std::string> wanted = checked_engines(args.lists["engine"]);
  const int threads = set_threads(args);
  if (args.has("roofline")) {
    if (!wanted.empty()) throw Error("--engine goes with a MODEL, not --roofline");
    return run_roofline(args, threads);
  }
  if (args.model.empty()) throw Error("no model file given (MODEL)");
  if (!args.has("input")) throw Error("--input IN.pt is required");
  if (args.has("iters") && args.has("seconds")) throw Error("--iters and --seconds: give one of them");
  if (args.has("size")) throw Error("--size goes with --roofline");
  if (wanted.empty()) wanted = {"torchscript", "torchscript_opt", "fxcpp", "fxcpp_opt"};
  if (args.has("bf16")) wanted.push_back("fxcpp_opt_bf16");
  Setup setup;
  setup.model = args.model;
  setup.threads = threads;
  setup.batch = args.get_int("batch", 1);
  setup.schedule.warmup = args.get_int("warmup", 2, /*min=*/0);
  setup.schedule.iters = args.has("iters") ? args.get_int("iters", 1) : 0;
  setup.schedule.seconds = args.get_positive("seconds", 2);
  setup.schedule.min_rounds = args.get_int("min-rounds", 3);

  torch::NoGradGuard no_grad;
  std::vector<c10::IValue> inputs;
  std::vector<Engine> engines;
  try {
    engines = prepare_engines(args, wanted, setup, inputs);
    setup.rounds = measure(engines, setup.schedule, args.model);
  } catch (const std::exception& e) {
    // fx's own errors before a node runs (a bad file, bad inputs, --batch) name their problem
    if (dynamic_cast<const Error*>(&e) != nullptr && !names_a_node(e)) throw;
    return report_run_error("bench", args.model, args.get("input"), e);
  }
  setup.blas = loaded_blas();
  // --json: in its "blas_warning"
  if (!setup.blas.warning.empty() && !args.has("json"))
    std::cerr << "fxcpp bench: warning: " << setup.blas.warning << "\n";
  setup.peak_rss_mb = peak_rss_mb();
  auto find = [&](const char* key) {
    auto it = std::find_if(engines.begin(), engines.end(), [&](const Engine& e) { return e.key == key; });
    return it == engines.end() ? nullptr : &*it;
  };
  const Engine* ts = find("torchscript");
  const Engine* ts_opt = find("torchscript_opt");
  const double ts_opt_ms = ts_opt ? median(ts_opt->samples) : 0;
  for (Engine& e : engines) {
    e.median_ms = median(e.samples);
    e.min_ms = e.samples.empty() ? 0 : *std::min_element(e.samples.begin(), e.samples.end());
    if (ts_opt) e.ratio = ts_opt_ms > 0 ? e.median_ms / ts_opt_ms : 0;
    e.gflops = e.median_ms > 0 ? static_cast<double>(setup.flops) / (e.median_ms * 1e6) : 0;
    if (ts) e.max_rel_diff = relative_diff(e.output, ts->output, e.label);
  }
  if (args.has("json")) print_json(setup, engines);
  else print_table(setup, engines);
  return 0;
}

}  // namespace

const std::vector<std::string>& engine_names() {
  static const std::vector<std::string> names = {"torchscript", "torchscript_opt", "fxcpp", "fxcpp_opt",
                                                 "fxcpp_opt_bf16", "fxcpp_opt_unplanned", "fxcpp_int8", "python_int8",
                                                 "fxcpp_opt_direct", "fxcpp_opt_onednn_linear", "fxcpp_opt_nhwc",
                                                 "fxcpp_int8_7bit", "fxcpp_opt_nofuse"};
  return names;
}

FX_COMMAND("bench",
           "bench MODEL.pt|MODEL.fx --input IN.pt [--threads N] [--batch N] [--iters N | --seconds S [--min-rounds N]] "
           "[--warmup N] [--engine NAME]... [--bf16] [--calibration DATA.pt] [--int8-torchscript FILE] [--json] | "
           "bench --roofline [--size N] [--threads N] "
           "[--seconds S] [--json]",
           "time TorchScript, its optimize_for_inference, fxcpp and fxcpp optimised, interleaved", run_bench);

}  // namespace fx::cli
