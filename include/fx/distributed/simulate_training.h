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

}  // namespace fx::distributed
