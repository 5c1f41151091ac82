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

/// `batch` rows from row `row` on, wrapping around the data.
TrainingData batch_at(const TrainingData& data, int64_t row, int64_t batch);

/// --steps N is the run's total, the steps before a --resume included: with
/// `done` steps in the checkpoint `dir` and none left, rank 0 says so in one
/// line ("COMMAND: nothing to do: ...") and this returns true.
bool nothing_left(const std::string& command, const RankInfo& rank, const std::string& dir, int64_t done, int64_t steps);

/// --optimizer sgd|adam, --lr, --momentum over `params`.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const ModelArgs& args, const std::vector<at::Tensor>& params);

/// "sgd (lr 0.01, momentum 0.9)".
std::string describe_optimizer(const ModelArgs& args);

/// What a step depends on beyond the model and the optimizer: where the
/// data goes on (the next step's first row) and this process's CPU random
/// generator (dropout's masks).
struct TrainingState {
  int64_t next_row = 0;
  at::Tensor cpu_generator;  ///< at::Generator::get_state(); undefined: leave the generator alone
  /// This process's state with the data at `next_row`.
  static TrainingState current(int64_t next_row);
  /// Sets the CPU generator to the saved state, or when there is none (a
  /// run's first step) seeds it with `seed` + `rank` (libtorch seeds it
  /// from /dev/urandom: unseeded, two runs draw other dropout masks).
  void start_generator(int64_t seed, int rank) const;
};

/// A checkpoint directory (--checkpoint DIR): one set of files per step
/// written, DIR/step-K/, holding modelSUFFIX.fx (fx::save of the model, or of
/// a pipeline rank's stage), optimizerSUFFIX.pt (the optimizer's state,
/// torch::save) and every rank's state_R.pt (TrainingState); DIR/step names
/// the complete set (K), written last. Every file is written beside its name
/// and renamed (fsynced first), the step file after a barrier once every
/// rank wrote its files, then the other sets are removed: a rank stopped at
/// any moment leaves the set `step` names whole, and a resume reads only it.
struct Checkpoint {
  std::string dir;
  /// "" (train-dp: rank 0 writes the model for all), "_1" (train-pipeline: each rank its own).
  std::string suffix;
  /// This process's rank (its state_R.pt).
  int rank = 0;
  /// The step DIR/step names, -1 when there is none (no checkpoint yet).
  int64_t latest() const;
  /// The step to resume from, the same on every rank: rank 0's latest()
  /// (or 0 without --resume or checkpoint), broadcast; each rank then checks
  /// that the set holds its files (fx::Error naming the one missing).
  int64_t agreed_step(distributed::ProcessGroup* group, bool resume) const;
  /// DIR/step-K.
  std::string set_dir(int64_t step) const;
  /// Its model.
  std::string model_path(int64_t step) const;
  /// Loads the optimizer's state of step `step` into `optimizer`.
  void load_optimizer(int64_t step, torch::optim::Optimizer& optimizer) const;
  /// This rank's TrainingState of step `step`.
  TrainingState load_state(int64_t step) const;
  /// Writes this rank's files of step `step` (the model and optimizer when
  /// `model` is given), then, after a barrier over `group`, rank 0 points
  /// DIR/step at them and removes the other sets.
  void save(distributed::ProcessGroup& group, int64_t step, const GraphModule* model, torch::optim::Optimizer* optimizer,
            const TrainingState& state) const;
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

/// Testing hook: FXCPP_TEST_KILL_RANK=0 with FXCPP_TEST_KILL_SAVING=S kills
/// rank 0 while it saves step S's checkpoint, when every rank's files are
/// written but DIR/step still names the set before (first attempt only).
void training_save_hook(int rank, int64_t step);

/// This process's peak resident memory (VmHWM), MiB; 0 if unknown.
double peak_resident_mib();

/// "12.3" with one decimal, "0.000123" with 3 significant digits.
std::string format_number(double v);

}  // namespace fx::cli
