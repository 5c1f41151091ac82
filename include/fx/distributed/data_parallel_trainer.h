#pragma once
/// \file
/// Data-parallel training, torch.nn.parallel.DistributedDataParallel's
/// design over c10d's ProcessGroupGloo: every rank holds the whole model and
/// trains on its own part of the batch; their gradients are averaged while
/// backward still runs.
///
/// - At construction, rank 0's parameters and buffers are broadcast to every
///   rank, after a check that every rank holds the same parameters (names,
///   shapes, dtypes: a mismatch is one line naming the parameter).
/// - The parameters are grouped into buckets of at most bucket_cap_mb, in
///   the reverse order of registration (DDP's: backward produces the last
///   layers' gradients first).
/// - A hook on each parameter's gradient accumulator (the autograd node that
///   writes param.grad, DDP's post-hook) marks it ready; when every
///   gradient of a bucket is ready, the bucket is copied into one flat
///   tensor and its all-reduce starts on Gloo's threads at once, while
///   backward computes the rest. Buckets start in the same order on every
///   rank.
/// - finish_gradient_sync() (backward() calls it) waits for every bucket,
///   divides by the world size and writes the averages back into param.grad:
///   then the optimizer steps, on every rank alike.
///
///     auto group = fx::distributed::ProcessGroup::create(fx::distributed::rendezvous_from_env());
///     fx::distributed::DataParallelTrainer ddp(group, model);   // model: any torch::nn::Module
///     torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
///     sgd.zero_grad();
///     ddp.backward(torch::nn::functional::cross_entropy(model->forward(x_shard), y_shard));
///     sgd.step();                                                // examples/data_parallel_training.cpp
///
/// A GraphModule or an fx::aot_module trains the same way. An aot_module
/// is one autograd node, whose accumulators' hooks would all fire together
/// after its whole backward graph has run; instead, the trainer registers a
/// gradient-ready hook (fx/gradient_ready_hook.h) on every AotModule in the
/// module, which reports each parameter's gradient the moment the backward
/// graph has computed it: its bucket slot takes param.grad plus that
/// gradient, and the buckets start in the graph's order while it still runs
/// (GradientSyncStats::buckets_started_in_backward_graph). Autograd then
/// accumulates the gradients into param.grad as usual, and
/// finish_gradient_sync() overwrites them with the averages. A gradient the
/// graph does not compute (None) is an unused parameter: an error, or with
/// find_unused_parameters a zero contribution reported before the graph runs.
/// Each such parameter must get its gradient from that one graph, once per
/// step: an aot_module called twice before backward, or a parameter also
/// used outside it, is an error naming it. A parameter with a tensor hook
/// (param.register_hook, which autograd runs when it accumulates) waits for
/// its accumulator as with any other module.

#include <fx/distributed/process_group.h>

#include <torch/nn/module.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace fx::distributed {

/// How DataParallelTrainer buckets and checks gradients (DDP's arguments).
struct DataParallelOptions {
  /// The largest bucket, in MiB (DDP's bucket_cap_mb); a parameter larger
  /// than this is a bucket of its own.
  double bucket_cap_mb = 25;
  /// DDP's find_unused_parameters. Off: a parameter that received no
  /// gradient in a synchronised step is an error naming it. On: such a
  /// parameter counts as ready with a zero gradient; one that no rank used
  /// keeps its param.grad untouched.
  bool find_unused_parameters = false;
  /// Broadcast rank 0's buffers (batch-norm running statistics) along with
  /// the parameters at construction.
  bool broadcast_buffers = true;
};

