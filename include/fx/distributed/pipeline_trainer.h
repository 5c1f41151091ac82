#pragma once
/// \file
/// Pipeline-parallel training on pipeline_split's stages (what
/// torch.distributed.pipelining's ScheduleGPipe / Schedule1F1B do): each
/// rank holds one stage, runs its forward on microbatches and keeps what
/// its backward needs (the autograd graph of that microbatch), sends its
/// outputs to the next rank, receives the gradient of those outputs back,
/// runs its backward and sends the gradient of its inputs to the previous
/// rank. The last stage computes the loss of each microbatch (divided by
/// the number of microbatches, so the gradients are the batch mean's);
/// gradients accumulate in the stage's param.grad over the microbatches,
/// then each rank steps its own optimizer.
///
/// Schedules:
///  - GPipe (fill-drain): every microbatch's forward, then every backward;
///    a stage keeps the activations of all M microbatches at once.
///  - 1F1B: stage s runs min(S - s - 1, M) forwards to fill the pipeline,
///    then alternates one forward and one backward, then drains; a stage
///    keeps at most S - s microbatches' activations, whatever M is.
///
///     auto plan = fx::distributed::pipeline_split(gm, split);      // every rank, the same cuts
///     fx::distributed::PipelineTrainer trainer(group, plan.stages[group->rank()]);
///     torch::optim::SGD sgd(trainer.parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
///     sgd.zero_grad();
///     double loss = trainer.train_step({images}, labels);        // every rank passes the same batch
///     sgd.step();

#include <fx/distributed/pipeline.h>
#include <fx/distributed/process_group.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace fx::distributed {

/// The order of forwards and backwards on each stage.
enum class Schedule {
  GPipe,     ///< all forwards, then all backwards (fill-drain)
  OneFOneB,  ///< one forward, one backward (bounded activation memory)
};

/// "gpipe" / "1f1b".
std::string to_string(Schedule s);
/// Parses "gpipe" / "1f1b"; throws fx::Error otherwise.
Schedule parse_schedule(const std::string& s);

/// One step of a schedule: a forward ('F') or a backward ('B') of a microbatch.
struct ScheduleAction {
  char kind = 'F';
  int64_t microbatch = 0;
};

/// What stage `stage` of `stages` runs, in order, for `microbatches` microbatches.
std::vector<ScheduleAction> schedule_actions(Schedule schedule, int stage, int stages, int64_t microbatches);

/// The loss of one microbatch from the last stage's output and its targets.
using LossFunction = std::function<at::Tensor(const c10::IValue& output, const at::Tensor& targets)>;

/// Cross-entropy (mean over the microbatch) of logits [N, C] against class indices [N].
LossFunction cross_entropy_loss();

/// How PipelineTrainer runs a step.
struct PipelineTrainOptions {
  Schedule schedule = Schedule::OneFOneB;
  /// Microbatches per step (the batch is cut along dimension 0).
  int64_t microbatches = 4;
  /// The loss on the last stage (default: cross_entropy_loss()).
  LossFunction loss;
};

/// What the last step did on this rank (milliseconds).
struct PipelineStepStats {
  /// The batch's mean loss (every rank knows it).
  double loss = 0;
  /// The whole step, and this stage's forward and backward compute in it.
  double step_ms = 0, forward_ms = 0, backward_ms = 0;
  /// The most microbatches whose activations this stage kept at once.
  int64_t peak_microbatches_kept = 0;
  /// Steps so far.
  int64_t steps = 0;
};

/// One rank's stage of a pipeline, trained with a schedule.
class PipelineTrainer {
 public:
  /// `stage` must be stage group->rank() of a split into group->world_size()
  /// stages. Throws fx::Error otherwise.
  PipelineTrainer(std::shared_ptr<ProcessGroup> group, PipelineStage stage, PipelineTrainOptions options = {});

  /// One forward and backward of the batch over the pipeline; every rank
  /// passes the same batch (stage 0 reads `inputs`, the last stage
  /// `targets`, the others neither: they may pass empty ones). The stage's
  /// gradients accumulate into param.grad; returns the batch's mean loss
  /// (the mean of the microbatches'), on every rank. Throws
  /// DistributedError for a lost or silent rank, fx::Error for a batch with
  /// fewer rows than microbatches.
  double train_step(const std::vector<c10::IValue>& inputs, const at::Tensor& targets);

  /// The parameters of this rank's stage (for its optimizer).
  std::vector<at::Tensor> parameters() const;
  /// This rank's stage.
  const PipelineStage& stage() const;
  /// The last step's numbers.
  const PipelineStepStats& stats() const;

 private:
  std::shared_ptr<ProcessGroup> group_;
  PipelineStage stage_;
  PipelineTrainOptions options_;
  PipelineStepStats stats_;
};

}  // namespace fx::distributed
