#pragma once
/// \file
/// Training graphs: make_fx and AOT autograd (functorch's
/// `torch.fx.experimental.proxy_tensor.make_fx`, `functorch.compile.
/// aot_function` / `aot_module`, `default_partition`,
/// `min_cut_rematerialization_partition`).
///
/// make_fx traces a C++ function at the ATen level, below autograd: every
/// node is an ATen overload ("aten::convolution", "aten::native_batch_norm",
/// "aten::threshold_backward"), composite operators are decomposed as the
/// dispatcher decomposes them, and whatever autograd runs while the function
/// calls torch::autograd::grad or backward() is recorded too, so the graph
/// of a gradient computation is the backward operators themselves.
///
///     auto gm = fx::make_fx([](std::vector<c10::IValue> a) -> c10::IValue {
///       auto x = a[0].toTensor(), w = a[1].toTensor();
///       auto y = torch::gelu(torch::mm(x, w)).sum();
///       return torch::autograd::grad({y}, {w})[0];
///     }, {torch::randn({3, 4}), torch::randn({4, 5}).requires_grad_()});
///     // mm, gelu, sum, ones_like, expand, gelu_backward, t, mm
///
/// Functional: an in-place operator on a value nothing else aliases is
/// recorded as its functional form (aten::add_ → aten::add.Tensor), other
/// writes into a value (out= arguments, the running statistics
/// aten::native_batch_norm updates) go into a private aten::clone of it; an
/// input written this way gets one aten::copy_ back at the graph's end, so
/// every other node is free of side effects and passes may reorder them.
/// Writes into a value other live tensors alias (a view and its base) are
/// recorded in place as eager runs them.
///
/// aot_function / aot_module trace forward and backward together (the joint
/// graph: inputs `primals_1 ...` then `tangents_1 ...`, outputs the forward
/// results then the gradients of the primals), split it with a partition
/// function into a forward graph (also returning what backward needs) and a
/// backward graph, and run them as one autograd node: the result is
/// differentiable, and gradients reach the module's own parameters.

#include <fx/error.h>
#include <fx/gradient_ready_hook.h>
#include <fx/optimizer_in_backward.h>
#include <fx/graph_module.h>
#include <fx/trace.h>

#include <ATen/core/ivalue.h>
#include <torch/nn/module.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace fx {

/// A traced callable for make_fx / aot_function: the inputs in, the result out.
using AotFunction = std::function<c10::IValue(std::vector<c10::IValue>)>;

/// How make_fx traces.
struct MakeFxOptions {
  /// Placeholder names, one per input (default: "args_1", "args_2" ...,
  /// as Python make_fx names the inputs of a `*args` function).
  std::vector<std::string> input_names;
};

/// Traces `fn` on `example_inputs` (tensors) into a GraphModule of ATen
/// operators (make_fx). The function runs once on private copies of the
/// inputs (the caller's tensors are never written) and the default CPU
/// generator's state is restored afterwards, so tracing draws no random
/// numbers a later eager run would miss. Inputs that require grad stay
/// differentiable leaves inside fn. Throws fx::TraceError when fn reads a
/// traced value (item(), data_ptr(), control flow on data), returns
/// something other than tensors, None and tuples/lists of them, or when an
/// input is not a tensor.
std::shared_ptr<GraphModule> make_fx(const AotFunction& fn, const std::vector<c10::IValue>& example_inputs,
                                     const MakeFxOptions& options = {});

/// A joint forward+backward graph and where its outputs split.
struct JointGraph {
  /// The joint GraphModule: primals_1..N, tangents_1..M in; forward outputs,
  /// then one gradient (or None) per primal out, as one flat list.
  std::shared_ptr<GraphModule> module;
  /// How many of the outputs are forward outputs.
  size_t num_forward_outputs = 0;
};

