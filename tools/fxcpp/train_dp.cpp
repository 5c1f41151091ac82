// fxcpp train-dp MODEL --data DATA.pt [--steps N] [--batch B] ...: data-
// parallel training (fx::distributed::DataParallelTrainer, DDP's design)
// with cross-entropy over WORLD_SIZE ranks, under `fxcpp launch --nproc N`
// or torchrun's environment. Every rank loads the model and the data (its
// labels checked against the model's classes); step k takes B rows from row
// k * B on (wrapping), each rank its B / WORLD_SIZE of them. --steps is the
// run's total: a run resumed from its checkpoint stops at the same step.
// Rank 0 prints the loss of each step (the mean over the ranks) and the
// throughput, and writes the checkpoint.
#include "command.h"
#include "distributed_io.h"
#include "model_io.h"
#include "train_io.h"

#include <fx/distributed.h>

#include <torch/nn/functional/loss.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <cstdio>
#include <iostream>

namespace fx::cli {
namespace {

namespace dist = fx::distributed;

/// Each bucket's gradient bytes, in all-reduce order.
std::vector<double> bucket_bytes(const dist::DataParallelTrainer& ddp, GraphModule& model) {
  auto params = model.named_parameters();
  std::vector<double> out;
  for (const auto& names : ddp.bucket_parameters()) {
    double bytes = 0;
    for (const std::string& name : names)
      if (const at::Tensor* p = params.find(name)) bytes += static_cast<double>(p->numel() * p->element_size());
    out.push_back(bytes);
  }
  return out;
}

/// simulate_data_parallel_training on this run's compute (one rank's step
/// without the all-reduce it could not hide) and buckets, for 2 to 16 ranks on
/// each link: one line per link.
void print_simulation(const std::vector<double>& buckets, double step_ms, double backward_ms, double exposed_ms,
                      int world, double allreduce_ms) {
  double total = 0;
  for (double b : buckets) total += b;
  dist::DataParallelSimulationInput in;
  in.backward_ms = backward_ms;
  in.forward_ms = std::max(0.0, step_ms - exposed_ms - backward_ms);  // forward, loss and optimizer step
  in.bucket_bytes = buckets;
  struct Link {
    std::string name;
    double bandwidth, latency_ms;
  };
  std::vector<Link> links = {{"10 Gb/s Ethernet (1.25 GB/s, 50 us)", 1.25e9, 0.05},
                             {"100 Gb/s (12.5 GB/s, 10 us)", 12.5e9, 0.01}};
  if (world > 1 && allreduce_ms > 0) {
    // This run's ring all-reduce moved 2 (N - 1) / N of the bytes per rank in allreduce_ms (latency included).
    const double bw = 2.0 * (world - 1) / world * total / (allreduce_ms / 1000.0);
    links.insert(links.begin(), Link{"the link measured here (" + format_number(bw / 1e9) + " GB/s effective)", bw, 0});
  }
  std::cout << "simulated on more machines (simulate_data_parallel_training; this run's compute, "
            << format_number(total / 1e6) << " MB of gradients in " << buckets.size() << " bucket"
            << (buckets.size() == 1 ? "" : "s") << ", ring all-reduce):\n";
  for (const Link& link : links) {
    in.bandwidth = link.bandwidth, in.latency_ms = link.latency_ms;
    std::cout << "  " << link.name << ":";
    for (int64_t n : {2, 4, 8, 16}) {
      in.ranks = n;
      const dist::DataParallelSimulationResult r = dist::simulate_data_parallel_training(in);
      std::cout << (n == 2 ? " " : ", ") << n << " ranks " << format_number(r.speedup) << "x ("
                << format_number(r.exposed_ms) << " ms not hidden)";
    }
    std::cout << "\n";
  }
}
using Clock = std::chrono::steady_clock;

int run_train_dp(const std::vector<std::string>& argv) {
  RankInfo rank;
  try {
    std::vector<DistOption> options = training_options();
    options.push_back({"bucket-mb", "MB", "gradient bucket size in MiB (DDP's bucket_cap_mb, default 25)"});
    options.push_back({"find-unused", nullptr, "parameters without a gradient count as zero (DDP's find_unused_parameters)"});
    ModelArgs args = parse_dist_args("train-dp", argv, options);
    if (!args.has("data")) throw SharedError("--data DATA.pt is required");
    const int64_t steps = args.get_int("steps", 10);
    const int64_t batch = args.get_int("batch", 32);
    set_threads(args);
    int world = 1;
    if (dist::rendezvous_env_present()) world = dist::rendezvous_from_env().world_size;
    if (batch % world != 0)
      throw SharedError("--batch " + std::to_string(batch) + " cannot be shared by " + std::to_string(world) +
                        " ranks: use a multiple of " + std::to_string(world));
    Checkpoint checkpoint{args.get("checkpoint", ""), ""};
    if (args.has("resume") && !args.has("checkpoint")) throw SharedError("--resume needs --checkpoint DIR");
    if (args.has("checkpoint") && ::mkdir(checkpoint.dir.c_str(), 0777) != 0 && errno != EEXIST)
      throw SharedError("--checkpoint " + checkpoint.dir + ": cannot make the directory (" + std::strerror(errno) + ")");
    join_ranks(rank, args, world, "train-dp", "train-dp");
    checkpoint.rank = rank.rank;
    // Rank 0's step, on every rank: the set DIR/step names (rank 0 writes the model and the optimizer for all).
    const int64_t first = checkpoint.agreed_step(rank.group.get(), args.has("resume"));
    const bool resume = first > 0;
    if (nothing_left("train-dp", rank, checkpoint.dir, first, steps)) return 0;

    set_activity("reading " + (resume ? checkpoint.model_path(first) : args.model));
    std::shared_ptr<GraphModule> model = import_model(resume ? checkpoint.model_path(first) : args.model);
    model->train();
    set_activity("reading " + args.get("data"));
    const TrainingData data = load_training_data(args.get("data"));
    check_labels(*model, data, args.get("data"));
    std::shared_ptr<dist::ProcessGroup> group = group_or_solo(rank);
    dist::DataParallelOptions ddp_options;
    ddp_options.bucket_cap_mb = args.get_positive("bucket-mb", 25);
    ddp_options.find_unused_parameters = args.has("find-unused");
    set_activity("checking the model against rank 0's");
    dist::DataParallelTrainer ddp(group, model, ddp_options);
    auto optimizer = make_optimizer(args, model->parameters());
    // Where the data goes on and the random generator (dropout) as the uninterrupted run had them.
    TrainingState state;
    if (resume) {
      checkpoint.load_optimizer(first, *optimizer);
      state = checkpoint.load_state(first);
    }
    const int64_t shard = batch / world;
    if (rank.rank == 0)
      std::cout << "train-dp: " << args.model << " on " << world << " rank" << (world > 1 ? "s" : "") << ", batch "
                << batch << " (" << shard << " per rank), " << describe_optimizer(args) << ", "
                << ddp.bucket_parameters().size() << " gradient bucket" << (ddp.bucket_parameters().size() > 1 ? "s" : "")
                << (resume ? ", resumed after step " + std::to_string(first) : std::string()) << "\n";
    set_activity("training");
    double total_s = 0, overlap_ms = 0, allreduce_ms = 0, backward_ms = 0;
    int64_t timed = 0;
    state.start_generator(args.get_int("seed", 0, 0), rank.rank);
    int64_t row = state.next_row;
    for (int64_t step = first; step < steps; ++step) {
      training_test_hooks(rank.rank, step + 1);
      const Clock::time_point t0 = Clock::now();
      const TrainingData b = batch_at(data, row, batch);
      row = (row + batch) % data.inputs.size(0);
      optimizer->zero_grad();
      const at::Tensor out = ddp.forward({b.inputs.narrow(0, rank.rank * shard, shard)}).toTensor();
      const at::Tensor loss = torch::nn::functional::cross_entropy(out, b.labels.narrow(0, rank.rank * shard, shard));
      ddp.backward(loss);
      optimizer->step();
      at::Tensor mean = loss.detach().to(at::kDouble).reshape({1}).clone();
      if (world > 1) group->allreduce_sum(mean, "sharing step " + std::to_string(step + 1) + "'s loss").wait();
      const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      if (step > first || steps - first == 1) {  // the first step warms up
        total_s += seconds, ++timed;
        overlap_ms += ddp.stats().overlap_ms, allreduce_ms += ddp.stats().allreduce_ms, backward_ms += ddp.stats().backward_ms;
      }
      if (rank.rank == 0) print_step(step + 1, mean.item<double>() / world, batch, seconds);
      const int64_t every = args.has("save-every") ? args.get_int("save-every", 1) : 0;
      if (args.has("checkpoint") && ((every && (step + 1) % every == 0) || step + 1 == steps))
        checkpoint.save(*group, step + 1, rank.rank == 0 ? model.get() : nullptr,
                        rank.rank == 0 ? optimizer.get() : nullptr, TrainingState::current(row));
    }
    if (rank.rank == 0 && timed > 0) {
      const double n = static_cast<double>(timed);
      std::cout << "throughput: " << format_number(static_cast<double>(batch) * n / total_s) << " samples/s over "
                << timed << " step" << (timed > 1 ? "s" : "") << " after the first (" << cpu_name() << ", "
                << world << " rank" << (world > 1 ? "s" : "") << ")\n"
                << "gradient all-reduce: " << format_number(allreduce_ms / n) << " ms per step, "
                << format_number(overlap_ms / n) << " ms of it while backward ran (backward "
                << format_number(backward_ms / n) << " ms; rank 0's peak resident memory "
                << format_number(peak_resident_mib()) << " MiB)\n";
      print_simulation(bucket_bytes(ddp, *model), 1000.0 * total_s / n, backward_ms / n,
                       world > 1 ? std::max(0.0, (allreduce_ms - overlap_ms) / n) : 0.0, world, allreduce_ms / n);
      if (args.has("checkpoint")) std::cout << "checkpoint: " << checkpoint.set_dir(steps) << " (step " << steps << ")\n";
    }
    if (group) group->barrier("the end of training");
    return 0;
  } catch (const HelpRequested&) {
    throw;
  } catch (const std::exception& e) {
    return report_rank_error("train-dp", rank, e);
  }
}

}  // namespace

FX_COMMAND("train-dp", "train-dp MODEL --data DATA.pt [--steps N] [--batch B] [--optimizer sgd|adam] [--lr LR] ...",
           "data-parallel training with cross-entropy (run under fxcpp launch --nproc N)", run_train_dp);

}  // namespace fx::cli
