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

#include <fx/graph.h>
#include <fx/target.h>

#include <torch/nn/module.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <typeindex>
#include <vector>

namespace fx {

/// Calls a module's forward with boxed values.
using ModuleForward = std::function<c10::IValue(torch::nn::Module& module, std::vector<c10::IValue>& args)>;

/// Teaches fxcpp how to call forward() on modules whose dynamic type is `type`
/// (a C++ module's forward is not virtual). The torch::nn layers are known.
void register_module_forward(std::type_index type, ModuleForward fn);
/// The forward registered for the dynamic type of `module`, or nullptr.
const ModuleForward* find_module_forward(const torch::nn::Module& module);

namespace detail {
template <class T>
T unbox_arg(std::vector<c10::IValue>& args, size_t i) {
  using D = std::decay_t<T>;
  if (i >= args.size()) return D{};  // defaulted trailing argument
  return args[i].to<D>();
}
template <class M, class R, class... A, size_t... I>
c10::IValue call_forward(M& m, R (M::*f)(A...), std::vector<c10::IValue>& args, std::index_sequence<I...>) {
  return c10::IValue((m.*f)(unbox_arg<A>(args, I)...));
}
}  // namespace detail

/// Registers M::forward (arguments and result convertible to/from IValue).
template <class M>
void register_module_type() {
  register_module_forward(typeid(M), [](torch::nn::Module& m, std::vector<c10::IValue>& args) {
    auto f = &M::forward;
    return detail::call_forward(static_cast<M&>(m), f, args,
                                std::make_index_sequence<detail::arity(f)>{});
  });
}

class CompiledPlan;

/// A module holding a graph, runnable like any torch::nn::Module.
class GraphModule : public torch::nn::Module {
 public:
  /// Takes from `root` exactly the submodules, parameters and buffers that
  /// the graph's call_module and get_attr nodes name (torch.fx semantics).
  /// Throws fx::Error naming the node when a target is missing from root.
  GraphModule(const std::shared_ptr<torch::nn::Module>& root, std::shared_ptr<Graph> graph,
              std::string class_name = "GraphModule");
  ~GraphModule() override;

  /// The graph; editing it marks this module stale.
  Graph& graph() const { return *graph_; }
  std::shared_ptr<Graph> graph_ptr() const { return graph_; }
  /// Replaces the graph (torch.fx gm.graph = g).
  void set_graph(std::shared_ptr<Graph> graph);

  /// Runs the graph on `inputs` through the compiled plan, recompiling first
  /// if the graph changed. Safe to call from several threads at once.
  c10::IValue forward(std::vector<c10::IValue> inputs);
  /// Single-tensor convenience: forward({x}).toTensor().
  at::Tensor forward(const at::Tensor& x);

  /// Recompiles now (forward() and code() do it when needed).
  void recompile();
  /// The generated forward text (torch.fx gm.code).
  std::string code();
  /// The class with its forward, as torch.fx print_readable() shows it.
  std::string print_readable();

  /// The tensor at `qualified_name` ("layer1.0.conv1.weight").
  at::Tensor fetch_attr(const std::string& qualified_name) const;
  /// The submodule at `target`; throws fx::Error if there is none.
  std::shared_ptr<torch::nn::Module> get_submodule(const std::string& target) const;
  /// Installs `module` at `target`, creating empty parents; false if a
  /// non-module attribute is in the way.
  bool add_submodule(const std::string& target, std::shared_ptr<torch::nn::Module> module);
  /// Removes the submodule at `target`; false if there is none.
  bool delete_submodule(const std::string& target);
  /// Removes every submodule that no call_module or get_attr node uses.
  void delete_all_unused_submodules();
  /// Sets the tensor at `qualified_name` (a parameter if requires_grad, else a buffer).
  void register_attr(const std::string& qualified_name, const at::Tensor& value);

  /// The class name shown by print_readable().
  const std::string& class_name() const { return class_name_; }

 private:
  std::shared_ptr<const CompiledPlan> plan();
  std::shared_ptr<Graph> graph_;
  std::string class_name_;
  std::mutex compile_mutex_;
  std::shared_ptr<const CompiledPlan> plan_;
};

}  // namespace fx
