// A pipeline's training step under a schedule, event by event (see
// fx/distributed/simulate_training.h).
#include <fx/distributed/simulate_training.h>

#include <fx/error.h>

#include <algorithm>
#include <limits>

namespace fx::distributed {

TrainingSimulationResult simulate_pipeline_training(const TrainingSimulationInput& in) {
  const size_t S = in.forward_ms.size();
  if (S == 0) throw Error("simulate_pipeline_training: no stages");
  if (in.backward_ms.size() != S)
    throw Error("simulate_pipeline_training: " + std::to_string(S) + " forward times but " +
                std::to_string(in.backward_ms.size()) + " backward times");
  if (in.microbatches < 1) throw Error("simulate_pipeline_training: microbatches must be at least 1");
  if (in.bandwidth < 0 || in.latency_ms < 0) throw Error("simulate_pipeline_training: negative bandwidth or latency");
  for (size_t s = 0; s < S; ++s)
    if (in.forward_ms[s] < 0 || in.backward_ms[s] < 0) throw Error("simulate_pipeline_training: negative stage time");
  const size_t M = static_cast<size_t>(in.microbatches);
  const double unknown = std::numeric_limits<double>::infinity();
  auto link_ms = [&](size_t boundary) {
    const double bytes = boundary < in.boundary_bytes.size() ? in.boundary_bytes[boundary] : 0.0;
    return in.latency_ms + (in.bandwidth > 0 ? bytes / in.bandwidth * 1000.0 : 0.0);
  };
  // arrive_f[s][i]: activations of i at stage s; arrive_b[s][i]: the gradient of i's output at stage s.
  std::vector<std::vector<double>> arrive_f(S, std::vector<double>(M, unknown)), arrive_b = arrive_f;
  std::vector<std::vector<double>> done_f = arrive_f;
  for (size_t i = 0; i < M; ++i) arrive_f[0][i] = 0;
  std::vector<double> stage_free(S, 0), fwd_link_free(S, 0), bwd_link_free(S, 0), busy(S, 0);
  std::vector<std::vector<ScheduleAction>> actions(S);
  std::vector<size_t> next(S, 0);
  std::vector<int64_t> kept(S, 0);
  TrainingSimulationResult r;
  r.peak_microbatches_kept.assign(S, 0);
  for (size_t s = 0; s < S; ++s)
    actions[s] = schedule_actions(in.schedule, static_cast<int>(s), static_cast<int>(S), in.microbatches);
  double end = 0;
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t s = 0; s < S; ++s) {
      while (next[s] < actions[s].size()) {
        const ScheduleAction a = actions[s][next[s]];
        const size_t i = static_cast<size_t>(a.microbatch);
        const double ready = a.kind == 'F' ? arrive_f[s][i] : (s + 1 == S ? done_f[s][i] : arrive_b[s][i]);
        if (ready == unknown) break;  // waits for another stage
        const double start = std::max(stage_free[s], ready);
        const double t = a.kind == 'F' ? in.forward_ms[s] : in.backward_ms[s];
        stage_free[s] = start + t;
        busy[s] += t;
        end = std::max(end, stage_free[s]);
        if (a.kind == 'F') {
          done_f[s][i] = stage_free[s];
          r.peak_microbatches_kept[s] = std::max(r.peak_microbatches_kept[s], ++kept[s]);
          if (s + 1 < S) {
            fwd_link_free[s] = std::max(fwd_link_free[s], stage_free[s]) + link_ms(s);
            arrive_f[s + 1][i] = fwd_link_free[s];
          }
        } else {
          --kept[s];
          if (s > 0) {
            bwd_link_free[s - 1] = std::max(bwd_link_free[s - 1], stage_free[s]) + link_ms(s - 1);
            arrive_b[s - 1][i] = bwd_link_free[s - 1];
          }
        }
        ++next[s];
        progress = true;
      }
    }
  }
  for (size_t s = 0; s < S; ++s)
    if (next[s] < actions[s].size()) throw Error("simulate_pipeline_training: the schedule deadlocks");
  r.step_ms = end;
  double total_busy = 0;
  for (double b : busy) total_busy += b;
  r.bubble_fraction = end > 0 ? 1.0 - total_busy / (static_cast<double>(S) * end) : 0.0;
  return r;
}

DataParallelSimulationResult simulate_data_parallel_training(const DataParallelSimulationInput& in) {
  if (in.ranks < 1) throw Error("simulate_data_parallel_training: ranks must be at least 1");
  if (in.forward_ms < 0 || in.backward_ms < 0 || in.other_ms < 0 || in.bandwidth < 0 || in.latency_ms < 0)
    throw Error("simulate_data_parallel_training: negative time, bandwidth or latency");
  double total = 0;
  for (double b : in.bucket_bytes) {
    if (b < 0) throw Error("simulate_data_parallel_training: negative bucket bytes");
    total += b;
  }
  const double compute = in.forward_ms + in.backward_ms;
  DataParallelSimulationResult r;
  double link_free = 0, filled = 0, end = compute;
  if (in.ranks > 1) {
    const double n = static_cast<double>(in.ranks);
    for (double bytes : in.bucket_bytes) {
      filled += bytes;
      const double ready = in.forward_ms + (total > 0 ? in.backward_ms * filled / total : in.backward_ms);
      const double message_ms = in.latency_ms + (in.bandwidth > 0 ? bytes / n / in.bandwidth * 1000.0 : 0.0);
      const double ms = 2 * (n - 1) * message_ms;
      const double start = std::max(ready, link_free);
      link_free = start + ms;
      r.allreduce_ms += ms;
      end = std::max(end, link_free);
    }
  }
  r.exposed_ms = end - compute;
  r.step_ms = end + in.other_ms;
  const double one = compute + in.other_ms;
  r.speedup = r.step_ms > 0 ? static_cast<double>(in.ranks) * one / r.step_ms : static_cast<double>(in.ranks);
  return r;
}

}  // namespace fx::distributed
