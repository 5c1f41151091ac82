// Transformer: builds a new GraphModule by interpreting a graph symbolically.
#include <fx/interpreter.h>

#include "execution/opcode_dispatch.h"

#include "execution/node_error.h"

#include <fx/error.h>

namespace fx {

Transformer::Transformer(std::shared_ptr<GraphModule> module)
    : module_(std::move(module)), new_graph_(std::make_shared<Graph>()) {
  if (!module_) throw Error("Transformer: module is null");
}

Transformer::~Transformer() = default;

std::shared_ptr<GraphModule> Transformer::transform() {
  env_.clear();
  std::optional<Argument> result;
  for (Node* node : module_->graph().nodes()) {
    current_ = node;
    try {
      Argument value = run_node(node);
      if (node->op() == Opcode::Output) {
        result = std::move(value);
        break;
      }
      env_[node] = std::move(value);
    } catch (...) {
      current_ = nullptr;
      detail::rethrow_while_executing(*node);
    }
  }
  current_ = nullptr;
  if (result) new_graph_->output(*result);
  return std::make_shared<GraphModule>(module_, new_graph_);
}

Argument Transformer::run_node(Node* n) {
  current_ = n;
  auto lookup = [&](Node* x) -> Argument {
    auto it = env_.find(x);
    if (it == env_.end())
      throw Error("Node " + n->name() + " referenced nonexistent value " + x->name() +
                  "! Run Graph.lint() to diagnose such issues");
    return it->second;
  };
  ArgList args = map_arg(n->args(), lookup);
  Kwargs kwargs = map_arg(n->kwargs(), lookup);
  if (n->op() == Opcode::Output) return output(n->target(), args, kwargs);
  Argument out = detail::call_opcode_method(*this, n, args, kwargs);
  // torch.fx 1.13 copies no meta onto the new nodes: tensor_meta, val ...
  // may be stale once an override changed the op. Only the stack trace is
  // kept (what torch.fx does under fx.traceback.override_stack_trace), so
  // generated code and errors still point at the source line.
  if (out.is_node() && &out.to_node()->graph() == new_graph_.get() && out.to_node()->stack_trace().empty()) {
    std::string trace = n->stack_trace();
    if (!trace.empty()) out.to_node()->set_stack_trace(std::move(trace));
  }
  return out;
}

Argument Transformer::placeholder(const std::string& target, const ArgList& args, const Kwargs&) {
  std::optional<Argument> default_value;
  if (!args.empty()) default_value = args[0];
  return new_graph_->placeholder(target, default_value);
}

Argument Transformer::get_attr(const std::string& target, const ArgList&, const Kwargs&) {
  return new_graph_->get_attr(target);
}

Argument Transformer::call_function(const std::string& target, const ArgList& args, const Kwargs& kwargs) {
  return new_graph_->call_function(target, args, kwargs);
}

Argument Transformer::call_module(const std::string& target, const ArgList& args, const Kwargs& kwargs) {
  return new_graph_->call_module(target, args, kwargs);
}

Argument Transformer::call_method(const std::string& target, const ArgList& args, const Kwargs& kwargs) {
  return new_graph_->call_method(target, args, kwargs);
}

Argument Transformer::output(const std::string&, const ArgList& args, const Kwargs&) {
  return args.empty() ? Argument() : args[0];
}

}  // namespace fx
