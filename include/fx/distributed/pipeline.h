#pragma once
/// \file
/// pipeline_split: a GraphModule cut into N consecutive stages, one per rank
/// of a pipeline (what PiPPy / torch.distributed.pipelining's `pipeline()`
/// does to a torch.fx graph), balanced by measured time or by FLOPs.
///
/// How: the call nodes (everything but placeholders, get_attr and output),
/// in graph order, are cut at N - 1 positions; fx::split_module makes the
/// partitions (submod_0 .. submod_{N-1}, keep_original_order); each stage is
/// a GraphModule of its own around its partition's nodes, with named inputs
/// and outputs:
///  - stage 0's placeholders are the model's (same names, same defaults), so
///    rank 0 feeds it the model's inputs;
///  - the placeholders of stage k > 0 are the values live across cut k - 1:
///    everything computed before it (or a model input) that the stage or a
///    later one uses, in graph order. A value used two stages later passes
///    through the stage in between (torch.distributed.pipelining sends such
///    skip connections the same way, stage to stage);
///  - every stage but the last returns a tuple of the values live across its
///    cut, named PipelineStage::outputs (the next stage's inputs); the last
///    returns the model's output;
///  - get_attr values are never sent: each stage that uses one holds it.
/// Run one after another in one process (run_stages), the stages compute
/// exactly what the model computes, bit for bit.
///
/// Balance: the cuts minimise the largest stage cost (a linear-partition
/// dynamic program), where a node costs its profiled time (fx's
/// ProfilingInterpreter on one example microbatch, best of several runs) or
/// its FLOPs (fx::summarize_model, shapes from fx::ShapeProp). Among the cuts
/// within `tolerance` of that optimum, those that separate no producer from
/// the consumer optimize_for_inference would fuse it with (a convolution and
/// its batch norm, a linear layer and its activation) win, and among them
/// the ones that send the fewest bytes (so a resnet is cut between blocks,
/// where one tensor crosses, rather than beside a residual). Positions where
/// a value that cannot cross ranks is live (an object, a dict) are never cut.
///
/// Values crossing a boundary may be tensors (any dtype and layout: a
/// channels_last activation crosses as it is), tuples, lists, numbers,
/// bools, strings or None; their shapes are in the stage's placeholder meta
/// (tensor_meta from ShapeProp) and travel in each message's header.
///
/// Stage files: save_stage writes a stage with fx::save, its description
/// (index, count, inputs, outputs, cost) and the fingerprint of the model
/// and of the split in the output node's meta; load_stage reads it back, so
/// each machine of a pipeline needs only its own stage. Ranks compare
/// fingerprints before running: a stage file of another model, or of
/// another split of the same model, is refused.

#include <fx/graph_module.h>

#include <ATen/core/ivalue.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace fx::distributed {

/// What the stages are balanced by.
enum class Balance {
  Time,   ///< profiled time per node (ProfilingInterpreter)
  Flops,  ///< FLOPs per node (summarize_model)
};

/// "time" / "flops".
std::string to_string(Balance b);
/// Parses "time" / "flops"; throws fx::Error otherwise.
Balance parse_balance(const std::string& s);

/// One stage of a pipeline.
struct PipelineStage {
  /// Its index (the rank that runs it) and the number of stages.
  int index = 0;
  int num_stages = 1;
  /// forward(inputs...) -> tuple of `outputs` (the last stage: the model's output).
  std::shared_ptr<GraphModule> module;
  /// Names of the values it receives, in placeholder order (stage 0: the model's inputs).
  std::vector<std::string> inputs;
  /// Names of the values it sends, in the order of its output tuple (empty for the last stage).
  std::vector<std::string> outputs;
  /// The model's nodes it runs.
  int64_t nodes = 0;
  /// Its cost under the split's balance: microseconds per example microbatch (Time) or FLOPs.
  double cost = 0;
  /// Bytes of tensor data it receives and sends per example microbatch (from tensor_meta; 0 if unknown).
  int64_t input_bytes = 0, output_bytes = 0;
  /// What it was split from (model_fingerprint) and which split (SplitOptions: cuts and stage count).
  std::string model_fingerprint, split_id;
  /// What the cost is measured in: "time" or "flops" (or "given" for cuts handed in).
  std::string balance;
};