/// What the last synchronised step cost (milliseconds, steady clock).
struct GradientSyncStats {
  /// Synchronised steps so far.
  int64_t steps = 0;
  /// Backward: from the start of backward() (or the first gradient ready)
  /// to its end (or to finish_gradient_sync()).
  double backward_ms = 0;
  /// Time during which at least one bucket's all-reduce was running.
  double allreduce_ms = 0;
  /// The part of allreduce_ms while backward was still running (DDP's overlap).
  double overlap_ms = 0;
  /// How long finish_gradient_sync() waited for the last all-reduces.
  double wait_ms = 0;
  /// Bytes all-reduced per step (all buckets).
  int64_t bytes = 0;
  /// Buckets whose all-reduce started from a gradient hook, during backward
  /// (the others started in finish_gradient_sync()).
  int64_t buckets_started_in_backward = 0;
  /// Of those, the buckets an fx::aot_module's backward graph started while
  /// it still ran (its gradient-ready hooks); 0 for other modules.
  int64_t buckets_started_in_backward_graph = 0;
};

/// DistributedDataParallel for a torch::nn::Module, a GraphModule or an
/// AotModule: gradients averaged over the ranks in buckets, overlapped with
/// backward. Every rank constructs it on the same model, in the same order.
class DataParallelTrainer {
 public:
  /// Checks that every rank holds the same parameters, broadcasts rank 0's
  /// parameters (and buffers) and installs the gradient hooks. Throws
  /// fx::Error naming a parameter that differs from rank 0's, and
  /// DistributedError for a lost or silent rank.
  DataParallelTrainer(std::shared_ptr<ProcessGroup> group, std::shared_ptr<torch::nn::Module> module,
                      DataParallelOptions options = {});
  /// Removes the hooks (the module trains alone again).
  ~DataParallelTrainer();
  DataParallelTrainer(const DataParallelTrainer&) = delete;
  DataParallelTrainer& operator=(const DataParallelTrainer&) = delete;

  /// The module's forward, for a GraphModule; a torch::nn::Module (an
  /// AotModule too) has no generic forward: call its own (the hooks work all
  /// the same). Throws fx::Error then.
  c10::IValue forward(std::vector<c10::IValue> inputs);
  /// loss.backward(), then finish_gradient_sync(): on return, param.grad
  /// holds the gradient averaged over the ranks (outside no_sync()).
  void backward(const at::Tensor& loss);
  /// Waits for every bucket's all-reduce and writes the averages into
  /// param.grad; buckets whose gradients are not all ready start now (a
  /// parameter without a gradient: fx::Error naming it, or a zero
  /// contribution with find_unused_parameters). Inside no_sync(): nothing.
  void finish_gradient_sync();

  /// While alive, backward only accumulates into param.grad, locally (DDP's
  /// no_sync()); the first synchronised backward after it averages the sum.
  class NoSync {
   public:
    ~NoSync();
    NoSync(NoSync&& other) noexcept;
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;
    NoSync& operator=(NoSync&&) = delete;

   private:
    friend class DataParallelTrainer;
    explicit NoSync(DataParallelTrainer* trainer);
    DataParallelTrainer* trainer_;
  };
  /// Starts a no_sync scope: `{ auto scope = ddp.no_sync(); ddp.backward(loss); }`.
  NoSync no_sync();

  /// The parameters' names in each bucket, in all-reduce order.
  std::vector<std::vector<std::string>> bucket_parameters() const;
  /// The last synchronised step's timing and the step count.
  const GradientSyncStats& stats() const;
  /// The module trained.
  const std::shared_ptr<torch::nn::Module>& module() const;
  /// The process group.
  const std::shared_ptr<ProcessGroup>& group() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

/// Checks that every rank's `params` (names, shapes, dtypes) are rank 0's,
/// through the store under `key`; throws fx::Error on every rank that
/// differs (and on rank 0) naming the first parameter that differs:
/// "rank 1: parameter 'fc.weight' has shape [10, 16] here but [10, 8] on rank 0".
void check_same_parameters(ProcessGroup& group, const std::vector<std::pair<std::string, at::Tensor>>& params,
                           const std::string& key);

/// Copies rank 0's tensors into every rank's (one broadcast per dtype, flat).
void broadcast_from_rank0(ProcessGroup& group, const std::vector<at::Tensor>& tensors, const std::string& what);

}  // namespace fx::distributed