/// A forward and a backward graph split from a joint graph. The forward
/// graph takes the primals and returns the forward outputs followed by the
/// saved values; the backward graph takes the saved values, then the
/// tangents, and returns one gradient (or None) per primal.
struct PartitionedGraphs {
  std::shared_ptr<GraphModule> forward;
  std::shared_ptr<GraphModule> backward;
  /// The names of the saved values, in the order the forward returns them.
  std::vector<std::string> saved;
  /// The backward's nodes that recompute forward values (they do not
  /// depend on the tangents), in program order.
  std::vector<std::string> recomputed;
  /// The joint graph these were split from (the min cuts' own copy, after
  /// CSE and the batch-norm recompute: what draw_joint_graph draws).
  std::shared_ptr<GraphModule> joint;
  /// Bytes of the saved values (their tensor_meta).
  size_t saved_bytes = 0;
  /// Bytes of the saved values that are neither primals (parameters, buffers,
  /// inputs) nor views of them: the memory the partition keeps alive
  /// between forward and backward, the activations.
  size_t activation_bytes = 0;
};

/// A partition function (functorch's partition_fn).
using PartitionFn = std::function<PartitionedGraphs(const JointGraph& joint)>;

/// functorch's default_partition: the forward graph computes what the
/// original forward computed and saves every forward value the backward
/// uses; the backward recomputes nothing.
PartitionedGraphs default_partition(const JointGraph& joint);

/// functorch 1.13's min_cut_rematerialization_partition: after CSE, chooses
/// the values to save by a minimum cut (Boost.Graph's
/// boykov_kolmogorov_max_flow) between the primals and the backward, each
/// node weighted by its output's bytes; cheap pointwise operators may be
/// recomputed in backward, random and compute-heavy ones never.
PartitionedGraphs min_cut_rematerialization_partition(const JointGraph& joint);

/// Options of min_cut_partition: fxcpp's own policy on top of functorch's.
struct MinCutOptions {
  /// Offer the backward batch-norm outputs and the activations after them
  /// recomputed from the batch norm's input and statistics (in-place
  /// activated batch norm's idea): conv nets save about half the bytes.
  bool recompute_batch_norm = true;
  /// Save dropout's random 0/1 masks as bool (1 byte an element, not 4): the
  /// scaling that follows a mask's draw reads it through
  /// `to(view(to(mask, bool), uint8), dtype)`, the same values to the bit,
  /// and the backward rebuilds the scaled mask from the bool.
  bool masks_as_bool = true;
  /// Let views (view, reshape, transpose, t, permute, expand, slice,
  /// select ...) be recomputed: free to redo, so the cut can save a value
  /// that is already saved instead of a view of a different one.
  bool recompute_views = true;
  /// Let convolutions and matrix products be recomputed too (functorch's
  /// compute-intensive operators; only a memory budget should ask this).
  bool recompute_compute_intensive = false;
  /// The most bytes of activations (PartitionedGraphs::activation_bytes) the
  /// forward may save for backward: the partition takes
  /// the least recomputation that fits (these options, then batch-norm
  /// recompute, then compute-intensive recompute) and throws fx::Error
  /// naming the bytes it needs when nothing fits.
  std::optional<size_t> memory_budget;
};

/// fxcpp's min-cut partition: functorch's, plus what MinCutOptions asks.
PartitionFn min_cut_partition(MinCutOptions options = {});

/// Draws a partitioned joint graph (functorch's draw_joint_graph) into
/// `path` (.dot, .svg or .html, FxGraphDrawer::write): forward nodes blue,
/// backward nodes orange, saved values red, the nodes the backward
/// recomputes (PartitionedGraphs::recomputed) green, with a key.
void draw_joint_graph(const PartitionedGraphs& partition, const std::string& path, const std::string& name = "joint");

/// A compiled graph: takes its inputs (the vector may be emptied) and
/// returns its outputs flattened.
using CompiledGraph = std::function<std::vector<c10::IValue>(std::vector<c10::IValue>& inputs)>;
/// A compiler (functorch's fw_compiler / bw_compiler): a graph and example
/// inputs in, something that runs it out.
using AotCompiler =
    std::function<CompiledGraph(const std::shared_ptr<GraphModule>& gm, const std::vector<c10::IValue>& example_inputs)>;

