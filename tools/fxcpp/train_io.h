#pragma once
// Shared by the training subcommands (train-dp, train-pipeline): the data
// file (inputs, labels) written by torch.save, the batches of each step, the
// optimizer from the command line, checkpoints, and the testing hooks.

#include "distributed_io.h"

#include <torch/optim/optimizer.h>

#include <memory>
#include <string>
#include <vector>

namespace fx::cli {

/// The options every training subcommand takes.
std::vector<DistOption> training_options();

/// A data file: `torch.save((inputs, labels))`, labels class indices.
struct TrainingData {
  at::Tensor inputs;  ///< [N, ...]
  at::Tensor labels;  ///< [N], int64
};

/// Reads --data PATH; throws fx::Error naming the file when it does not
/// hold (inputs, labels) with as many rows each and int64 labels.
TrainingData load_training_data(const std::string& path);

/// Checks the labels of `data` (read from `path`) against the classes of
/// `model`: its output on the first row, run in eval mode without gradients
/// (batch norm's running statistics stay), must be logits [1, classes].
/// SharedError (one line) naming the file, the first bad row and the number
/// of classes, or saying that the model is no classifier.
void check_labels(GraphModule& model, const TrainingData& data, const std::string& path);

/// The rows of step `step` (0-based): `batch` rows from row step * batch on,
/// wrapping around the data.
TrainingData step_batch(const TrainingData& data, int64_t step, int64_t batch);

/// --steps N is the run's total, the steps before a --resume included: with
/// `done` steps in the checkpoint `dir` and none left, rank 0 says so in one
/// line ("COMMAND: nothing to do: ...") and this returns true.
bool nothing_left(const std::string& command, const RankInfo& rank, const std::string& dir, int64_t done, int64_t steps);

/// --optimizer sgd|adam, --lr, --momentum over `params`.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const ModelArgs& args, const std::vector<at::Tensor>& params);

/// "sgd (lr 0.01, momentum 0.9)".
std::string describe_optimizer(const ModelArgs& args);

/// A checkpoint directory (--checkpoint DIR): modelSUFFIX.fx (fx::save of
/// the model, or of a pipeline rank's stage), optimizerSUFFIX.pt (the
/// optimizer's state, torch::save) and step (how many steps were done,
/// written last). Each file is written beside its name, then renamed.
struct Checkpoint {
  std::string dir;
  /// "" (train-dp: rank 0 writes for all), "_1" (train-pipeline: each rank its own).
  std::string suffix;
  /// Whether DIR holds a complete checkpoint (for this suffix).
  bool exists() const;
  /// The steps done when it was written.
  int64_t step() const;
  /// Its model.
  std::string model_path() const;
  /// Loads the optimizer's state into `optimizer`.
  void load_optimizer(torch::optim::Optimizer& optimizer) const;
  /// Writes the model and the optimizer.
  void save(const GraphModule& model, torch::optim::Optimizer& optimizer) const;
  /// Writes the step count: the checkpoint is complete.
  void save_step(int64_t step) const;
};

/// The group of a run: the rendezvous's, or for a single process (none) a
/// world of one over a FileStore of its own.
std::shared_ptr<distributed::ProcessGroup> group_or_solo(const RankInfo& rank);

/// Rank 0's line for a step: "step 3: loss 2.245765, 3012.6 samples/s".
void print_step(int64_t step, double loss, int64_t samples, double seconds);

/// Testing hooks: FXCPP_TEST_KILL_RANK=R with FXCPP_TEST_KILL_AT=S kills
/// rank R (SIGKILL) at the start of step S (1-based); FXCPP_TEST_HANG_RANK=R
/// with FXCPP_TEST_HANG_AT=S makes it sleep there instead (a hung peer).
/// Only in a launcher's first attempt (TORCHELASTIC_RESTART_COUNT unset or
/// 0): a group restarted by `fxcpp launch --max-restarts` runs on.
void training_test_hooks(int rank, int64_t step);

/// This process's peak resident memory (VmHWM), MiB; 0 if unknown.
double peak_resident_mib();

/// "12.3" with one decimal, "0.000123" with 3 significant digits.
std::string format_number(double v);

}  // namespace fx::cli
