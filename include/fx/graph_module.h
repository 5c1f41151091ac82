#pragma once
/// \file
/// GraphModule: a torch::nn::Module that holds a Graph and runs it
/// (torch.fx `GraphModule`).
///
/// It owns the submodules, parameters and buffers its graph's call_module
/// and get_attr nodes name, under the same qualified names. forward() runs a
/// compiled plan: operator handles resolved once, values in numbered slots,
/// each freed after its last use. Any edit of the graph bumps
/// Graph::version(); the next forward()/code() sees the change and
/// recompiles, so stale code can never run.
///
/// A C++ module's forward() is not virtual, so call_module nodes call
/// submodules through a forward registered per module type: every common
/// torch::nn layer is registered, and register_module_type<M>() teaches
/// fxcpp any other module whose forward takes and returns IValue-convertible
/// values.

#include <fx/graph.h>
#include <fx/memory_plan.h>
#include <fx/target.h>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeindex>
#include <utility>
#include <vector>

namespace fx {

/// Calls a module's forward with boxed values (positional only).
using ModuleForward = std::function<c10::IValue(torch::nn::Module& module, std::vector<c10::IValue>& args)>;

/// Teaches fxcpp how to call forward() on modules whose dynamic type is `type`
/// (a C++ module's forward is not virtual). The torch::nn layers are known.
/// Registering a type again replaces its forward for plans compiled later.
void register_module_forward(std::type_index type, ModuleForward fn);
/// The forward registered for the dynamic type of `module`, or nullptr. The
/// pointer stays valid for the life of the program.
const ModuleForward* find_module_forward(const torch::nn::Module& module);

namespace detail {

/// The parameter and result types of a member function (M::forward).
template <class F>
struct forward_traits;
template <class M, class R, class... A>
struct forward_traits<R (M::*)(A...)> {
  using module = M;
  using result = R;
  static constexpr size_t arity = sizeof...(A);
};
template <class M, class R, class... A>
struct forward_traits<R (M::*)(A...) const> : forward_traits<R (M::*)(A...)> {};

/// Unboxes an IValue into a parameter of type T, holding whatever storage the
/// parameter refers to (an IntArrayRef's ints) until the call returns.
template <class T>
struct Unbox {
  using D = std::decay_t<T>;
  D value;
  explicit Unbox(const c10::IValue& v) : value(v.to<D>()) {}
  D& get() { return value; }
};
/// Tensors are passed by reference; None stands for an undefined tensor.
template <>
struct Unbox<const at::Tensor&> {
  at::Tensor holder;
  const at::Tensor* ref;
  explicit Unbox(const c10::IValue& v) : ref(v.isTensor() ? &v.toTensor() : &holder) {}
  const at::Tensor& get() { return *ref; }
};
/// A Tensor taken by value; None stands for an undefined tensor.
template <>
struct Unbox<at::Tensor> {
  at::Tensor value;
  explicit Unbox(const c10::IValue& v) : value(v.isTensor() ? v.toTensor() : at::Tensor()) {}
  at::Tensor& get() { return value; }
};
/// int[] views need storage.
template <>
struct Unbox<at::IntArrayRef> {
  std::vector<int64_t> storage;
  explicit Unbox(const c10::IValue& v) : storage(v.isInt() ? std::vector<int64_t>{v.toInt()} : v.toIntVector()) {}
  at::IntArrayRef get() { return storage; }
};
template <>
struct Unbox<const at::IntArrayRef&> : Unbox<at::IntArrayRef> {
  using Unbox<at::IntArrayRef>::Unbox;
};
template <>
struct Unbox<c10::optional<at::IntArrayRef>> {
  std::vector<int64_t> storage;
  c10::optional<at::IntArrayRef> value;
  explicit Unbox(const c10::IValue& v) {
    if (!v.isNone()) {
      storage = v.isInt() ? std::vector<int64_t>{v.toInt()} : v.toIntVector();
      value = at::IntArrayRef(storage);
    }
  }
  c10::optional<at::IntArrayRef>& get() { return value; }
};
template <>
struct Unbox<const c10::optional<at::IntArrayRef>&> : Unbox<c10::optional<at::IntArrayRef>> {
  using Unbox<c10::optional<at::IntArrayRef>>::Unbox;
};

/// A forward's result as an IValue (void → None).
template <class F, class... P>
c10::IValue box_result(F&& f, P&&... params) {
  using R = decltype(f(std::forward<P>(params)...));
  if constexpr (std::is_void_v<R>) {
    f(std::forward<P>(params)...);
    return c10::IValue();
  } else {
    return c10::IValue(f(std::forward<P>(params)...));
  }
}

struct ForwardDefaults;

}  // namespace detail
}  // namespace fx

