#pragma once
/// \file
/// Running a model on several ranks: a pipeline of stages (GPipe's
/// fill-drain schedule, for inference) and data parallelism.
///
/// PipelineRunner: rank k runs stage k. Rank 0 cuts the batch into
/// microbatches, runs stage 0 on each and sends its outputs to rank 1 as
/// soon as they are computed (Gloo sends complete in the background); rank k
/// receives microbatch i from rank k - 1 (its receive of microbatch i + 1 is
/// posted before it computes i), runs its stage and sends the result on; the
/// last rank sends the model's outputs back to rank 0, which concatenates
/// them. With S stages and M microbatches of time t per stage a batch takes
/// (M + S - 1) t: the bubble is (S - 1) / (M + S - 1).
///
/// DataParallelRunner: every rank holds the whole model; rank 0 cuts the
/// batch into one shard per rank (split_microbatches), sends each its shard,
/// runs its own and gathers the outputs in rank order.
///
/// Both compute exactly what one process computes on the same microbatches
/// or shards (microbatched_forward), bit for bit: the same kernels on the
/// same values; activations cross ranks as they are laid out.
///
/// Errors: a stage that fails on a microbatch forwards the error down the
/// pipeline to rank 0 (whose run() throws DistributedError naming the rank,
/// the microbatch and the cause) and then drains its input until rank 0
/// stops the pipeline; a rank that dies or hangs makes its neighbours throw
/// DistributedError (connection closed, or nothing within the timeout), and
/// so on down the pipeline: no rank waits forever.

#include <fx/distributed/pipeline.h>
#include <fx/distributed/process_group.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace fx::distributed {

/// Where one rank's time went (accumulated over runs until reset).
struct RankTimes {
  int rank = 0;
  /// Microbatches (or shards) it computed.
  int64_t microbatches = 0;
  /// Running its stage (or the model, data parallel).
  double compute_ms = 0;
  /// Waiting for an input message to start: upstream had not sent it yet.
  double recv_wait_ms = 0;
  /// Receiving input messages once they started (the transfers).
  double recv_transfer_ms = 0;
  /// Waiting for its sends to be received.
  double send_wait_ms = 0;
  /// Tensor bytes received and sent.
  int64_t bytes_in = 0, bytes_out = 0;
  /// Rank 0: receiving outputs (waiting and transfers).
  double output_wait_ms = 0, output_transfer_ms = 0;
  /// Rank 0: wall time of the runs.
  double wall_ms = 0;
  /// Runs it took part in.
  int64_t runs = 0;

  /// One line of JSON.
  std::string to_json() const;
  /// Parses to_json(); throws fx::Error.
  static RankTimes from_json(const std::string& text);
};

/// Every rank's times at rank 0 (in rank order); other ranks get only their
/// own. Every rank calls it (through the store, under `key`).
std::vector<RankTimes> gather_times(ProcessGroup& group, const RankTimes& mine, const std::string& key);

/// Runs stage group.rank() of a pipeline (see the file comment).
class PipelineRunner {
 public:
  /// Rank k runs `stage` (whose index must be k, and whose stage count the
  /// world size); throws fx::Error otherwise. A null group runs a one-stage
  /// pipeline in this process (the single-process baseline).
  PipelineRunner(std::shared_ptr<ProcessGroup> group, PipelineStage stage);
  /// Rank 0: stops the pipeline if stop() was not called.
  ~PipelineRunner();
  PipelineRunner(const PipelineRunner&) = delete;
  PipelineRunner& operator=(const PipelineRunner&) = delete;

  /// Rank 0: runs the batch `inputs` as `microbatches` microbatches through
  /// the pipeline and returns the output (concatenated). Throws
  /// DistributedError when a rank fails or is lost; the pipeline is then
  /// stopped and cannot run again.
  c10::IValue run(const std::vector<c10::IValue>& inputs, int64_t microbatches);
  /// Rank 0: several batches streamed through the pipeline one after another
  /// (each cut into `microbatches`), filling it once and draining it once:
  /// while the last stage finishes batch b, the first already computes
  /// b + 1. Throughput for a stream of requests; each batch's output is the
  /// same as run() gives.
  std::vector<c10::IValue> run_stream(const std::vector<std::vector<c10::IValue>>& batches, int64_t microbatches);
  /// Other ranks: computes what arrives until rank 0 stops the pipeline.
  /// Returns false when the pipeline failed (a stage's error was forwarded
  /// to rank 0, or rank 0 aborted); throws DistributedError on a lost peer.
  bool serve();
  /// Rank 0: tells the other ranks to stop (once).
  void stop();

  /// This rank's times since the last reset.
  const RankTimes& times() const { return times_; }
  /// Forgets the times; on rank 0, every rank does at the start of the next
  /// run (after warm-up runs, say).
  void reset_times();
  const PipelineStage& stage() const { return stage_; }
  /// Called after each microbatch this rank computes, with how many it has
  /// computed since the last reset (progress; tests use it to stop a rank mid-run).
  void on_microbatch(std::function<void(int64_t)> fn) { on_microbatch_ = std::move(fn); }

 private:
  std::shared_ptr<ProcessGroup> group_;
  PipelineStage stage_;
  RankTimes times_;
  std::function<void(int64_t)> on_microbatch_;
  bool stopped_ = false;
  bool broken_ = false;
  bool reset_pending_ = false;
};

/// Data parallelism: every rank runs the whole model on its shard.
class DataParallelRunner {
 public:
  /// A null group: one rank, this process.
  DataParallelRunner(std::shared_ptr<ProcessGroup> group, std::shared_ptr<GraphModule> module);
  /// Rank 0: stops the other ranks if stop() was not called.
  ~DataParallelRunner();
  DataParallelRunner(const DataParallelRunner&) = delete;
  DataParallelRunner& operator=(const DataParallelRunner&) = delete;

  /// Rank 0: the batch cut into one shard per rank, computed, gathered.
  c10::IValue run(const std::vector<c10::IValue>& inputs);
  /// Other ranks: computes shards until rank 0 stops. False when a run failed.
  bool serve();
  /// Rank 0: tells the other ranks to stop (once).
  void stop();

  const RankTimes& times() const { return times_; }
  /// Forgets the times; on rank 0, every rank does at the start of the next run.
  void reset_times();
  /// Called after each shard this rank computes (see PipelineRunner::on_microbatch).
  void on_microbatch(std::function<void(int64_t)> fn) { on_microbatch_ = std::move(fn); }

 private:
  std::shared_ptr<ProcessGroup> group_;
  std::shared_ptr<GraphModule> module_;
  RankTimes times_;
  std::function<void(int64_t)> on_microbatch_;
  bool stopped_ = false;
  bool broken_ = false;
  bool reset_pending_ = false;
};

}  // namespace fx::distributed