/// How pipeline_split cuts.
struct SplitOptions {
  /// How many stages (ranks).
  int stages = 2;
  /// What the stages are balanced by.
  Balance balance = Balance::Time;
  /// One microbatch of inputs: ShapeProp runs on it (what crosses each
  /// cut, and the stages' input shapes) and the profiler times it. Needed
  /// to balance; with `cuts` given it only annotates shapes (on the meta
  /// device, no data computed).
  std::vector<c10::IValue> example_inputs;
  /// Profiled runs after one warm-up (Time); each node's cost is its fastest.
  int profile_runs = 3;
  /// Cuts whose largest stage cost is within this fraction of the best
  /// possible are equally good; the one sending fewest bytes is taken.
  double tolerance = 0.03;
  /// Cut at these positions (indices into the call nodes, increasing, each
  /// in [1, positions - 1]) instead of balancing: how every rank rebuilds
  /// the split rank 0 chose (PipelinePlan::cuts).
  std::vector<int64_t> cuts;
  /// Build only this stage's module (-1: all): a rank needs only its own.
  int only_stage = -1;
  /// Refinement (optional): how long each stage takes as it will run, in
  /// milliseconds (e.g. optimised with optimize_stage and timed on the
  /// example: time_stages). The node costs of each stage are scaled by its
  /// measured / predicted time and the stages balanced again, refine_rounds
  /// times; the cuts whose slowest stage measured fastest are kept, and the
  /// stages' costs are their measured times (balance "time (measured)").
  std::function<std::vector<double>(const std::vector<PipelineStage>&)> measure;
  int refine_rounds = 2;
};

/// A model cut into stages.
struct PipelinePlan {
  /// The stages, in order (with SplitOptions::only_stage, only that one has a module).
  std::vector<PipelineStage> stages;
  /// The cut positions (stage k starts at call node cuts[k - 1]).
  std::vector<int64_t> cuts;
  /// Call nodes (positions) and how many of the positions between them can be cut.
  int64_t positions = 0, cuttable = 0;
  /// Sum of the node costs (microseconds or FLOPs).
  double total_cost = 0;
  /// What the stages were balanced by ("time", "flops", or "given").
  std::string balance;
  /// model_fingerprint of the model, and the split's id.
  std::string model_fingerprint, split_id;
  /// split_module's result (submod_0 ...): what the stages were made from.
  std::shared_ptr<GraphModule> split;
  /// Largest stage cost over the mean (1 = perfectly balanced).
  double imbalance() const;
};

/// Cuts `gm` into options.stages stages (see the file comment). Annotates
/// gm's nodes with tensor_meta and type (ShapeProp) when example inputs are
/// given; otherwise leaves gm unchanged. Throws fx::Error: fewer call nodes
/// (or cuttable positions) than stages, no example inputs to balance with,
/// a model whose nodes count no FLOPs (Balance::Flops), cuts that are not
/// increasing positions.
PipelinePlan pipeline_split(const std::shared_ptr<GraphModule>& gm, const SplitOptions& options);

/// A fingerprint of a model: its graph's text and every parameter's and
/// buffer's name, dtype, shape and bytes (32 hex digits). Equal models
/// (the same file loaded twice) have equal fingerprints.
std::string model_fingerprint(const GraphModule& gm);

/// Writes the stage (fx::save: its module with the description in the
/// output node's meta "fxcpp_pipeline_stage").
void save_stage(const PipelineStage& stage, const std::string& path);

/// Reads a stage file; throws fx::ImportError for a file fx::load refuses
/// and fx::Error for an fxcpp file that is not a pipeline stage.
PipelineStage load_stage(const std::string& path);

/// Example inputs for the stage's module, made from its placeholders'
/// tensor_meta (zeros of the recorded shape, dtype and strides): what
/// optimize_for_inference prepares the stage for. Empty when an input's
/// metadata is unknown or is not a single tensor.
std::vector<c10::IValue> stage_example_inputs(const PipelineStage& stage);

/// fx::optimize_for_inference of the stage's module (prepared for
/// stage_example_inputs when there are some); the stage keeps its
/// description.
PipelineStage optimize_stage(const PipelineStage& stage);

/// How long each stage takes on `inputs` (one microbatch of the model's
/// inputs, passed from stage to stage), in milliseconds: the best of `runs`
/// timed runs after one warm-up.
std::vector<double> time_stages(const std::vector<PipelineStage>& stages, const std::vector<c10::IValue>& inputs,
                                int runs = 3);

/// Runs the stages one after another in this process on `inputs` (one
/// microbatch, the model's inputs): the model's output.
c10::IValue run_stages(const std::vector<PipelineStage>& stages, const std::vector<c10::IValue>& inputs);

/// The stage's inputs from what the previous stage sent (its output tuple;
/// stage 0: the model's inputs, unchanged).
std::vector<c10::IValue> stage_inputs(const PipelineStage& stage, const c10::IValue& received);

}  // namespace fx::distributed
