// insert_gradient_ready_hooks: a backward graph that reports each gradient
// the moment its node has run.
#include "aot/gradient_ready_hooks.h"

#include <fx/error.h>

#include <mutex>
#include <unordered_map>

namespace fx::aot_impl {

namespace {

constexpr const char* kHookName = "gradient_ready_hook";

void register_hook_module() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_module_forward(typeid(GradientReadyHookModule),
                            [](torch::nn::Module& m, std::vector<c10::IValue>& args) -> c10::IValue {
                              if (args.size() != 2 || !args[1].isInt())
                                throw Error("gradient_ready_hook takes (gradient, index)");
                              const at::Tensor grad = args[0].isTensor() ? args[0].toTensor() : at::Tensor();
                              dynamic_cast<GradientReadyHookModule&>(m).forward(grad, args[1].toInt());
                              return c10::IValue();
                            });
  });
}

}  // namespace

GradientReadyHookModule::GradientReadyHookModule(GradientReadyHook hook)
    : torch::nn::Module("GradientReadyHook"), hook_(std::move(hook)) {}

void GradientReadyHookModule::forward(const at::Tensor& grad, int64_t index) const {
  hook_(static_cast<size_t>(index), grad);
}

HookedBackward insert_gradient_ready_hooks(const std::shared_ptr<GraphModule>& backward,
                                           const std::vector<bool>& hooked,
                                           std::shared_ptr<GradientReadyHookModule> hook, bool consume) {
  register_hook_module();
  const Node* old_output = backward->graph().output_node();
  if (!old_output || old_output->args().empty())
    throw Error("insert_gradient_ready_hooks: the backward graph has no output");
  auto graph = std::make_shared<Graph>();
  std::unordered_map<const Node*, Node*> copies;
  const Argument result = *graph->graph_copy(backward->graph(), copies);
  Node* output = graph->output(result);
  HookedBackward out;
  out.module = std::make_shared<GraphModule>(backward, graph, backward->class_name());
  if (!out.module->add_submodule(kHookName, std::move(hook)))
    throw Error("insert_gradient_ready_hooks: the backward graph already has an attribute '" + std::string(kHookName) + "'");

  const std::vector<Argument> grads = result.is_sequence() ? result.items() : std::vector<Argument>{result};
  if (grads.size() != hooked.size())
    throw Error("insert_gradient_ready_hooks: the backward graph returns " + std::to_string(grads.size()) +
                " gradients for " + std::to_string(hooked.size()) + " inputs");
  Node* last_placeholder = nullptr;
  for (Node* n : graph->nodes())
    if (n->op() == Opcode::Placeholder) last_placeholder = n;
  // The hook calls go right after their gradient's node; `after` keeps the
  // last call inserted after each node, so one node's calls stay in output order.
  std::unordered_map<Node*, Node*> after;
  for (size_t k = 0; k < grads.size(); ++k) {
    if (!hooked[k]) continue;
    if (grads[k].is_none()) {
      out.none_outputs.push_back(k);
      continue;
    }
    if (!grads[k].is_node()) {
      out.constant_outputs.push_back(k);
      continue;
    }
    Node* grad = grads[k].to_node();
    Node* anchor = grad->op() == Opcode::Placeholder ? last_placeholder : grad;
    auto it = after.find(anchor);
    auto guard = graph->inserting_after(it == after.end() ? anchor : it->second);
    after[anchor] = graph->call_module(kHookName, {grad, static_cast<int64_t>(k)});
  }
  if (consume) {
    std::vector<Argument> returned = grads;
    for (size_t k = 0; k < returned.size(); ++k)
      if (hooked[k] && returned[k].is_node()) returned[k] = Argument();
    output->update_arg(0, !result.is_sequence()                 ? returned.front()
                          : result.kind() == Argument::Kind::Tuple ? Argument::tuple(std::move(returned))
                                                                    : Argument::list(std::move(returned)));
  }
  graph->lint();
  return out;
}

}  // namespace fx::aot_impl
