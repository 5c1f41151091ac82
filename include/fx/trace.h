#pragma once
/// \file
/// Symbolic tracing of unmodified C++ libtorch code (torch.fx `Tracer`,
/// `symbolic_trace`).
///
/// How it works: every example input becomes a *proxy tensor* carrying a
/// dispatch key fxcpp owns (PrivateUse1) and an example value. A boxed
/// kernel registered for every operator on AutogradPrivateUse1 (and
/// PrivateUse1) sees each call before composite decomposition (aten::linear,
/// aten::conv2d, aten::batch_norm, aten::layer_norm stay single nodes),
/// records it as a call_function node whose target is the exact overload
/// ("aten::add.Tensor"), computes the result on the example values under
/// InferenceMode and hands back new proxies. Because proxies carry shapes,
/// shape code traces (`x.size(0)`, `view({-1, n})`) and every node gets
/// `meta["tensor_meta"]` (fx::TensorMetadata). Arguments equal to the
/// schema default are left out (trailing positional ones; keyword-only ones
/// are recorded as kwargs only when they differ).
///
/// Meta by default: the example values proxies carry are meta tensors of the
/// inputs' shapes, dtypes and strides, and recorded operators run on meta
/// (parameters and buffers are passed as meta tensors too), so tracing
/// computes no data: the cost is the dispatcher's, not the model's FLOPs.
/// Proxies still report the inputs' device (cpu), so `x.options()` in
/// traced code means what it means in eager code. An operator without a meta
/// kernel in libtorch 1.13 (fxcpp adds the common missing ones, see
/// fx/meta_kernels.h) runs instead on real zero-filled tensors of the same
/// metadata; Tracer::meta_fallbacks() lists them. Operators on ordinary
/// tensors only (a buffer update, a factory) still run on real values.
/// TraceOptions::real_values computes everything on the real example values
/// instead (one eager forward), as fxcpp did before meta tracing.
///
/// The kernel is registered once per process, on the first trace; it only
/// ever sees proxies, or the tracing thread's calls during a trace. It claims
/// the PrivateUse1 dispatch key, so fxcpp tracing cannot share a process with
/// a custom device backend that uses PrivateUse1.
///
/// What the graph contains
///  - placeholders for the example inputs, in order (named "x" for a single
///    input, "arg0", "arg1" ... otherwise, or Tracer::set_input_names);
///  - get_attr nodes for the root's parameters and buffers (matched by tensor
///    identity); operations on parameters alone (`weight.t()`) are recorded,
///    as torch.fx records them on its parameter proxies; operations on
///    buffers alone run eagerly, as in torch.fx (buffers are not proxied);
///  - any other tensor the code uses becomes a constant attribute
///    `_tensor_constant0`, `_tensor_constant1` ... of Tracer::root();
///  - tuple- and list-returning operators give `operator.getitem` nodes,
///    created when an element is first used; in-place operators are recorded
///    as themselves and later uses of the mutated tensor read the in-place node;
///  - call_module nodes for leaf modules (below); the output node holds a
///    tensor, a tuple/list, or a dict of tensors.
///
/// Leaf modules. A C++ module's forward cannot be intercepted, so a leaf
/// module call is recognized after the fact from the operators it issued with
/// its own parameters, and folded into one call_module node named after its
/// qualified name ("layer1.0.conv1" → node layer1_0_conv1). Recognized, and
/// leaves by default (Tracer::is_leaf_module):
///  | module | operators it issues |
///  | --- | --- |
///  | Linear | aten::t(weight) + aten::addmm(bias, x, ·) / aten::matmul(x, ·) [+ aten::add_(·, bias)] / aten::linear |
///  | Conv1d/2d/3d | aten::conv{1,2,3}d (+ the padding op for non-zero padding modes) |
///  | ConvTranspose1d/2d/3d | aten::conv_transpose{1,2,3}d.input (forward without output_size) |
///  | BatchNorm1d/2d/3d | aten::batch_norm (needs affine weights or running stats) |
///  | LayerNorm, GroupNorm | aten::layer_norm, aten::group_norm (needs elementwise affine / affine) |
///  | Embedding | aten::embedding (+ aten::embedding_renorm_ with max_norm) |
///  | LSTM, GRU, RNN | aten::lstm.input, aten::gru.input, aten::rnn_tanh.input, aten::rnn_relu.input (unpacked input) |
/// A call is folded only when the operator's arguments are exactly what the
/// module's options make it pass (stride, eps, momentum, ...), so using a
/// module's weight in another way is never mistaken for a module call.
/// Parameter-free modules (ReLU, Dropout, pooling, Flatten) cannot be
/// recognized and come out as call_function nodes (aten::relu ...); so do
/// modules without parameters of a listed type (LayerNorm without
/// elementwise_affine). Modules not listed are traced through; their
/// parameters become get_attr nodes with qualified names. A tracer whose
/// is_leaf_module returns true for a module type it cannot recognize gets a
/// TraceError naming the module.
///
/// Differences from torch.fx
///  - Tracing runs the code on meta values of the example inputs' shapes (or
///    on the example values), so shapes are specialised to the example
///    inputs: `x.size(0)` is a constant
///    in the graph, and factory calls (`torch::zeros({n})`) become constants.
///    To keep this from going unnoticed, every tensor placeholder gets a
///    ShapeGuard (fx/shape_guard.h) in `meta["shape_guard"]`: running the
///    graph on another shape or dtype is an fx::ShapeGuardError naming the
///    input, unless the dimension was declared in TraceOptions::dynamic_dims.
///  - Dynamic dimensions (TraceOptions::dynamic_dims): the code is traced
///    once at the example sizes and twice more per dynamic size (a declared
///    dimension, or all the dimensions declared with one name) at size + 1
///    and + 2, and once more with every size grown when there are several. Integer arguments that move with a dimension
///    (view / reshape / expand sizes, arange lengths ...) are replaced by
///    nodes computing them from the input: `aten::size.int(x, d)` nodes right
///    after the placeholders, and `operator.mul` / `operator.add` /
///    `operator.sub` nodes for a*s + b. A moving argument that is not affine
///    in the declared sizes, a moving float argument, a tensor constant whose
///    shape moves, or a graph whose structure changes with the size is a
///    TraceError naming the node and the values seen. Factory calls
///    (aten::arange, aten::zeros ... : operators without tensor arguments)
///    are recorded as call_function nodes in this mode instead of becoming
///    constants, so a tensor they return is a proxy (its values cannot be
///    read during the trace). tensor_meta keeps the example sizes.
///  - Reading a traced value (item(), is_nonzero(), aten::equal / allclose of
///    two different values, _local_scalar_dense) throws fx::TraceError
///    "symbolically traced variables cannot be used as inputs to control
///    flow"; `data_ptr()` / accessors on a proxy throw the same error.
///    `aten::equal(x, x)` of one traced value is true without reading it.
///  - concrete_args are baked into the graph (no placeholder is created).
///  - Random operators consume the global generator during tracing.
///  - The model is left untouched: inputs are cloned, buffers are cloned on
///    first use, parameters are copied before an operator writes to them.
///    (Writes through a view of a parameter are not intercepted.)
///  - Tracing happens on the calling thread; a proxy used from another
///    thread, or after its trace ended, throws fx::TraceError.