/// The default compiler: the GraphModule's own compiled plan, with its
/// memory plan on (GraphModule::set_memory_planning).
CompiledGraph graph_module_compiler(const std::shared_ptr<GraphModule>& gm,
                                    const std::vector<c10::IValue>& example_inputs);

/// Rewrites the weight gradients of 2-d convolutions whose output has at
/// most `max_positions` positions per image (Ho*Wo; groups 1, float or
/// double) from aten::convolution_backward into im2col and one matrix
/// product, the convolution_backward keeping the input and bias gradients
/// (gone when it has nothing left to compute). oneDNN's backward-weights
/// kernel is several times slower than that product there. Returns how many
/// it rewrote.
size_t conv_weight_grad_as_matmul(Graph& g, int64_t max_positions = 16);

/// Rewrites 2-d convolutions whose output has at most `max_positions`
/// positions per image (groups 1, float or double): aten::convolution
/// becomes im2col and one matrix product, and the input gradient of
/// aten::convolution_backward one matrix product and col2im (oneDNN's
/// kernels lose to the product on 2x2 maps, not on 4x4 ones). Every value
/// keeps the layout it had. With `forward` false the forward convolutions
/// are left to ATen (only input gradients are rewritten). Returns how many
/// it rewrote.
size_t conv_as_matmul(Graph& g, int64_t max_positions = 4, bool forward = true);

/// Rewrites float32 3x3 convolutions (stride 1, dilation 1, one group, no
/// bias) whose output has at least `min_positions` positions over the
/// batch (N*Ho*Wo) on maps of at least 4x4, with at least 16 input and 16
/// output channels (one AVX-512 block): aten::convolution becomes
/// fxcpp::winograd_conv2d and aten::convolution_backward (no bias gradient)
/// fxcpp::winograd_conv2d_backward (fx/onednn.h), oneDNN's Winograd kernels,
/// where it has them (AVX-512: onednn::has_winograd_conv2d). Values keep
/// their layouts and agree to rounding (~2e-6 of the largest). Measured on
/// an AMD EPYC Zen 5, 1 thread: resnet18's 3x3 convolutions 0.56-0.74x
/// ATen's time where they pass the rule. With `forward` false only the
/// backward's convolution_backward nodes are rewritten. Returns how many it
/// rewrote.
size_t conv_as_winograd(Graph& g, int64_t min_positions = 512, bool forward = true);

/// Replaces every float aten::bmm with fxcpp::onednn_matmul (fx/onednn.h):
/// one oneDNN primitive for the whole batch, reading the operands through
/// their strides, where ATen's CPU bmm runs one GEMM per batch element.
/// Same values. Returns how many it replaced.
size_t bmm_as_onednn_matmul(Graph& g);

/// Replaces every aten::bernoulli_.float drawing from the default generator
/// (dropout's mask) with fxcpp::bernoulli_: the same numbers from the same
/// generator, drawn from its MT19937 engine in bulk instead of one virtual
/// call per element (~5x faster without MKL), the generator left in the
/// state ATen's kernel leaves it. Returns how many it replaced.
size_t bernoulli_as_fxcpp(Graph& g);

/// Fuses the backward's batch norms with the activations after them (the
/// pointwise chains of conv -> batch norm -> [add] -> relu / hardtanh in a
/// training step), each rewrite computing the same values:
///  - a recomputed batch norm, add(mul(mul(sub(x, view(mean)),
///    view(invstd)), view(w)), view(b)) as recompute_batch_norm writes it,
///    with the residual add and the relu / hardtanh that follow it alone,
///    becomes one fxcpp::batch_norm_apply (one pass over x; the forward's
///    values bit for bit, computed as ATen's batch norm computes them);
///  - aten::native_batch_norm_backward (train) of a threshold_backward /
///    hardtanh_backward read by nothing else becomes one
///    fxcpp::batch_norm_act_backward: the activation's mask applied as the
///    gradient is read, the masked gradient never written (when `backward`;
///    its per-channel sums are accumulated in double where ATen's are float,
///    so gradients agree to ~1e-6, not to ATen's rounding).
/// Returns how many it fused.
size_t fuse_batch_norm_activation(Graph& g, bool backward = true);

