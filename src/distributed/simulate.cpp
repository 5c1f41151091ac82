// The GPipe fill-drain schedule of measured stages over links, event by event.
#include <fx/distributed/simulate.h>

#include <fx/error.h>

#include <algorithm>
#include <string>

namespace fx::distributed {

SimulationResult simulate_pipeline(const SimulationInput& in) {
  const size_t S = in.stage_ms.size();
  if (S == 0) throw Error("simulate_pipeline: no stages");
  if (in.microbatches < 1) throw Error("simulate_pipeline: microbatches must be at least 1");
  if (in.bandwidth < 0 || in.latency_ms < 0) throw Error("simulate_pipeline: negative bandwidth or latency");
  for (double t : in.stage_ms)
    if (t < 0) throw Error("simulate_pipeline: negative stage time");
  const size_t M = static_cast<size_t>(in.microbatches);
  // Link k carries stage k's output to stage k + 1; link S - 1 carries the last stage's output to rank 0.
  SimulationResult r;
  r.link_ms.assign(S, 0.0);
  for (size_t k = 0; k < S; ++k) {
    const double bytes = k < in.boundary_bytes.size() ? in.boundary_bytes[k] : 0.0;
    if (k + 1 == S && S == 1) break;  // one process: nothing is sent
    r.link_ms[k] = in.latency_ms + (in.bandwidth > 0 ? bytes / in.bandwidth * 1000.0 : 0.0);
  }
  std::vector<double> stage_free(S, 0.0), link_free(S, 0.0);
  double done = 0;
  for (size_t i = 0; i < M; ++i) {
    double ready = 0;  // when microbatch i is at stage k's door
    for (size_t k = 0; k < S; ++k) {
      const double start = std::max(ready, stage_free[k]);
      const double finish = start + in.stage_ms[k];
      stage_free[k] = finish;
      if (S == 1) {
        done = std::max(done, finish);
        break;
      }
      const double sent = std::max(finish, link_free[k]) + r.link_ms[k];
      link_free[k] = sent;
      ready = sent;
      if (k + 1 == S) done = std::max(done, sent);
    }
  }
  r.batch_ms = done;
  double busy = 0, bottleneck = 0;
  for (size_t k = 0; k < S; ++k) {
    busy += in.stage_ms[k] * static_cast<double>(M);
    bottleneck = std::max({bottleneck, in.stage_ms[k], r.link_ms[k]});
  }
  r.bubble_fraction = done > 0 ? 1.0 - busy / (static_cast<double>(S) * done) : 0.0;
  r.throughput = done > 0 ? static_cast<double>(in.batch) / done * 1000.0 : 0.0;
  r.steady_ms_per_microbatch = bottleneck;
  r.steady_throughput =
      bottleneck > 0 ? static_cast<double>(in.batch) / (bottleneck * static_cast<double>(M)) * 1000.0 : 0.0;
  const double single = in.single_process_ms > 0 ? in.single_process_ms : busy;
  r.speedup = done > 0 ? single / done : 0.0;
  return r;
}

}  // namespace fx::distributed