#include <fx/error.h>
#include <fx/graph.h>
#include <fx/graph_module.h>
#include <fx/shape_guard.h>
#include <fx/tensor_meta.h>

#include <ATen/core/ivalue.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/pimpl.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace fx {

/// A traced callable: the forward arguments in, the result out.
using TracedFunction = std::function<c10::IValue(std::vector<c10::IValue>)>;

/// Forward arguments fixed to constants, by position in forward's parameter
/// list (torch.fx `concrete_args`). Example inputs fill the other positions
/// in order.
using ConcreteArgs = std::map<size_t, c10::IValue>;

namespace trace_detail {

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<c10::optional<T>> : std::true_type {};

/// Converts boxed argument i to the parameter type T; a missing trailing
/// argument is default-constructed only for types whose default is
/// unambiguous (Tensor, optional).
template <class T>
std::decay_t<T> unbox(std::vector<c10::IValue>& args, size_t i) {
  using D = std::decay_t<T>;
  if (i >= args.size()) {
    if constexpr (std::is_same_v<D, at::Tensor> || is_optional<D>::value) {
      return D{};
    } else {
      throw TraceError("forward argument " + std::to_string(i) +
                       " is missing: pass it in example_inputs or concrete_args");
    }
  } else if constexpr (std::is_same_v<D, c10::IValue>) {
    return args[i];
  } else {
    return args[i].to<D>();
  }
}

template <class R>
c10::IValue box_result(R&& r) {
  return c10::IValue(std::forward<R>(r));
}

/// Calls f with the boxed arguments unboxed to A...
template <class... A>
struct Unboxer {
  template <class F, size_t... I>
  static c10::IValue call(F&& f, std::vector<c10::IValue>& args, std::index_sequence<I...>) {
    if (args.size() > sizeof...(A))
      throw TraceError("forward takes " + std::to_string(sizeof...(A)) + " arguments, " +
                       std::to_string(args.size()) + " were given");
    return box_result(f(unbox<A>(args, I)...));
  }
};

template <class M, class C, class R, class... A>
c10::IValue call_forward_ptr(M& m, R (C::*f)(A...), std::vector<c10::IValue>& args) {
  return Unboxer<A...>::call([&](auto&&... a) -> R { return (m.*f)(std::forward<decltype(a)>(a)...); }, args,
                             std::index_sequence_for<A...>{});
}

template <class M, class C, class R, class... A>
c10::IValue call_forward_ptr(M& m, R (C::*f)(A...) const, std::vector<c10::IValue>& args) {
  return Unboxer<A...>::call([&](auto&&... a) -> R { return (m.*f)(std::forward<decltype(a)>(a)...); }, args,
                             std::index_sequence_for<A...>{});
}

/// Whether T is a module handle (shared_ptr or ModuleHolder) rather than a
/// traced function. Checked first so that a ModuleHolder's operator() is
/// never instantiated with a vector of IValues.
template <class T>
struct is_module_handle : std::is_base_of<torch::nn::Module, T> {};
template <class T>
struct is_module_handle<std::shared_ptr<T>> : std::true_type {};
template <class T>
struct is_module_handle<torch::nn::ModuleHolder<T>> : std::true_type {};
template <class T>
struct is_holder_derived {
  template <class I>
  static std::true_type test(const torch::nn::ModuleHolder<I>*);
  static std::false_type test(...);
  static constexpr bool value = decltype(test(std::declval<T*>()))::value;
};
/// Whether F can be traced as a free function.
template <class F>
struct is_traced_function
    : std::conjunction<std::negation<is_module_handle<std::decay_t<F>>>,
                       std::bool_constant<!is_holder_derived<std::decay_t<F>>::value>,
                       std::is_invocable_r<c10::IValue, std::decay_t<F>&, std::vector<c10::IValue>>> {};

template <class M, class = void>
struct has_plain_forward : std::false_type {};
template <class M>
struct has_plain_forward<M, std::void_t<decltype(&M::forward)>> : std::true_type {};

/// A TracedFunction calling m->forward with unboxed arguments.
template <class M>
TracedFunction forward_of(const std::shared_ptr<M>& m) {
  if constexpr (std::is_base_of_v<torch::nn::SequentialImpl, M>) {
    return [m](std::vector<c10::IValue> args) -> c10::IValue {
      if (args.size() != 1 || !args[0].isTensor())
        throw TraceError("a Sequential is traced with exactly one tensor input");
      return c10::IValue(m->forward(args[0].toTensor()));
    };
  } else {
    static_assert(has_plain_forward<M>::value,
                  "fx::symbolic_trace: M::forward is overloaded or a template; pass a TracedFunction that calls it");
    return [m](std::vector<c10::IValue> args) -> c10::IValue { return call_forward_ptr(*m, &M::forward, args); };
  }
}

}  // namespace trace_detail