namespace torch::nn {
/// fxcpp's reading of the defaults a module declares with
/// FORWARD_HAS_DEFAULT_ARGS: Module's protected members, which it opens to
/// AnyModuleHolder. One class for every module type, where an AnyModule per
/// type would compile the type's AnyModuleHolder and clone().
template <>
struct AnyModuleHolder<fx::detail::ForwardDefaults> {
  static bool declared(Module& m) { return m._forward_has_default_args(); }
  static unsigned required(Module& m) { return m._forward_num_required_args(); }
  static std::vector<AnyValue> filled(Module& m, std::vector<AnyValue>&& given) {
    return m._forward_populate_default_args(std::move(given));
  }
};
}  // namespace torch::nn

namespace fx {
namespace detail {

/// m.*f on the values of `all` (one per parameter, of its decayed type).
template <class M, class C, class R, class... A, size_t... I>
c10::IValue call_with_values(M& m, R (C::*f)(A...), std::vector<torch::nn::AnyValue>& all, std::index_sequence<I...>) {
  return box_result([&](auto&&... p) -> decltype(auto) { return (m.*f)(std::forward<decltype(p)>(p)...); },
                    all[I].template get<std::decay_t<A>>()...);
}

/// Calls m.*f with the first sizeof...(J) arguments and the defaults M
/// declares with FORWARD_HAS_DEFAULT_ARGS for the others; a runtime_error
/// naming the module when it declares none or fewer arguments are given
/// than it requires.
template <class M, class C, class R, class... A, class Unboxed, size_t... J>
c10::IValue forward_with_defaults(M& m, R (C::*f)(A...), Unboxed& unboxed, std::index_sequence<J...>) {
  using Defaults = torch::nn::AnyModuleHolder<ForwardDefaults>;
  constexpr size_t arity = sizeof...(A), n = sizeof...(J);
  const size_t required = Defaults::declared(m) ? Defaults::required(m) : arity;
  if (n < required)
    throw std::runtime_error(m.name() + "::forward() takes " +
                             (required < arity ? "from " + std::to_string(required) + " to " : std::string()) +
                             std::to_string(arity) + " arguments but " + std::to_string(n) + " were given");
  using Params = std::tuple<A...>;
  std::vector<torch::nn::AnyValue> given;
  given.reserve(arity);
  (given.emplace_back(std::decay_t<std::tuple_element_t<J, Params>>(std::get<J>(unboxed)->get())), ...);
  std::vector<torch::nn::AnyValue> all = Defaults::filled(m, std::move(given));
  if (all.size() != arity)
    throw std::runtime_error(m.name() + "::forward(): its defaults gave " + std::to_string(all.size()) +
                             " arguments of " + std::to_string(arity));
  return call_with_values(m, f, all, std::make_index_sequence<arity>{});
}

/// Calls m.*f (f may be declared in a base class of M, as the torch::nn
/// templates do) with args unboxed to f's parameter types.
template <class M, class C, class R, class... A, size_t... I>
c10::IValue call_forward(M& m, R (C::*f)(A...), std::vector<c10::IValue>& args, std::index_sequence<I...>) {
  constexpr size_t arity = sizeof...(A);
  if (args.size() > arity)
    throw std::runtime_error(m.name() + "::forward() takes " + std::to_string(arity) + " arguments but " +
                             std::to_string(args.size()) + " were given");
  if (args.size() == arity) {
    std::tuple<Unbox<A>...> unboxed{args[I]...};  // built in place: Unbox may point into itself
    return box_result([&](auto&&... p) -> decltype(auto) { return (m.*f)(std::forward<decltype(p)>(p)...); },
                      std::get<I>(unboxed).get()...);
  }
  if constexpr (std::is_void_v<R>) {
    throw std::runtime_error(m.name() + "::forward() takes " + std::to_string(arity) + " arguments but " +
                             std::to_string(args.size()) + " were given");
  } else {
    // Fewer arguments: unbox those given, then call with that many.
    const size_t n = args.size();
    std::tuple<std::optional<Unbox<A>>...> unboxed;
    (void)std::initializer_list<int>{(I < n ? (std::get<I>(unboxed).emplace(args[I]), 0) : 0)...};
    c10::IValue result;
    (void)std::initializer_list<int>{
        (I == n ? (result = forward_with_defaults(m, f, unboxed, std::make_index_sequence<I>{}), 0) : 0)...};
    return result;
  }
}

}  // namespace detail

/// A ModuleForward calling M::forward (arguments and result convertible
/// to/from IValue; missing trailing arguments take the defaults M declares
/// with FORWARD_HAS_DEFAULT_ARGS).
template <class M>
ModuleForward make_module_forward() {
  return [](torch::nn::Module& m, std::vector<c10::IValue>& args) {
    auto f = &M::forward;
    using traits = detail::forward_traits<decltype(f)>;
    return detail::call_forward(dynamic_cast<M&>(m), f, args, std::make_index_sequence<traits::arity>{});
  };
}

/// Registers M::forward for call_module (see make_module_forward). M is the
/// module class (torch::nn::LinearImpl, not the holder torch::nn::Linear).
template <class M>
void register_module_type() {
  register_module_forward(typeid(M), make_module_forward<M>());
}

namespace detail {
class CompiledPlan;
class MemoryPlanner;
}

/// A module holding a graph, runnable like any torch::nn::Module.
class GraphModule : public torch::nn::Module {
 public:
  /// Takes from `root` exactly the submodules, parameters and buffers that
  /// the graph's call_module and get_attr nodes name (torch.fx semantics:
  /// the objects are shared, not copied; intermediate modules of a nested
  /// name such as "layer1.0.conv1" are created empty). Throws fx::Error
  /// naming the node when a target is missing from root.
  GraphModule(const std::shared_ptr<torch::nn::Module>& root, std::shared_ptr<Graph> graph,
              std::string class_name = "GraphModule");
  ~GraphModule() override;

