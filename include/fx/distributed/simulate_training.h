#pragma once
/// \file
/// simulate_pipeline_training: how a training step of measured stages runs
/// on N machines under a schedule (GPipe or 1F1B), event by event: the
/// simulate_pipeline of fx/distributed/simulate.h extended to backward.
///
/// Model: each stage runs its schedule_actions in order, one at a time. The
/// forward of microbatch i on stage s starts when the stage is free and the
/// activations of i have arrived from stage s - 1; its backward when the
/// stage is free and the gradient of i has arrived from stage s + 1 (the
/// last stage: right after its own forward). Each boundary has one link per
/// direction carrying one message at a time (latency + bytes / bandwidth;
/// a gradient is as large as the activation it belongs to). The step ends
/// with the last backward on stage 0. The bubble fraction is the share of
/// the stages' time (S x step time) that they sit idle; the peak
/// microbatches kept is the most forwards a stage has run whose backward
/// has not (the activations it holds).
///
/// simulate_data_parallel_training: the same for data parallelism, where
/// there is no bubble and the cost is the ring all-reduce that backward does
/// not hide.

#include <fx/distributed/pipeline_trainer.h>

#include <cstdint>
#include <vector>

namespace fx::distributed {

/// What the training simulation is given.
struct TrainingSimulationInput {
  /// Forward and backward compute time of each stage for one microbatch, milliseconds.
  std::vector<double> forward_ms, backward_ms;
  /// Bytes crossing each boundary per microbatch (S - 1 values; missing ones are 0).
  std::vector<double> boundary_bytes;
  /// Link bandwidth, bytes per second (0: infinite), and per-message latency, milliseconds.
  double bandwidth = 0, latency_ms = 0;
  /// Microbatches per step.
  int64_t microbatches = 1;
  Schedule schedule = Schedule::OneFOneB;
};

/// What it found.
struct TrainingSimulationResult {
  /// Time of one step (every forward and backward), milliseconds.
  double step_ms = 0;
  /// Idle share of the stages' time over the step.
  double bubble_fraction = 0;
  /// Per stage: the most microbatches whose activations it kept at once.
  std::vector<int64_t> peak_microbatches_kept;
};

/// Simulates the step (see the file comment). Throws fx::Error on empty,
/// mismatched or negative inputs.
TrainingSimulationResult simulate_pipeline_training(const TrainingSimulationInput& input);

/// What the data-parallel simulation is given: one rank's measured step at
/// its per-rank batch, the gradient buckets, the ranks and the link.
struct DataParallelSimulationInput {
  /// One rank's forward (with the loss), backward, and the rest of its step
  /// (optimizer), milliseconds.
  double forward_ms = 0, backward_ms = 0, other_ms = 0;
  /// Each bucket's bytes, in all-reduce order (the order backward fills them).
  std::vector<double> bucket_bytes;
  /// How many ranks, one per machine.
  int64_t ranks = 2;
  /// Link bandwidth, bytes per second (0: infinite), and per-message latency, milliseconds.
  double bandwidth = 0, latency_ms = 0;
};

/// What the data-parallel simulation found.
struct DataParallelSimulationResult {
  /// One step of every rank, milliseconds.
  double step_ms = 0;
  /// The link's busy time for the step's all-reduces, and the part of it after backward ended (not hidden).
  double allreduce_ms = 0, exposed_ms = 0;
  /// Samples per second of `ranks` ranks over one rank's (each at the per-rank batch).
  double speedup = 1;
};

/// A data-parallel step on `ranks` machines (DataParallelTrainer's design):
/// backward makes the buckets' gradients ready in proportion to their bytes
/// (bucket k when the bytes of buckets 0..k are done); each bucket is then
/// ring all-reduced, one bucket at a time on the link, 2 (N - 1) messages of
/// bytes / N each (latency + bytes / N / bandwidth); the step ends when
/// backward and the last all-reduce have, plus `other_ms`. Throws fx::Error
/// on negative or missing inputs.
DataParallelSimulationResult simulate_data_parallel_training(const DataParallelSimulationInput& input);

}  // namespace fx::distributed
