// fxcpp pipeline-plan MODEL --input IN.pt --stages N [-o DIR] [--bandwidth GB/s,...]:
// plans a pipeline in one process: cuts the model into N balanced stages
// (pipeline_split), measures each stage's time per microbatch and the bytes
// each boundary carries, and simulates the GPipe schedule over links of the
// given bandwidths (how the pipeline would scale across N machines). With
// -o DIR it writes the stages as DIR/stage_K.fx, so that each machine loads
// only its own (fxcpp pipeline DIR ...).
#include "command.h"
#include "distributed_io.h"
#include "model_io.h"
#include "optimize_io.h"

#include <fx/distributed.h>

#include <nlohmann/json.hpp>
#include <torch/csrc/autograd/grad_mode.h>

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <limits>
#include <sstream>

namespace fx::cli {
namespace {

namespace dist = fx::distributed;
using Clock = std::chrono::steady_clock;

int64_t value_bytes(const c10::IValue& v) {
  if (v.isTensor()) return v.toTensor().defined() ? v.toTensor().numel() * static_cast<int64_t>(v.toTensor().element_size()) : 0;
  int64_t total = 0;
  if (v.isTuple())
    for (const auto& e : v.toTupleRef().elements()) total += value_bytes(e);
  else if (v.isList())
    for (const auto& e : v.toListRef()) total += value_bytes(e);
  return total;
}

std::vector<double> parse_list(const std::string& text, const std::string& option) {
  std::vector<double> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      const double v = std::stod(item, &used);
      if (used != item.size() || !(v > 0)) throw std::invalid_argument("");
      out.push_back(v);
    } catch (const std::exception&) {
      throw Error("--" + option + " expects numbers > 0 separated by commas, got '" + text + "'");
    }
  }
  if (out.empty()) throw Error("--" + option + " expects at least one number");
  return out;
}