/// Moves a backward graph's recomputations (call_functions that read no
/// tangent, pure, reading nothing a write in the graph touches) from the
/// start of the graph, where a partition leaves them (the joint graph's
/// order), to just before their first use, as autograd's engine would run
/// them (PyTorch 2.1's reordering_to_mimic_autograd_engine): the values the
/// min cut recomputes are then alive only near their use instead of all at
/// once. Same values; a graph without tangents is left alone. Returns how
/// many recomputations moved past a node that followed them.
size_t sink_recomputation(Graph& g);

/// What training_compiler rewrites before it plans a graph.
struct TrainingCompileOptions {
  /// conv_weight_grad_as_matmul's max_positions (0: no rewrite).
  int64_t conv_weight_grad_matmul_max_positions = 16;
  /// conv_as_matmul's max_positions (0: no rewrite).
  int64_t conv_matmul_max_positions = 4;
  /// Whether conv_as_matmul and conv_as_winograd also rewrite the forward's
  /// convolutions. Off by default: a training step's forward then computes
  /// eager's values to the bit, and its gradients differ from eager's only
  /// by the backward's rounding. A forward rewrite rounds the activations
  /// otherwise (~2e-6 of the largest), and where a pre-activation is that
  /// close to zero a ReLU's mask flips: the gradient is discontinuous there,
  /// so one flipped element moved resnet18's layer3.0.conv2.weight gradient
  /// by 37% of its largest value (batch 8, 64x64; issue 66), as eager's own
  /// gradients move between NCHW and channels-last (10% at 224x224).
  bool conv_forward_rewrites = false;
  /// Run float aten::bmm as fxcpp::onednn_matmul (bmm_as_onednn_matmul).
  bool bmm_as_onednn_matmul = true;
  /// Draw dropout's masks with fxcpp::bernoulli_ (bernoulli_as_fxcpp).
  bool bernoulli_as_fxcpp = true;
  /// Run the backward's recomputed batch norms with their activations in
  /// one pass (fuse_batch_norm_activation's first rewrite: the forward's
  /// values to the bit, where the unfused recomputation rounds otherwise).
  bool fuse_batch_norm_activation = true;
  /// Also its second rewrite, the batch-norm backward with the activation's
  /// mask. Off by default: its gradients round differently from ATen's
  /// (~1e-6 relative), and over many steps a trajectory drifts from eager's
  /// (the digits CNN: 1.1e-4 relative in the loss at step 49).
  bool fuse_batch_norm_backward = false;
  /// conv_as_winograd's min_positions (0: no rewrite). Rewritten
  /// first: the large maps are its, the small ones conv_as_matmul's.
  int64_t conv_winograd_min_positions = 512;
  /// fx::compiler::fuse_kernels last: the pointwise and last-dimension
  /// reduction chains left (dropout's scale, residual adds, softmax's and
  /// GELU's backward formulas, threshold_backward) as generated kernels
  /// (docs/compiler.md). Without a C++ compiler nothing is fused.
  bool fuse_kernels = true;
  /// sink_recomputation last: a backward's recomputed values computed
  /// where they are used, not all at the start (the memory plan's arena
  /// then holds a few of them at a time).
  bool sink_recomputation = true;
};

/// How many nodes each of training_compiler's rewrites replaced in one graph.
struct TrainingRewrites {
  size_t conv_as_winograd = 0;
  size_t conv_weight_grad_as_matmul = 0;
  size_t conv_as_matmul = 0;
  size_t bmm_as_onednn_matmul = 0;
  size_t bernoulli_as_fxcpp = 0;
  size_t fuse_batch_norm_activation = 0;
  /// Nodes fuse_kernels replaced by generated kernels.
  size_t fuse_kernels = 0;
  /// Recomputations sink_recomputation moved to their use.
  size_t sink_recomputation = 0;
  /// Each rewrite's name (its function's) and count, in the order they run.
  std::vector<std::pair<std::string, size_t>> items() const;
  /// The sum of the counts.
  size_t total() const;
};

