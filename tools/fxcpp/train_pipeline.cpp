// fxcpp train-pipeline MODEL --data DATA.pt [--schedule 1f1b|gpipe]
// [--microbatches M] ...: pipeline-parallel training
// (fx::distributed::PipelineTrainer) with cross-entropy, one stage per rank,
// under `fxcpp launch --nproc N`. Every rank loads the model and the data,
// checks its parameters against rank 0's and takes rank 0's values, and
// cuts the model the same way (balanced by FLOPs on one microbatch); rank
// 0 prints the loss of each step and the throughput. The labels are checked
// against the model's classes when the data loads; --steps is the run's
// total: a run resumed from its checkpoint stops at the same step.
#include "command.h"
#include "distributed_io.h"
#include "model_io.h"
#include "train_io.h"

#include <fx/distributed.h>
#include <fx/serialize.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>

namespace fx::cli {
namespace {

namespace dist = fx::distributed;
using Clock = std::chrono::steady_clock;

int run_train_pipeline(const std::vector<std::string>& argv) {
  RankInfo rank;
  try {
    std::vector<DistOption> options = training_options();
    options.push_back({"schedule", "NAME", "1f1b (default: one forward, one backward) or gpipe (fill-drain)"});
    options.push_back({"microbatches", "M", "microbatches per step (default 4)"});
    ModelArgs args = parse_dist_args("train-pipeline", argv, options);
    if (!args.has("data")) throw SharedError("--data DATA.pt is required");
    const int64_t steps = args.get_int("steps", 10);
    const int64_t batch = args.get_int("batch", 32);
    const int64_t microbatches = args.get_int("microbatches", 4);
    const dist::Schedule schedule = dist::parse_schedule(args.get("schedule", "1f1b"));
    if (batch < microbatches)
      throw SharedError("--batch " + std::to_string(batch) + " has fewer samples than --microbatches " +
                        std::to_string(microbatches));
    set_threads(args);
    int world = 1;
    if (dist::rendezvous_env_present()) world = dist::rendezvous_from_env().world_size;
    if (args.has("resume") && !args.has("checkpoint")) throw SharedError("--resume needs --checkpoint DIR");
    if (args.has("checkpoint") && ::mkdir(args.get("checkpoint").c_str(), 0777) != 0 && errno != EEXIST)
      throw SharedError("--checkpoint " + args.get("checkpoint") + ": cannot make the directory (" + std::strerror(errno) + ")");
    join_ranks(rank, args, world, "train-pipeline", "train-pipeline");
    // Each rank checkpoints its own stage (step-K/model_RANK.fx, optimizer_RANK.pt); rank 0 writes the step last
    // and says from which step every rank resumes.
    const Checkpoint checkpoint{args.get("checkpoint", ""), "_" + std::to_string(rank.rank), rank.rank};
    const int64_t first = checkpoint.agreed_step(rank.group.get(), args.has("resume"));
    const bool resume = first > 0;
    if (nothing_left("train-pipeline", rank, checkpoint.dir, first, steps)) return 0;

    set_activity("reading " + args.model);
    std::shared_ptr<GraphModule> model = import_model(args.model);
    model->train();
    set_activity("reading " + args.get("data"));
    const TrainingData data = load_training_data(args.get("data"));
    check_labels(*model, data, args.get("data"));
    if (rank.group) {
      set_activity("checking the model against rank 0's");
      std::vector<std::pair<std::string, at::Tensor>> named;
      for (const auto& p : model->named_parameters(true)) named.emplace_back(p.key(), p.value());
      dist::check_same_parameters(*rank.group, named, "train-pipeline/parameters");
      dist::broadcast_from_rank0(*rank.group, model->parameters(), "broadcasting rank 0's parameters");
    }
    set_activity("cutting " + args.model + " into " + std::to_string(world) + " stages");
    dist::SplitOptions split;
    split.stages = world;
    split.balance = dist::Balance::Flops;
    split.example_inputs = {data.inputs.narrow(0, 0, (batch + microbatches - 1) / microbatches)};
    split.only_stage = rank.rank;
    std::shared_ptr<dist::ProcessGroup> group = group_or_solo(rank);
    dist::PipelinePlan plan;
    if (world > 1) {
      plan = dist::pipeline_split(model, split);
    } else {  // one stage: the whole model
      dist::PipelineStage whole;
      whole.module = model;
      plan.stages.push_back(whole);
    }
    dist::PipelineTrainOptions train_options;
    train_options.schedule = schedule;
    train_options.microbatches = microbatches;
    dist::PipelineTrainer trainer(group, plan.stages[static_cast<size_t>(rank.rank)], train_options);
    auto optimizer = make_optimizer(args, trainer.parameters());
    TrainingState state;
    if (resume) {
      const std::string path = checkpoint.model_path(first);
      set_activity("reading " + path);
      auto saved = fx::load(path);
      std::map<std::string, at::Tensor> values;
      for (const auto& p : saved->named_parameters(true)) values[p.key()] = p.value();
      for (const auto& b : saved->named_buffers(true)) values[b.key()] = b.value();
      torch::NoGradGuard no_grad;
      auto take = [&](const std::string& name, at::Tensor& t, const char* what) {
        auto it = values.find(name);
        if (it == values.end() || !it->second.sizes().equals(t.sizes()))
          throw Error(path + " has no " + what + " '" + name + "' of this stage's shape (a checkpoint of another model or split)");
        t.copy_(it->second);
      };
      // The parameters and the buffers (batch norm's running statistics).
      for (auto& p : trainer.stage().module->named_parameters(true)) take(p.key(), p.value(), "parameter");
      for (auto& b : trainer.stage().module->named_buffers(true)) take(b.key(), b.value(), "buffer");
      checkpoint.load_optimizer(first, *optimizer);
      state = checkpoint.load_state(first);
    }
    if (rank.rank == 0)
      std::cout << "train-pipeline: " << args.model << " in " << world << " stage" << (world > 1 ? "s" : "") << ", "
                << dist::to_string(schedule) << ", batch " << batch << " in " << microbatches << " microbatches, "
                << describe_optimizer(args) << (first ? ", resumed after step " + std::to_string(first) : std::string())
                << "\n";
    set_activity("training stage " + std::to_string(rank.rank));
    double total_s = 0, forward_ms = 0, backward_ms = 0;
    int64_t timed = 0;
    // Where the data goes on and the random generator (dropout) as the uninterrupted run had them.
    state.start_generator(args.get_int("seed", 0, 0), rank.rank);
    int64_t row = state.next_row;
    for (int64_t step = first; step < steps; ++step) {
      training_test_hooks(rank.rank, step + 1);
      const Clock::time_point t0 = Clock::now();
      const TrainingData b = batch_at(data, row, batch);
      row = (row + batch) % data.inputs.size(0);
      optimizer->zero_grad();
      const double loss = trainer.train_step({b.inputs}, b.labels);
      optimizer->step();
      const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      if (step > first || steps - first == 1) {
        total_s += seconds, ++timed;
        forward_ms += trainer.stats().forward_ms, backward_ms += trainer.stats().backward_ms;
      }
      if (rank.rank == 0) print_step(step + 1, loss, batch, seconds);
      const int64_t every = args.has("save-every") ? args.get_int("save-every", 1) : 0;
      if (args.has("checkpoint") && ((every && (step + 1) % every == 0) || step + 1 == steps))
        checkpoint.save(*group, step + 1, trainer.stage().module.get(), optimizer.get(), TrainingState::current(row));
    }
    if (rank.rank == 0 && timed > 0)
      std::cout << "throughput: " << format_number(static_cast<double>(batch * timed) / total_s) << " samples/s over "
                << timed << " step" << (timed > 1 ? "s" : "") << " after the first (" << cpu_name() << ", " << world
                << " stage" << (world > 1 ? "s" : "") << "); stage 0 kept at most "
                << trainer.stats().peak_microbatches_kept << " microbatches' activations (rank 0's peak resident memory "
                << format_number(peak_resident_mib()) << " MiB)\n";
    // Every stage's compute per microbatch, to rank 0: the schedules simulated on them.
    at::Tensor times = at::zeros({2 * world}, at::kDouble);
    const double per = static_cast<double>(std::max<int64_t>(timed, 1) * microbatches);
    times[rank.rank] = forward_ms / per;
    times[world + rank.rank] = backward_ms / per;
    if (world > 1) group->allreduce_sum(times, "gathering the stage times").wait();
    if (rank.rank == 0 && timed > 0) {
      dist::TrainingSimulationInput sim;
      for (int r = 0; r < world; ++r) {
        sim.forward_ms.push_back(times[r].item<double>());
        sim.backward_ms.push_back(times[world + r].item<double>());
      }
      sim.microbatches = microbatches;
      std::cout << "simulated on these stage times (links free):";
      for (dist::Schedule sched : {dist::Schedule::GPipe, dist::Schedule::OneFOneB}) {
        sim.schedule = sched;
        const dist::TrainingSimulationResult r = dist::simulate_pipeline_training(sim);
        std::cout << (sched == dist::Schedule::GPipe ? " " : "; ") << dist::to_string(sched) << " "
                  << format_number(r.step_ms) << " ms per step, bubble " << format_number(r.bubble_fraction)
                  << ", stage 0 keeps " << r.peak_microbatches_kept[0];
      }
      std::cout << " microbatches\n";
    }
    if (rank.group) rank.group->barrier("the end of training");
    return 0;
  } catch (const HelpRequested&) {
    throw;
  } catch (const std::exception& e) {
    return report_rank_error("train-pipeline", rank, e);
  }
}

}  // namespace

FX_COMMAND("train-pipeline",
           "train-pipeline MODEL --data DATA.pt [--schedule 1f1b|gpipe] [--microbatches M] [--steps N] [--batch B] ...",
           "pipeline-parallel training with cross-entropy, one stage per rank (run under fxcpp launch --nproc N)",
           run_train_pipeline);

}  // namespace fx::cli