int run_plan(const std::vector<std::string>& argv) {
  ModelArgs args = parse_dist_args(
      "pipeline-plan", argv,
      {{"input", "IN.pt", "inputs file (torch.save of a tensor, or a tuple/list of them)"},
       {"stages", "N", "how many stages (machines)"},
       {"microbatches", "M", "microbatches per batch (default: the number of stages)"},
       {"batch", "B", "repeat the input along dim 0 to this batch (default 1: as saved)"},
       {"balance", "BY", "balance the stages by 'time' (profiled, default) or 'flops' (model summary)"},
       {"optimize", nullptr, "time each stage as fx::optimize_for_inference's version of it"},
       {"refine", "N", "rebalance N times on the stages' measured times (default 2 with --optimize, else 0)"},
       {"runs", "R", "timed runs; each time is the best (default 3)"},
       {"threads", "T", "intra-op threads (default 1)"},
       {"bandwidth", "GB/s,...", "link bandwidths to simulate, GB/s (default 0.125,1.25,12.5: 1, 10, 100 Gb Ethernet)"},
       {"latency-us", "US", "per-message link latency to simulate, microseconds (default 50)"},
       {"simulate-microbatches", "M,...",
        "also simulate batches of these many microbatches (of the same size; default: --microbatches only)"},
       {"output", "DIR", "write the stages to DIR/stage_K.fx (for fxcpp pipeline DIR)"},
       {"json", nullptr, "print the results as one JSON object"}});
  if (!args.has("input")) throw Error("--input IN.pt is required");
  if (!args.has("stages")) throw Error("--stages N is required");
  const int stages = args.get_int("stages", 1);
  const int microbatches = args.get_int("microbatches", stages);
  const int runs = args.get_int("runs", 3);
  const dist::Balance balance = dist::parse_balance(args.get("balance", "time"));
  const std::vector<double> bandwidths = parse_list(args.get("bandwidth", "0.125,1.25,12.5"), "bandwidth");
  const double latency_ms = args.has("latency-us") ? args.get_positive("latency-us", 50) / 1000.0 : 0.05;
  const int threads = set_threads(args);
  torch::NoGradGuard no_grad;
  auto [gm, raw_inputs] = import_model_with_inputs(args.model, args.get("input"));
  const std::vector<c10::IValue> inputs = batched(raw_inputs, args.get_int("batch", 1));
  const auto mbs = dist::split_microbatches(inputs, microbatches);
  const int64_t batch = dist::batch_size(inputs);

  set_activity("splitting " + args.model + " into " + std::to_string(stages) + " stages");
  dist::SplitOptions so;
  so.stages = stages;
  so.balance = balance;
  so.example_inputs = mbs[0];
  refine_on_measured_stages(so, args, stages);
  dist::PipelinePlan plan = dist::pipeline_split(gm, so);
  if (args.has("output")) {
    const std::string dir = args.get("output");
    ::mkdir(dir.c_str(), 0777);
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) throw Error(dir + ": cannot make the directory (--output)");
    for (const auto& s : plan.stages) {
      set_activity("writing stage " + std::to_string(s.index));
      dist::save_stage(s, dir + "/stage_" + std::to_string(s.index) + ".fx");
    }
  }

  // Time each stage per microbatch (best of the runs), and one process on the whole batch.
  std::vector<dist::PipelineStage> run_stages = plan.stages;
  std::shared_ptr<GraphModule> whole = gm;
  if (args.has("optimize")) {
    set_activity("optimising the stages");
    for (auto& s : run_stages) s = dist::optimize_stage(s);
    OptimizeReport r;
    whole = optimize_model(gm, inputs, false, &r);
  }
  set_activity("timing the stages");
  std::vector<double> stage_ms(static_cast<size_t>(stages), std::numeric_limits<double>::infinity());
  std::vector<double> bytes(static_cast<size_t>(stages), 0.0);  // boundary k -> k + 1; the last: the output
  double single_ms = std::numeric_limits<double>::infinity();
  for (int r = 0; r <= runs; ++r) {  // run 0 warms up
    std::vector<double> sum(static_cast<size_t>(stages), 0.0);
    std::vector<double> sent(static_cast<size_t>(stages), 0.0);
    for (const auto& mb : mbs) {
      std::vector<c10::IValue> args_k = mb;
      for (int k = 0; k < stages; ++k) {
        const auto t0 = Clock::now();
        c10::IValue y = run_stages[static_cast<size_t>(k)].module->forward(std::move(args_k));
        sum[static_cast<size_t>(k)] += ms_since(t0);
        sent[static_cast<size_t>(k)] += static_cast<double>(value_bytes(y));
        if (k + 1 < stages) args_k = dist::stage_inputs(run_stages[static_cast<size_t>(k + 1)], y);
      }
    }
    const auto t0 = Clock::now();
    whole->forward(inputs);
    const double whole_ms = ms_since(t0);
    if (r == 0) continue;
    single_ms = std::min(single_ms, whole_ms);
    for (int k = 0; k < stages; ++k) {
      stage_ms[static_cast<size_t>(k)] = std::min(stage_ms[static_cast<size_t>(k)], sum[static_cast<size_t>(k)] / static_cast<double>(mbs.size()));
      bytes[static_cast<size_t>(k)] = sent[static_cast<size_t>(k)] / static_cast<double>(mbs.size());
    }
  }
  double mx = 0, total = 0;
  for (double t : stage_ms) {
    mx = std::max(mx, t);
    total += t;
  }
  const double imbalance = total > 0 ? mx / (total / stages) : 1.0;

  // Simulated batches: --microbatches (measured), and --simulate-microbatches
  // more or fewer microbatches of the same size, one process's time scaled
  // by the samples.
  std::vector<int64_t> sim_microbatches = {microbatches};
  if (args.has("simulate-microbatches"))
    for (double m : parse_list(args.get("simulate-microbatches"), "simulate-microbatches"))
      if (static_cast<int64_t>(m) != microbatches) sim_microbatches.push_back(static_cast<int64_t>(m));
  const double rows_per_mb = static_cast<double>(batch) / static_cast<double>(microbatches);
  struct Row {
    double gbps;
    int64_t microbatches, batch;
    dist::SimulationResult sim;
  };
  std::vector<Row> rows;
  for (int64_t m : sim_microbatches) {
    for (double gbps : bandwidths) {
      dist::SimulationInput in;
      in.stage_ms = stage_ms;
      in.boundary_bytes = bytes;
      in.bandwidth = gbps * 1e9;
      in.latency_ms = latency_ms;
      in.microbatches = m;
      in.batch = static_cast<int64_t>(static_cast<double>(m) * rows_per_mb + 0.5);
      in.single_process_ms = single_ms * static_cast<double>(in.batch) / static_cast<double>(batch);
      rows.push_back({gbps, m, in.batch, dist::simulate_pipeline(in)});
    }
  }

  if (args.has("json")) {
    nlohmann::json j = {{"model", args.model}, {"stages", stages}, {"microbatches", microbatches}, {"batch", batch},
                        {"threads", threads}, {"optimize", args.has("optimize")}, {"balance", plan.balance},
                        {"cuts", plan.cuts}, {"split_imbalance", plan.imbalance()}, {"stage_ms", stage_ms},
                        {"boundary_bytes", bytes}, {"measured_imbalance", imbalance}, {"single_process_ms", single_ms},
                        {"latency_us", latency_ms * 1000}};
    nlohmann::json nodes = nlohmann::json::array();
    for (const auto& s : plan.stages) nodes.push_back(s.nodes);
    j["stage_nodes"] = nodes;
    nlohmann::json sims = nlohmann::json::array();
    for (const auto& r : rows)
      sims.push_back({{"gb_per_s", r.gbps}, {"microbatches", r.microbatches}, {"batch", r.batch},
                      {"batch_ms", r.sim.batch_ms}, {"throughput", r.sim.throughput},
                      {"bubble_fraction", r.sim.bubble_fraction}, {"speedup", r.sim.speedup},
                      {"steady_throughput", r.sim.steady_throughput}, {"link_ms", r.sim.link_ms}});
    j["simulation"] = sims;
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::printf("pipeline plan: %s in %d stages, batch %lld as %d microbatch%s, %d thread%s%s\n", args.model.c_str(), stages,
              static_cast<long long>(batch), microbatches, microbatches == 1 ? "" : "es", threads, threads == 1 ? "" : "s",
              args.has("optimize") ? ", optimised" : "");
  std::printf("split: balanced by %s over %lld positions (%lld can be cut), cuts at", plan.balance.c_str(),
              static_cast<long long>(plan.positions), static_cast<long long>(plan.cuttable));
  for (int64_t c : plan.cuts) std::printf(" %lld", static_cast<long long>(c));
  std::printf("\n\n%-6s %6s %14s %14s   %s\n", "stage", "nodes", "ms/microbatch", "sends/mb", "receives");
  for (int k = 0; k < stages; ++k) {
    const auto& s = plan.stages[static_cast<size_t>(k)];
    std::string ins;
    for (size_t i = 0; i < s.inputs.size() && i < 4; ++i) ins += (i ? ", " : "") + s.inputs[i];
    if (s.inputs.size() > 4) ins += ", ...";
    std::printf("%-6d %6lld %14.2f %14s   %s\n", k, static_cast<long long>(s.nodes), stage_ms[static_cast<size_t>(k)],
                format_bytes(bytes[static_cast<size_t>(k)]).c_str(), ins.c_str());
  }
  std::printf("\nstage time max/mean %.3f; one process: %.2f ms per batch (%.2f samples/s)\n", imbalance, single_ms,
              static_cast<double>(batch) / single_ms * 1000.0);
  std::printf("\nsimulated on %d machines, %.0f us latency per message (GPipe fill-drain per batch):\n"
              "%12s %6s %10s %12s %14s %8s %9s %18s\n",
              stages, latency_ms * 1000.0, "microbatches", "batch", "link GB/s", "batch ms", "samples/s", "bubble",
              "speedup", "streamed samples/s");
  for (const auto& r : rows)
    std::printf("%12lld %6lld %10.3g %12.2f %14.2f %7.1f%% %8.2fx %18.2f\n", static_cast<long long>(r.microbatches),
                static_cast<long long>(r.batch), r.gbps, r.sim.batch_ms, r.sim.throughput, 100.0 * r.sim.bubble_fraction,
                r.sim.speedup, r.sim.steady_throughput);
  if (args.has("output")) std::printf("\nwrote %s/stage_0.fx .. stage_%d.fx\n", args.get("output").c_str(), stages - 1);
  return 0;
}

}  // namespace

FX_COMMAND("pipeline-plan",
           "pipeline-plan MODEL --input IN.pt --stages N [--microbatches M] [--bandwidth GB/s,...] [-o DIR]",
           "split a model into balanced pipeline stages, time them, simulate N machines (and write stage files)",
           run_plan);

}  // namespace fx::cli