/// Rewrites `g` (a forward or backward graph of a partition, with
/// tensor_meta) for speed as training_compiler does: conv_as_winograd,
/// conv_weight_grad_as_matmul, conv_as_matmul, bmm_as_onednn_matmul,
/// bernoulli_as_fxcpp, fuse_batch_norm_activation, fuse_kernels, then
/// sink_recomputation, as `options` says.
/// Each computes what it replaces to rounding; run on a copy of a graph, it
/// lets a test compare the two on the same inputs and see what fired.
TrainingRewrites rewrite_for_training(Graph& g, const TrainingCompileOptions& options = {});

/// The default compiler of aot_function / aot_module: rewrites a copy of the
/// graph for speed and memory (rewrite_for_training, as TrainingCompileOptions
/// says; the graph given stays as the partition made it), then runs it as
/// graph_module_compiler does.
AotCompiler training_compiler(TrainingCompileOptions options = {});

/// How aot_function / aot_module capture and compile.
struct AotOptions {
  /// Splits the joint graph (default: default_partition).
  PartitionFn partition_fn = default_partition;
  /// Compiles the forward / backward graphs (default: training_compiler()).
  AotCompiler fw_compiler = training_compiler();
  AotCompiler bw_compiler = training_compiler();
  /// The memory format the traced function sees its 4-d floating-point
  /// inputs in (the graph starts with a copy into it; the operators after
  /// it keep it), and the module's 4-d parameters are stored in (converted
  /// in place at forward, as Python's module.to(memory_format=...)):
  /// channels_last runs convolutions, batch norms and pools on NHWC
  /// activations without a weight reorder per call. Default: as given.
  std::optional<c10::MemoryFormat> memory_format = std::nullopt;
};

/// The graphs of one traced input signature (shapes, dtypes, train/eval).
struct AotGraphs {
  JointGraph joint;
  PartitionedGraphs partitioned;
  CompiledGraph compiled_forward;
  CompiledGraph compiled_backward;
};

/// A function or module compiled for training by aot_function / aot_module.
/// Its backward is one autograd node: register_gradient_ready_hook tells a
/// client (DataParallelTrainer) each gradient as the backward graph computes it.
class AotModule : public torch::nn::Module, public GradientReadyHooks {
 public:
  /// Compiles `fn`. With a `module`, the joint graph's first inputs are its
  /// parameters then buffers (read at every forward: they may be replaced),
  /// the rest forward's arguments; without one, only forward's arguments.
  AotModule(AotFunction fn, std::shared_ptr<torch::nn::Module> module, AotOptions options);
  ~AotModule() override;

  /// Runs the compiled forward; the result is differentiable (one autograd
  /// node whose backward runs the compiled backward graph). The first call
  /// with new input shapes or dtypes, or after train()/eval() changed the
  /// module's mode, traces and compiles again.
  c10::IValue forward(std::vector<c10::IValue> inputs);
  /// Convenience for one tensor in, one tensor out.
  at::Tensor forward(const at::Tensor& x);

  /// The graphs of the last signature forward ran (traced on first use:
  /// throws fx::Error before the first forward).
  std::shared_ptr<GraphModule> forward_graph() const;
  std::shared_ptr<GraphModule> backward_graph() const;
  std::shared_ptr<GraphModule> joint_graph() const;
  /// All the graphs of the last signature.
  const AotGraphs& graphs() const;
  /// How many signatures were traced.
  size_t num_traces() const;
  /// How many backward runs added each gradient into its leaf's .grad as the
  /// graph computed it (the leaves had a .grad: after zero_grad() without
  /// set_to_none), instead of returning them all to autograd at the end.
  size_t num_accumulating_backwards() const;