/// How a trace captures shapes (an fxcpp addition: torch.fx traces with
/// symbolic sizes instead).
struct TraceOptions {
  /// One dimension that may vary at run time: example input `input` (a
  /// tensor, counted among the example inputs only), dimension `dim`
  /// (negative counts from the end).
  struct Dim {
    Dim() = default;
    /// Dimension `dim` of example input `input`, sharing its size with the
    /// other dimensions declared with the same non-empty `name`.
    Dim(size_t input, int64_t dim, std::string name = {}) : input(input), dim(dim), name(std::move(name)) {}
    size_t input = 0;
    int64_t dim = 0;
    /// Dimensions declared with the same non-empty name are one size: they
    /// are grown together when probing (x and a mask sharing the batch:
    /// {{0, 0, "batch"}, {1, 0, "batch"}}) and must have the same example
    /// size. An unnamed dimension is a size of its own.
    std::string name;
  };
  /// The dimensions the graph must be valid for at any size, e.g. {{0, 0}}
  /// for the batch dimension of the first input (see "Dynamic dimensions"
  /// above). Each size costs two more traces.
  std::vector<Dim> dynamic_dims;
  /// Record a ShapeGuard in meta["shape_guard"] of every tensor placeholder
  /// (on by default; off: graphs run on any shape, as before guards existed).
  bool shape_guards = true;
  /// Compute every recorded operator on the real example values (one eager
  /// forward). Off (the default): on meta tensors of the same shape, dtype
  /// and strides (no data computed, parameters never read); operators
  /// without a meta kernel run on real zero-filled values of the same
  /// metadata and are listed in Tracer::meta_fallbacks(). Code that reads
  /// traced values (item(), control flow) fails the same way in both modes.
  /// Switch it on for shapes that depend on data (nonzero, unique, masked
  /// selects: on zeros they come out empty).
  bool real_values = false;
};

