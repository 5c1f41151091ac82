// fxcpp pipeline MODEL --input IN.pt --stages N [--microbatches M] [--optimize] ...:
// pipeline-parallel inference of a model over N ranks (c10d ProcessGroupGloo).
// Under `fxcpp launch --nproc N` the ranks are local; without it, each rank
// joins the rendezvous of its environment (MASTER_ADDR, MASTER_PORT, RANK,
// WORLD_SIZE), so the stages can run on separate machines. Rank 0 imports
// the model, balances the stages on one microbatch and publishes the cuts;
// every rank rebuilds its own stage from the same file (fingerprints
// compared) or loads it from a directory of stage files (fxcpp pipeline-plan
// -o DIR). Rank 0 feeds the microbatches and prints the output and where
// each rank's time went; --check compares the output, bit for bit, with one
// process running the same microbatches.
#include "command.h"
#include "distributed_io.h"
#include "model_io.h"
#include "optimize_io.h"

#include <fx/distributed.h>
#include <fx/tensor_file.h>

#include <nlohmann/json.hpp>
#include <torch/csrc/autograd/grad_mode.h>

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <numeric>
#include <optional>

namespace fx::cli {
namespace {

namespace dist = fx::distributed;
using Clock = std::chrono::steady_clock;

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string stage_file(const std::string& dir, int k) { return dir + "/stage_" + std::to_string(k) + ".fx"; }

const std::vector<DistOption>& pipeline_options() {
  static const std::vector<DistOption> o = {
      {"input", "IN.pt", "inputs file (torch.save of a tensor, or a tuple/list of them); read by rank 0"},
      {"stages", "N", "pipeline stages, one per rank (WORLD_SIZE)"},
      {"microbatches", "M", "microbatches per batch (default: the number of stages)"},
      {"batch", "B", "repeat the input along dim 0 to this batch (default 1: as saved)"},
      {"balance", "BY", "balance the stages by 'time' (profiled, default) or 'flops' (model summary)"},
      {"optimize", nullptr, "run each stage as fx::optimize_for_inference's version of it"},
      {"refine", "N", "rebalance N times on the stages' measured times as they run (default 2 with --optimize, else 0)"},
      {"runs", "R", "timed batches (default 1)"},
      {"stream", "K", "each run streams K batches through the pipeline without draining between them (default 1)"},
      {"warmup", "W", "untimed batches first (default 1)"},
      {"threads", "T", "intra-op threads per rank (default 1)"},
      {"timeout", "SECONDS", "how long a rank waits for a peer (default 300, FXCPP_DIST_TIMEOUT)"},
      {"check", nullptr, "compare the output bit for bit with one process on the same microbatches"},
      {"output", "OUT.pt", "write the output (torch.load-able)"},
      {"json", nullptr, "print the results as one JSON object"},
  };
  return o;
}

/// A stage's description on rank 0, for the report.
struct StageInfo {
  int64_t nodes = 0;
  double cost = 0;
  std::string balance;
  int64_t input_bytes = 0, output_bytes = 0;
};

int run_pipeline_command(const std::vector<std::string>& argv) {
  RankInfo rank;
  try {
    ModelArgs args = parse_dist_args("pipeline", argv, pipeline_options());
    if (!args.has("stages")) throw Error("--stages N is required");
    const int stages = args.get_int("stages", 1);
    const int microbatches = args.get_int("microbatches", stages);
    const int runs = args.get_int("runs", 1);
    const int stream = args.get_int("stream", 1);
    const int warmup = args.get_int("warmup", 1, 0);
    const dist::Balance balance = dist::parse_balance(args.get("balance", "time"));
    if (args.has("output")) check_output_path(args.get("output"), "--output");
    const int threads = set_threads(args);
    join_ranks(rank, args, stages, "--stages " + std::to_string(stages), "pipeline");
    torch::NoGradGuard no_grad;
    const bool from_files = is_directory(args.model);

    // This rank's stage (and, on rank 0, the inputs and the reference model).
    dist::PipelineStage stage;
    std::vector<c10::IValue> inputs;
    std::shared_ptr<GraphModule> model;               // rank 0: the whole model (reference)
    std::vector<dist::PipelineStage> all_stages;      // rank 0, stage files: every stage (reference)
    std::vector<StageInfo> infos(static_cast<size_t>(stages));
    std::string split_line;
    if (from_files) {
      set_activity("reading " + stage_file(args.model, rank.rank));
      stage = dist::load_stage(stage_file(args.model, rank.rank));
      if (stage.num_stages != stages)
        throw SharedError(stage_file(args.model, rank.rank) + " is a stage of a " + std::to_string(stage.num_stages) +
                          "-stage pipeline, not of " + std::to_string(stages));
      if (stage.index != rank.rank)
        throw Error(stage_file(args.model, rank.rank) + " holds stage " + std::to_string(stage.index) + ", not " +
                    std::to_string(rank.rank));
      // Every stage file must come from the same model and split as rank 0's.
      if (rank.group) {
        const std::string mine = stage.model_fingerprint + " " + stage.split_id;
        if (rank.rank == 0) {
          rank.group->set("stagefile", mine);
          for (int r = 1; r < rank.world; ++r) {
            const std::string v = rank.group->get("stagefile/" + std::to_string(r), "rank " + std::to_string(r) + "'s stage file");
            if (v != "ok") throw Error(v);
          }
        } else {
          const std::string theirs = rank.group->get("stagefile", "rank 0's stage file");
          std::string verdict = "ok";
          if (theirs.substr(0, theirs.find(' ')) != stage.model_fingerprint)
            verdict = stage_file(args.model, rank.rank) + " was split from another model than rank 0's " +
                      stage_file(args.model, 0) + " (model fingerprints " + stage.model_fingerprint.substr(0, 12) +
                      " and " + theirs.substr(0, 12) + ")";
          else if (theirs != mine)
            verdict = stage_file(args.model, rank.rank) + " is from another split of the model than rank 0's " +
                      stage_file(args.model, 0) + " (split " + stage.split_id + ", rank 0's " + theirs.substr(theirs.find(' ') + 1) + ")";
          rank.group->set("stagefile/" + std::to_string(rank.rank), verdict);
          if (verdict != "ok") throw SharedError(verdict);
        }
      }
      if (rank.rank == 0) {
        if (!args.has("input")) throw Error("--input IN.pt is required");
        inputs = batched(load_model_inputs(*stage.module, args.get("input")), args.get_int("batch", 1));
        for (int k = 0; k < stages; ++k) {
          dist::PipelineStage s = k == 0 ? stage : dist::load_stage(stage_file(args.model, k));
          infos[static_cast<size_t>(k)] = {s.nodes, s.cost, s.balance, s.input_bytes, s.output_bytes};
          if (args.has("check")) all_stages.push_back(std::move(s));
        }
        split_line = "stage files " + args.model + "/stage_*.fx (split " + stage.split_id + ")";
      }
    } else {
      auto imported = import_on_every_rank(args, rank);
      model = imported.first;
      inputs = std::move(imported.second);
      const auto mbs = dist::split_microbatches(inputs, microbatches);
      dist::SplitOptions so;
      so.stages = stages;
      so.balance = balance;
      so.example_inputs = mbs[0];
      if (rank.rank == 0) {
        set_activity("splitting " + args.model + " into " + std::to_string(stages) + " stages (balanced by " +
                     dist::to_string(balance) + ")");
        refine_on_measured_stages(so, args, stages);
        dist::PipelinePlan plan = dist::pipeline_split(model, so);
        if (rank.group) {
          nlohmann::json j = {{"cuts", plan.cuts}, {"split", plan.split_id}};
          rank.group->set("plan", j.dump());
        }
        for (int k = 0; k < stages; ++k) {
          const auto& s = plan.stages[static_cast<size_t>(k)];
          infos[static_cast<size_t>(k)] = {s.nodes, s.cost, s.balance, s.input_bytes, s.output_bytes};
        }
        stage = plan.stages[0];
        if (args.has("check") && args.has("optimize")) all_stages = plan.stages;
        char buf[160];
        if (stages == 1)
          std::snprintf(buf, sizeof buf, "one stage: the whole model (%lld call nodes)", static_cast<long long>(plan.positions));
        else
          std::snprintf(buf, sizeof buf, "balanced by %s over %lld positions (%lld can be cut): max/mean stage cost %.3f",
                        plan.balance.c_str(), static_cast<long long>(plan.positions), static_cast<long long>(plan.cuttable),
                        plan.imbalance());
        split_line = buf;
      } else {
        const nlohmann::json j = nlohmann::json::parse(rank.group->get("plan", "rank 0's split"));
        so.cuts = j.at("cuts").get<std::vector<int64_t>>();
        so.only_stage = rank.rank;
        set_activity("building stage " + std::to_string(rank.rank) + " of " + args.model);
        dist::PipelinePlan plan = dist::pipeline_split(model, so);
        if (plan.split_id != j.at("split").get<std::string>())
          throw Error("rank " + std::to_string(rank.rank) + ": the split of " + args.model + " differs from rank 0's");
        stage = plan.stages[static_cast<size_t>(rank.rank)];
        model.reset();  // this rank keeps only its stage
      }
    }
    if (args.has("optimize")) {
      set_activity("optimising stage " + std::to_string(rank.rank));
      stage = dist::optimize_stage(stage);
    }
    if (rank.group) rank.group->barrier("the start of the pipeline (every stage built)");

    dist::PipelineRunner runner(rank.group, stage);
    install_kill_hook(rank, [&](std::function<void(int64_t)> f) { runner.on_microbatch(std::move(f)); });
    if (rank.rank != 0) {
      set_activity("serving stage " + std::to_string(rank.rank));
      const bool ok = runner.serve();
      dist::gather_times(*rank.group, runner.times(), "times");
      return ok ? 0 : kRunFailed;
    }

    // Rank 0: warm-up, timed batches.
    std::vector<double> batch_ms;
    c10::IValue out;
    const int64_t batch = dist::batch_size(inputs);
    for (int i = 0; i < warmup + runs; ++i) {
      if (i == warmup) runner.reset_times();
      set_activity(std::string(i < warmup ? "warm-up" : "timed") + " batch through the pipeline");
      const auto t0 = Clock::now();
      out = runner.run_stream(std::vector<std::vector<c10::IValue>>(static_cast<size_t>(stream), inputs), microbatches).back();
      if (i >= warmup)
        batch_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / stream);
    }
    runner.stop();
    std::vector<dist::RankTimes> times =
        rank.group ? dist::gather_times(*rank.group, runner.times(), "times") : std::vector<dist::RankTimes>{runner.times()};

    // --check: one process on the same microbatches. Unoptimised, the
    // reference is the model itself; optimised, the same optimised stages
    // chained in one process (a cut can separate kernels that optimising the
    // whole model would fuse), and the whole model optimised is compared too.
    std::string check, whole_line;
    bool bitwise = false;
    double max_diff = 0;
    std::optional<bool> whole_bitwise;
    double whole_diff = 0;
    if (args.has("check")) {
      set_activity("running one process on the same microbatches");
      const auto mbs = dist::split_microbatches(inputs, microbatches);
      c10::IValue expected;
      std::string what;
      if (!all_stages.empty()) {
        if (args.has("optimize"))
          for (size_t k = 0; k < all_stages.size(); ++k) all_stages[k] = k == 0 ? stage : dist::optimize_stage(all_stages[k]);
        std::vector<c10::IValue> outs;
        for (const auto& mb : mbs) outs.push_back(dist::run_stages(all_stages, mb));
        expected = dist::concat_microbatches(outs);
        what = std::string("the same ") + (args.has("optimize") ? "optimised " : "") + "stages run in one process";
      } else {
        expected = dist::microbatched_forward(*model, inputs, microbatches);
        what = "one process";
      }
      bitwise = dist::bitwise_equal(out, expected);
      max_diff = bitwise ? 0.0 : dist::max_abs_difference(out, expected);
      char buf[256];
      if (bitwise) std::snprintf(buf, sizeof buf, "bitwise equal to %s on the same microbatches: yes", what.c_str());
      else std::snprintf(buf, sizeof buf, "bitwise equal to %s on the same microbatches: no (max abs difference %.3g)", what.c_str(), max_diff);
      check = buf;
      if (model && args.has("optimize")) {
        OptimizeReport r;
        auto whole = optimize_model(model, mbs[0], false, &r);
        const c10::IValue w = dist::microbatched_forward(*whole, inputs, microbatches);
        whole_bitwise = dist::bitwise_equal(out, w);
        whole_diff = *whole_bitwise ? 0.0 : dist::max_abs_difference(out, w);
        if (*whole_bitwise) {
          whole_line = "bitwise equal to the whole model optimised in one process: yes";
        } else {
          std::snprintf(buf, sizeof buf,
                        "the whole model optimised in one process differs by at most %.3g (a cut separates kernels it fuses)",
                        whole_diff);
          whole_line = buf;
        }
      }
    }
    if (args.has("output")) save_value(args.get("output"), out);

    // The report.
    const double mean_ms = std::accumulate(batch_ms.begin(), batch_ms.end(), 0.0) / static_cast<double>(batch_ms.size());
    const double best_ms = *std::min_element(batch_ms.begin(), batch_ms.end());
    const double per_run = static_cast<double>(runs) * stream;
    auto per_mb = [&](double total, const dist::RankTimes& t) {
      return t.microbatches ? total / static_cast<double>(t.microbatches) : 0.0;
    };
    std::vector<double> compute;
    for (const auto& t : times) compute.push_back(per_mb(t.compute_ms, t));
    const double cmax = *std::max_element(compute.begin(), compute.end());
    const double cmean = std::accumulate(compute.begin(), compute.end(), 0.0) / static_cast<double>(compute.size());
    const int64_t mb_count = static_cast<int64_t>(microbatches) * runs * stream;
    // Boundary k -> k + 1 is measured where it is received (rank k + 1);
    // the last one is the output going back to rank 0.
    struct Boundary {
      int from, to;
      double bytes_per_mb, transfer_ms_per_mb;
    };
    std::vector<Boundary> boundaries;
    for (int k = 0; k + 1 < stages; ++k) {
      const auto& t = times[static_cast<size_t>(k + 1)];
      boundaries.push_back({k, k + 1, static_cast<double>(t.bytes_in) / static_cast<double>(mb_count),
                            t.recv_transfer_ms / static_cast<double>(mb_count)});
    }
    if (stages > 1)
      boundaries.push_back({stages - 1, 0, static_cast<double>(times[0].bytes_in) / static_cast<double>(mb_count),
                            times[0].output_transfer_ms / static_cast<double>(mb_count)});

    if (args.has("json")) {
      nlohmann::json j;
      j["model"] = args.model;
      j["stages"] = stages;
      j["microbatches"] = microbatches;
      j["batch"] = batch;
      j["threads"] = threads;
      j["optimize"] = args.has("optimize");
      j["balance"] = from_files ? infos[0].balance : dist::to_string(balance);
      j["runs"] = runs;
      j["stream"] = stream;
      j["batch_ms"] = batch_ms;
      j["mean_ms"] = mean_ms;
      j["best_ms"] = best_ms;
      j["throughput"] = static_cast<double>(batch) / mean_ms * 1000.0;
      j["best_throughput"] = static_cast<double>(batch) / best_ms * 1000.0;
      j["imbalance"] = cmean > 0 ? cmax / cmean : 1.0;
      nlohmann::json rs = nlohmann::json::array();
      for (int k = 0; k < stages; ++k) {
        const auto& t = times[static_cast<size_t>(k)];
        rs.push_back({{"rank", k},
                      {"nodes", infos[static_cast<size_t>(k)].nodes},
                      {"cost", infos[static_cast<size_t>(k)].cost},
                      {"compute_ms_per_microbatch", per_mb(t.compute_ms, t)},
                      {"compute_ms_per_batch", t.compute_ms / per_run},
                      {"recv_wait_ms_per_batch", t.recv_wait_ms / per_run},
                      {"send_wait_ms_per_batch", t.send_wait_ms / per_run},
                      {"output_wait_ms_per_batch", t.output_wait_ms / per_run}});
      }
      j["ranks"] = rs;
      nlohmann::json bs = nlohmann::json::array();
      for (const auto& b : boundaries)
        bs.push_back({{"from", b.from}, {"to", b.to}, {"bytes_per_microbatch", b.bytes_per_mb},
                      {"transfer_ms_per_microbatch", b.transfer_ms_per_mb},
                      {"gb_per_s", b.transfer_ms_per_mb > 0 ? b.bytes_per_mb / b.transfer_ms_per_mb / 1e6 : 0.0}});
      j["boundaries"] = bs;
      if (args.has("check")) {
        j["bitwise_equal"] = bitwise;
        j["max_abs_difference"] = max_diff;
        if (whole_bitwise) {
          j["whole_model_bitwise_equal"] = *whole_bitwise;
          j["whole_model_max_abs_difference"] = whole_diff;
        }
      }
      std::cout << j.dump() << "\n";
      return args.has("check") && !bitwise ? kRunFailed : 0;
    }
    describe_value(std::cout, out);
    std::printf("\npipeline: %s, %d stage%s on %d rank%s%s, batch %lld as %d microbatch%s, %d thread%s per rank%s\n",
                args.model.c_str(), stages, stages == 1 ? "" : "s", rank.world, rank.world == 1 ? "" : "s",
                rank.group ? (" (Gloo, store " + rank.group->store_address() + ")").c_str() : "",
                static_cast<long long>(batch), microbatches, microbatches == 1 ? "" : "es", threads,
                threads == 1 ? "" : "s", args.has("optimize") ? ", optimised" : "");
    if (!split_line.empty()) std::printf("split: %s\n", split_line.c_str());
    std::printf("\n%-6s %6s %12s %15s %13s %13s %12s\n", "stage", "nodes", "cost", "compute/mb ms", "recv wait ms",
                "send wait ms", "in/mb");
    for (int k = 0; k < stages; ++k) {
      const auto& t = times[static_cast<size_t>(k)];
      const auto& info = infos[static_cast<size_t>(k)];
      char cost[32];
      if (info.balance == "flops") std::snprintf(cost, sizeof cost, "%.3g GF", info.cost / 1e9);
      else std::snprintf(cost, sizeof cost, "%.2f ms", info.cost / 1000.0);
      std::printf("%-6d %6lld %12s %15.2f %13.2f %13.2f %12s\n", k, static_cast<long long>(info.nodes), cost,
                  per_mb(t.compute_ms, t), (k == 0 ? t.output_wait_ms : t.recv_wait_ms) / per_run, t.send_wait_ms / per_run,
                  format_bytes(static_cast<double>(k == 0 ? 0 : info.input_bytes)).c_str());
    }
    if (!boundaries.empty()) std::printf("\n");
    for (const auto& b : boundaries)
      std::printf("boundary %d -> %d: %s per microbatch, %.3f ms per transfer (%.2f GB/s)%s\n", b.from, b.to,
                  format_bytes(b.bytes_per_mb).c_str(), b.transfer_ms_per_mb,
                  b.transfer_ms_per_mb > 0 ? b.bytes_per_mb / b.transfer_ms_per_mb / 1e6 : 0.0,
                  b.to == 0 ? " (outputs back to rank 0)" : "");
    std::printf("\nbalance: compute per microbatch max/mean %.3f\n", cmean > 0 ? cmax / cmean : 1.0);
    std::printf("time per batch: %.2f ms mean, %.2f ms best over %d run%s%s: %.2f samples/s\n", mean_ms, best_ms, runs,
                runs == 1 ? "" : "s", stream > 1 ? (" of " + std::to_string(stream) + " batches streamed").c_str() : "",
                static_cast<double>(batch) / mean_ms * 1000.0);
    if (!check.empty()) std::printf("%s\n", check.c_str());
    if (!whole_line.empty()) std::printf("%s\n", whole_line.c_str());
    if (args.has("output")) std::printf("wrote %s\n", args.get("output").c_str());
    return args.has("check") && !bitwise ? kRunFailed : 0;
  } catch (const HelpRequested&) {
    throw;
  } catch (const std::exception& e) {
    return report_rank_error("pipeline", rank, e);
  }
}

}  // namespace

FX_COMMAND("pipeline",
           "pipeline MODEL|STAGE_DIR --input IN.pt --stages N [--microbatches M] [--optimize] [--check] [--runs R]",
           "pipeline-parallel inference over N ranks (under fxcpp launch, or torchrun's environment)",
           run_pipeline_command);

}  // namespace fx::cli