  /// Calls `hook(index, grad)` during every later backward, once for each
  /// joint-graph input that requires grad, the moment the backward graph has
  /// computed its gradient: index k is primals_{k+1}, the wrapped module's
  /// parameters (this module's parameters(), the same order), then its
  /// buffers, then forward's tensor inputs. `grad` is the value the graph
  /// returns for it (autograd accumulates it into param.grad after the whole
  /// graph has run, after every hook); undefined when the graph computes no
  /// gradient (None: the input took no part in the outputs), reported before
  /// the graph runs. The order of the calls is the order of the gradients'
  /// nodes in backward_graph().
  ///
  /// While a hook is registered, backward runs a copy of backward_graph()
  /// with `call_module[target=gradient_ready_hook](args = (%grad, k))` after
  /// each gradient's node (compiled by bw_compiler on first use);
  /// backward_graph() itself never changes, and without hooks backward
  /// runs it as before, at no extra cost. Throws fx::Error for an empty hook.
  RemovableHandle register_gradient_ready_hook(GradientReadyHook hook) override;

  /// Steps `optimizer` inside every later plain backward() (PyTorch's
  /// optimizer-in-backward): each parameter it holds is updated with its
  /// gradient as soon as the backward graph has computed it and no longer
  /// reads the parameter, and the gradient is freed there, so the step never
  /// holds all the gradients at once; `.grad` of those parameters is left as
  /// it is (no zero_grad(), no step() in the loop). The values are those of
  /// backward() then optimizer->step(). A backward that is not a plain
  /// backward() (torch.autograd.grad, backward(inputs=...), create_graph)
  /// throws fx::Error while an optimizer is set. nullptr removes it. Throws
  /// fx::Error while gradient-ready hooks are registered (they would lose
  /// their gradients); register_gradient_ready_hook throws while it is set.
  void set_optimizer_in_backward(std::shared_ptr<OptimizerInBackward> optimizer);
  /// What the optimizer in backward did (see OptimizerInBackwardStats).
  OptimizerInBackwardStats optimizer_in_backward_stats() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

/// Compiles `fn` for training (functorch's aot_function): every tensor input
/// that requires grad gets its gradient through the backward graph.
std::shared_ptr<AotModule> aot_function(AotFunction fn, AotOptions options = {});

/// Compiles `module` for training (functorch's aot_module): its parameters
/// and buffers become the first inputs of the joint graph (named_parameters
/// then named_buffers order, as functorch), `forward` calls it. Gradients
/// land in the module's parameters; buffers (batch-norm running statistics)
/// update as in eager mode.
std::shared_ptr<AotModule> aot_module(std::shared_ptr<torch::nn::Module> module, AotFunction forward,
                                      AotOptions options = {});

/// aot_module for a module type with a plain forward(Tensor...) method (or a
/// ModuleHolder such as torch::nn::Linear).
template <class M>
std::shared_ptr<AotModule> aot_module(const std::shared_ptr<M>& module, AotOptions options = {}) {
  AotFunction fwd = [m = module.get()](std::vector<c10::IValue> args) -> c10::IValue {
    if constexpr (std::is_base_of_v<torch::nn::SequentialImpl, M>) {
      if (args.size() != 1 || !args[0].isTensor())
        throw TraceError("aot_module: a Sequential takes exactly one tensor input");
      return m->forward(args[0].toTensor());
    } else {
      return trace_detail::call_forward_ptr(*m, &M::forward, args);
    }
  };
  return aot_module(std::static_pointer_cast<torch::nn::Module>(module), std::move(fwd), std::move(options));
}
/// aot_module of a GraphModule (a traced or imported model).
std::shared_ptr<AotModule> aot_module(const std::shared_ptr<GraphModule>& module, AotOptions options = {});
template <class Impl>
std::shared_ptr<AotModule> aot_module(const torch::nn::ModuleHolder<Impl>& module, AotOptions options = {}) {
  return aot_module(module.ptr(), std::move(options));
}

}  // namespace fx