/// Captures a module's forward (or a free function) as a Graph
/// (torch.fx `Tracer`). Subclass it to choose the leaf modules.
class Tracer {
 public:
  Tracer();
  virtual ~Tracer();
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  /// Whether `m` (at `qualified_name` under the root) is kept as one
  /// call_module node. The default: true for the module types listed in this
  /// file's documentation, false for every other module. The root itself is
  /// never a leaf.
  virtual bool is_leaf_module(const torch::nn::Module& m, const std::string& qualified_name);

  /// Traces `forward` (which runs `root`'s forward, or any code using root's
  /// parameters) on `example_inputs`, with `concrete_args` bound to constants.
  /// Tensor inputs, and lists/tuples of tensors, become placeholders. Throws
  /// fx::TraceError on control flow that depends on traced values; operator
  /// errors propagate with the operator named. A failed trace leaves no state
  /// behind.
  std::shared_ptr<Graph> trace(std::shared_ptr<torch::nn::Module> root, const TracedFunction& forward,
                               std::vector<c10::IValue> example_inputs, const ConcreteArgs& concrete_args = {});
  /// Traces root->forward(...) of a module whose forward is neither
  /// overloaded nor a template (or a Sequential with one tensor input).
  template <class M>
  std::shared_ptr<Graph> trace(const std::shared_ptr<M>& root, std::vector<c10::IValue> example_inputs,
                               const ConcreteArgs& concrete_args = {}) {
    return trace(std::static_pointer_cast<torch::nn::Module>(root), trace_detail::forward_of(root),
                 std::move(example_inputs), concrete_args);
  }
  /// Traces a module held by a ModuleHolder (torch::nn::Linear, TORCH_MODULE types).
  template <class Impl>
  std::shared_ptr<Graph> trace(const torch::nn::ModuleHolder<Impl>& root, std::vector<c10::IValue> example_inputs,
                               const ConcreteArgs& concrete_args = {}) {
    return trace(root.ptr(), std::move(example_inputs), concrete_args);
  }
  /// Traces a free function (no root module): any callable taking the
  /// forward arguments as a std::vector<c10::IValue> and returning an IValue.
  template <class F, std::enable_if_t<trace_detail::is_traced_function<F>::value, int> = 0>
  std::shared_ptr<Graph> trace(F&& fn, std::vector<c10::IValue> example_inputs,
                               const ConcreteArgs& concrete_args = {}) {
    return trace(nullptr, TracedFunction(std::forward<F>(fn)), std::move(example_inputs), concrete_args);
  }