  /// The graph; editing it marks this module stale.
  Graph& graph() const { return *graph_; }
  /// The graph, shared.
  std::shared_ptr<Graph> graph_ptr() const { return graph_; }
  /// Replaces the graph (torch.fx gm.graph = g).
  void set_graph(std::shared_ptr<Graph> graph);

  /// Runs the graph on `inputs` through the compiled plan, recompiling first
  /// if the graph changed. Safe to call from several threads at once. An
  /// exception inside a node is rethrown as fx::Error with
  /// "While executing <format_node>" appended. Missing or extra inputs give
  /// Python's messages ("forward() missing 1 required positional argument: 'y'").
  c10::IValue forward(std::vector<c10::IValue> inputs);
  /// Single-tensor convenience: forward(x) is forward({x}).toTensor(). A
  /// template, so that a braced list (`forward({x})`) always means the
  /// vector overload above, as DESIGN.md spells it.
  template <class T, class = std::enable_if_t<std::is_same_v<T, at::Tensor>>>
  at::Tensor forward(const T& x) {
    return forward_tensor(x);
  }

  /// forward(x) for one tensor in, one tensor out.
  at::Tensor forward_tensor(const at::Tensor& x);

  /// Recompiles now (forward() does it when needed).
  void recompile();
  /// The generated forward text (torch.fx gm.code), always current.
  std::string code();
  /// The class with its forward, as torch.fx print_readable() shows it:
  /// verbose code with the stack-trace summary comments (see
  /// Graph::python_code), nested GraphModules' plain code following, indented.
  std::string print_readable();

  /// The tensor at `qualified_name` ("layer1.0.conv1.weight"); throws
  /// fx::Error ("Node referenced nonexistent target ...") if there is none.
  at::Tensor fetch_attr(const std::string& qualified_name) const;
  /// The submodule at `target` ("" is this module); throws fx::Error if there is none.
  std::shared_ptr<torch::nn::Module> get_submodule(const std::string& target) const;
  /// Installs `module` at `target`, creating empty parents; false if a
  /// non-module attribute is in the way.
  bool add_submodule(const std::string& target, std::shared_ptr<torch::nn::Module> module);
  /// Removes the submodule at `target`; false if there is none.
  bool delete_submodule(const std::string& target);
  /// Removes every submodule that no call_module or get_attr node uses
  /// (torch.fx rules: parents of used modules and children of called ones stay).
  void delete_all_unused_submodules();
  /// Sets the tensor at `qualified_name`, creating empty parent modules: a
  /// new parameter if it requires grad, else a new buffer. An existing
  /// attribute of that name keeps its identity and takes the new data.
  void register_attr(const std::string& qualified_name, const at::Tensor& value);

  /// The class name shown by print_readable().
  const std::string& class_name() const { return class_name_; }

  /// Turns the static memory plan of forward() on or off (fx/memory_plan.h):
  /// the first forward for given input shapes records its tensor buffers,
  /// later ones take them from an arena at planned offsets. Off by default;
  /// fx::optimize_for_inference turns it on. Interpreter runs are not planned.
  void set_memory_planning(bool enabled);
  /// Whether forward() plans memory.
  bool memory_planning() const { return std::atomic_load(&memory_planner_) != nullptr; }
  /// What the memory plan did (all zero and active == false when off).
  MemoryPlanStats memory_plan_stats() const;

 private:
  std::shared_ptr<const detail::CompiledPlan> plan();
  void touch() { module_version_.fetch_add(1, std::memory_order_acq_rel); }
  std::shared_ptr<Graph> graph_;
  std::string class_name_;
  std::mutex compile_mutex_;
  std::shared_ptr<const detail::CompiledPlan> plan_;
  std::shared_ptr<detail::MemoryPlanner> memory_planner_;
  std::atomic<uint64_t> module_version_{0};
  uint64_t code_version_ = ~uint64_t(0);
  const Graph* code_graph_ = nullptr;
  std::string code_;
};

}  // namespace fx
