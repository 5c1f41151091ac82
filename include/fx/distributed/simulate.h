#pragma once
/// \file
/// simulate_pipeline: how a pipeline of measured stages would run on N
/// machines joined by a link of given bandwidth and latency, by simulating
/// the GPipe fill-drain schedule event by event.
///
/// Model: microbatch i leaves stage s when stage s has finished microbatch
/// i - 1 and received microbatch i; a boundary is one link that carries one
/// message at a time (latency + bytes / bandwidth each), so a slow link
/// delays the stages behind it as a slow stage would; the last stage sends
/// each output back to rank 0 over one more link. A batch's time is when
/// rank 0 has the last output. The bubble fraction is the share of the
/// stages' time (S x batch time) that they sit idle.

#include <cstdint>
#include <vector>

namespace fx::distributed {

/// What the simulation is given.
struct SimulationInput {
  /// Compute time of each stage for one microbatch, milliseconds.
  std::vector<double> stage_ms;
  /// Bytes crossing each boundary per microbatch (S - 1 values), then the
  /// output bytes the last stage sends back to rank 0 (one more value, or 0).
  std::vector<double> boundary_bytes;
  /// Link bandwidth, bytes per second (0: infinite).
  double bandwidth = 0;
  /// Per-message latency, milliseconds.
  double latency_ms = 0;
  /// Microbatches per batch.
  int64_t microbatches = 1;
  /// Samples per batch (for throughput).
  int64_t batch = 1;
  /// One process's time for the whole batch, milliseconds (0: the sum of
  /// the stage times over all microbatches).
  double single_process_ms = 0;
};

/// What the simulation found.
struct SimulationResult {
  /// Time of one batch, fill to drain, milliseconds.
  double batch_ms = 0;
  /// Samples per second, batch after batch (fill-drain each time).
  double throughput = 0;
  /// Idle share of the stages' time over a batch.
  double bubble_fraction = 0;
  /// The busiest stage or link per microbatch: what a pipeline that never
  /// drains (batches streamed back to back) settles at, milliseconds.
  double steady_ms_per_microbatch = 0;
  /// Samples per second when streaming.
  double steady_throughput = 0;
  /// One process's batch time over batch_ms.
  double speedup = 0;
  /// Time spent on links per microbatch and boundary (latency + transfer), milliseconds.
  std::vector<double> link_ms;
};

/// Simulates the schedule (see the file comment). Throws fx::Error on empty
/// or negative inputs.
SimulationResult simulate_pipeline(const SimulationInput& input);

}  // namespace fx::distributed