  /// The module the last trace's graph refers to (torch.fx `tracer.root`):
  /// it shares the traced root's submodules, parameters and buffers and also
  /// holds the tensor constants (`_tensor_constant0` ...). The traced root
  /// itself is not modified. Build the result with
  /// `std::make_shared<GraphModule>(tracer.root(), graph, tracer.root_class_name())`.
  std::shared_ptr<torch::nn::Module> root() const { return traced_root_; }
  /// The traced root's class name ("ResidualNet" for ResidualNetImpl),
  /// "GraphModule" for a free function.
  const std::string& root_class_name() const { return class_name_; }
  /// Names for the placeholders, in input order (missing ones get defaults).
  void set_input_names(std::vector<std::string> names) { input_names_ = std::move(names); }
  /// How the next traces capture shapes (guards, dynamic dimensions).
  void set_options(TraceOptions options) { options_ = std::move(options); }
  /// The options traces use.
  const TraceOptions& options() const { return options_; }
  /// The operators the last trace ran on zero-filled real values because
  /// they have no meta kernel (TraceOptions::real_values off), in the order
  /// first met; empty after a trace on real values.
  const std::vector<std::string>& meta_fallbacks() const { return meta_fallbacks_; }

 private:
  /// One trace at the example sizes; `record_factories` records operators
  /// without tensor arguments instead of running them.
  std::shared_ptr<Graph> trace_once(const std::shared_ptr<torch::nn::Module>& root, const TracedFunction& forward,
                                    std::vector<c10::IValue> example_inputs, const ConcreteArgs& concrete_args,
                                    bool record_factories);
  /// trace() with options_.dynamic_dims not empty.
  std::shared_ptr<Graph> trace_dynamic(const std::shared_ptr<torch::nn::Module>& root, const TracedFunction& forward,
                                       std::vector<c10::IValue> example_inputs, const ConcreteArgs& concrete_args);

  TraceOptions options_;
  std::vector<std::string> meta_fallbacks_;
  std::shared_ptr<torch::nn::Module> traced_root_;
  std::string class_name_ = "GraphModule";
  std::vector<std::string> input_names_;
};

/// Traces `forward` with the default Tracer into a GraphModule.
std::shared_ptr<GraphModule> symbolic_trace(std::shared_ptr<torch::nn::Module> root, const TracedFunction& forward,
                                            std::vector<c10::IValue> example_inputs,
                                            const ConcreteArgs& concrete_args = {}, const TraceOptions& options = {});
/// Traces a free function (any callable taking the forward arguments as a
/// std::vector<c10::IValue>) into a GraphModule (no parameters; constants only).
template <class F, std::enable_if_t<trace_detail::is_traced_function<F>::value, int> = 0>
std::shared_ptr<GraphModule> symbolic_trace(F&& fn, std::vector<c10::IValue> example_inputs,
                                            const ConcreteArgs& concrete_args = {}, const TraceOptions& options = {}) {
  return symbolic_trace(nullptr, TracedFunction(std::forward<F>(fn)), std::move(example_inputs), concrete_args,
                        options);
}
/// Traces `tracer` and wraps the graph with the tracer's root (torch.fx
/// `GraphModule(tracer.root, tracer.trace(root))`).
std::shared_ptr<GraphModule> to_graph_module(const Tracer& tracer, std::shared_ptr<Graph> graph);

/// Traces root->forward(...) into a GraphModule (torch.fx `symbolic_trace(m)`).
template <class M>
std::shared_ptr<GraphModule> symbolic_trace(const std::shared_ptr<M>& root, std::vector<c10::IValue> example_inputs,
                                            const ConcreteArgs& concrete_args = {}, const TraceOptions& options = {}) {
  Tracer tracer;
  tracer.set_options(options);
  auto graph = tracer.trace(root, std::move(example_inputs), concrete_args);
  return to_graph_module(tracer, std::move(graph));
}
/// Traces a module held by a ModuleHolder (torch::nn::Linear, TORCH_MODULE types).
template <class Impl>
std::shared_ptr<GraphModule> symbolic_trace(const torch::nn::ModuleHolder<Impl>& root,
                                            std::vector<c10::IValue> example_inputs,
                                            const ConcreteArgs& concrete_args = {}, const TraceOptions& options = {}) {
  return symbolic_trace(root.ptr(), std::move(example_inputs), concrete_args, options);
}

}  // namespace fx
