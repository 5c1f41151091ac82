// fxcpp data-parallel MODEL --input IN.pt [--optimize] [--check] ...: data-
// parallel inference over WORLD_SIZE ranks (under `fxcpp launch --nproc N`,
// or torchrun's environment on several machines). Every rank imports the
// model (with rank 0's inputs as the import's example; fingerprints
// compared); rank 0 cuts the batch into one shard per rank, sends each its
// shard, runs its own and gathers the outputs in rank order.
#include "command.h"
#include "distributed_io.h"
#include "model_io.h"
#include "optimize_io.h"

#include <fx/distributed.h>
#include <fx/tensor_file.h>

#include <nlohmann/json.hpp>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <numeric>

namespace fx::cli {
namespace {

namespace dist = fx::distributed;
using Clock = std::chrono::steady_clock;

int run_data_parallel(const std::vector<std::string>& argv) {
  RankInfo rank;
  try {
    ModelArgs args = parse_dist_args(
        "data-parallel", argv,
        {{"input", "IN.pt", "inputs file (torch.save of a tensor, or a tuple/list of them); read by rank 0"},
         {"batch", "B", "repeat the input along dim 0 to this batch (default 1: as saved)"},
         {"optimize", nullptr, "run fx::optimize_for_inference's version of the model on every rank"},
         {"runs", "R", "timed batches (default 1)"},
         {"warmup", "W", "untimed batches first (default 1)"},
         {"threads", "T", "intra-op threads per rank (default 1)"},
         {"timeout", "SECONDS", "how long a rank waits for a peer (default 300, FXCPP_DIST_TIMEOUT)"},
         {"check", nullptr, "compare the output bit for bit with one process on the same shards"},
         {"output", "OUT.pt", "write the output (torch.load-able)"},
         {"json", nullptr, "print the results as one JSON object"}});
    const int runs = args.get_int("runs", 1);
    const int warmup = args.get_int("warmup", 1, 0);
    if (args.has("output")) check_output_path(args.get("output"), "--output");
    const int threads = set_threads(args);
    // The world size is whatever the environment says (1 without one).
    int world = 1;
    if (dist::rendezvous_env_present()) world = dist::rendezvous_from_env().world_size;
    join_ranks(rank, args, world, "data-parallel", "data-parallel");
    torch::NoGradGuard no_grad;
    auto [model, inputs] = import_on_every_rank(args, rank);
    if (dist::batch_size(inputs) < world)
      throw SharedError("a batch of " + std::to_string(dist::batch_size(inputs)) + " cannot be shared by " + std::to_string(world) +
                  " ranks (use --batch)");
    std::shared_ptr<GraphModule> run_model = model;
    if (args.has("optimize")) {
      set_activity("optimising " + args.model);
      // Every rank has rank 0's inputs (import_on_every_rank): all optimise for the same shard.
      const std::vector<c10::IValue> example = dist::split_microbatches(inputs, world)[0];
      OptimizeReport r;
      run_model = optimize_model(model, example, false, &r);
    }
    if (rank.group) rank.group->barrier("the start of the runs (every rank ready)");
    dist::DataParallelRunner runner(rank.group, run_model);
    install_kill_hook(rank, [&](std::function<void(int64_t)> f) { runner.on_microbatch(std::move(f)); });
    if (rank.rank != 0) {
      set_activity("serving shards");
      const bool ok = runner.serve();
      dist::gather_times(*rank.group, runner.times(), "times");
      return ok ? 0 : kRunFailed;
    }
    std::vector<double> batch_ms;
    c10::IValue out;
    for (int i = 0; i < warmup + runs; ++i) {
      if (i == warmup) runner.reset_times();
      const auto t0 = Clock::now();
      out = runner.run(inputs);
      if (i >= warmup) batch_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    runner.stop();
    std::vector<dist::RankTimes> times =
        rank.group ? dist::gather_times(*rank.group, runner.times(), "times") : std::vector<dist::RankTimes>{runner.times()};
    bool bitwise = false;
    std::string check;
    if (args.has("check")) {
      const c10::IValue expected = dist::microbatched_forward(*run_model, inputs, world);
      bitwise = dist::bitwise_equal(out, expected);
      char buf[200];
      if (bitwise) std::snprintf(buf, sizeof buf, "bitwise equal to one process on the same shards: yes");
      else std::snprintf(buf, sizeof buf, "bitwise equal to one process on the same shards: no (max abs difference %.3g)",
                         dist::max_abs_difference(out, expected));
      check = buf;
    }
    if (args.has("output")) save_value(args.get("output"), out);
    const int64_t batch = dist::batch_size(inputs);
    const double mean_ms = std::accumulate(batch_ms.begin(), batch_ms.end(), 0.0) / static_cast<double>(batch_ms.size());
    if (args.has("json")) {
      nlohmann::json j = {{"model", args.model}, {"ranks", world}, {"batch", batch}, {"threads", threads},
                          {"optimize", args.has("optimize")}, {"batch_ms", batch_ms}, {"mean_ms", mean_ms},
                          {"throughput", static_cast<double>(batch) / mean_ms * 1000.0},
                          {"best_ms", *std::min_element(batch_ms.begin(), batch_ms.end())},
                          {"best_throughput", static_cast<double>(batch) / *std::min_element(batch_ms.begin(), batch_ms.end()) * 1000.0}};
      nlohmann::json rs = nlohmann::json::array();
      for (const auto& t : times)
        rs.push_back({{"rank", t.rank}, {"compute_ms_per_batch", t.compute_ms / runs}, {"bytes_in", t.bytes_in}});
      j["per_rank"] = rs;
      if (args.has("check")) j["bitwise_equal"] = bitwise;
      std::cout << j.dump() << "\n";
    } else {
      std::printf("data parallel: %s on %d rank%s, batch %lld (shards of %lld..%lld), %d thread%s per rank%s\n",
                  args.model.c_str(), world, world == 1 ? "" : "s", static_cast<long long>(batch),
                  static_cast<long long>(batch / world), static_cast<long long>((batch + world - 1) / world), threads,
                  threads == 1 ? "" : "s", args.has("optimize") ? ", optimised" : "");
      for (const auto& t : times)
        std::printf("rank %d: compute %.2f ms per batch, received %s\n", t.rank, t.compute_ms / runs,
                    format_bytes(static_cast<double>(t.bytes_in) / runs).c_str());
      std::printf("time per batch: %.2f ms mean over %d run%s: %.2f samples/s\n", mean_ms, runs, runs == 1 ? "" : "s",
                  static_cast<double>(batch) / mean_ms * 1000.0);
      if (!check.empty()) std::printf("%s\n", check.c_str());
      if (args.has("output")) std::printf("wrote %s\n", args.get("output").c_str());
    }
    return args.has("check") && !bitwise ? kRunFailed : 0;
  } catch (const HelpRequested&) {
    throw;
  } catch (const std::exception& e) {
    return report_rank_error("data-parallel", rank, e);
  }
}

}  // namespace

FX_COMMAND("data-parallel", "data-parallel MODEL --input IN.pt [--batch B] [--optimize] [--check] [--runs R]",
           "data-parallel inference: the batch shared by the ranks (under fxcpp launch, or torchrun's environment)",
           run_data_parallel);

}  // namespace fx::cli
