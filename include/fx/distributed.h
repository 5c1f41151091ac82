#pragma once
/// \file
/// Beyond one machine: pipeline-parallel and data-parallel execution of
/// GraphModules over c10d's ProcessGroupGloo (what PiPPy /
/// torch.distributed.pipelining do for torch.fx). See docs/distributed.md.
///
///     auto group = fx::distributed::ProcessGroup::create(fx::distributed::rendezvous_from_env());
///     fx::distributed::SplitOptions split;
///     split.stages = group->world_size();
///     split.balance = fx::distributed::Balance::Flops;                 // deterministic: every rank, the same cuts
///     split.example_inputs = one_microbatch;
///     auto plan = fx::distributed::pipeline_split(gm, split);
///     fx::distributed::PipelineRunner runner(group, plan.stages[group->rank()]);
///     if (group->rank() == 0) out = runner.run(inputs, /*microbatches=*/4), runner.stop();
///     else runner.serve();                                                // examples/pipeline.cpp
///
/// (Balanced by profiled time, the cuts differ from run to run: rank 0
/// computes them and the others take them, SplitOptions::cuts, as `fxcpp
/// pipeline` does through the store.)

#include <fx/distributed/data_parallel_trainer.h>
#include <fx/distributed/microbatch.h>
#include <fx/distributed/pipeline.h>
#include <fx/distributed/pipeline_trainer.h>
#include <fx/distributed/process_group.h>
#include <fx/distributed/runner.h>
#include <fx/distributed/simulate.h>
#include <fx/distributed/simulate_training.h>
