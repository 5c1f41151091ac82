// fx::Tracer and fx::symbolic_trace: drive one trace from inputs to a graph.
#include <fx/trace.h>

#include <fx/meta_kernels.h>

#include "trace/dispatch_hook.h"
#include "trace/leaf_modules.h"
#include "trace/trace_session.h"

#include <c10/util/Exception.h>

#include <functional>
#include <set>

namespace fx {
namespace {

using trace_impl::AttrTensor;
using trace_impl::LeafContext;
using trace_impl::TraceSession;

// "fx::examples::ResidualNetImpl" → "ResidualNet" (torch.fx uses the class name).
std::string class_name_of(const torch::nn::Module& m) {
  std::string n = m.name();
  const size_t colon = n.rfind("::");
  if (colon != std::string::npos) n = n.substr(colon + 2);
  if (n.size() > 4 && n.compare(n.size() - 4, 4, "Impl") == 0) n.resize(n.size() - 4);
  return n.empty() ? "GraphModule" : n;
}

std::string default_input_name(size_t i, size_t count) {
  return count == 1 ? "x" : "arg" + std::to_string(i);
}

// The modules that are leaves, and the owner table of their tensors.
LeafContext leaf_context(Tracer& tracer, const torch::nn::Module& root) {
  LeafContext ctx;
  std::function<void(const torch::nn::Module&, const std::string&)> visit = [&](const torch::nn::Module& m,
                                                                                const std::string& prefix) {
    for (const auto& child : m.named_children()) {
      const std::string q = prefix.empty() ? child.key() : prefix + "." + child.key();
      const torch::nn::Module& c = *child.value();
      if (tracer.is_leaf_module(c, q)) {
        if (!trace_impl::has_leaf_pattern(c)) {
          throw TraceError("is_leaf_module returned true for '" + q + "' (" + c.name() +
                           "), but fxcpp cannot recognize calls of this module type: C++ module calls are "
                           "found from the operators they issue with their own parameters, which works for " +
                           trace_impl::leaf_pattern_types());
        }
        for (const auto& p : c.named_parameters(/*recurse=*/false)) {
          ctx.owners.emplace(q + "." + p.key(), LeafContext::Owner{q, &c, p.key()});
        }
        for (const auto& b : c.named_buffers(/*recurse=*/false)) {
          ctx.owners.emplace(q + "." + b.key(), LeafContext::Owner{q, &c, b.key()});
        }
        continue;  // a leaf's children are not looked at
      }
      visit(c, q);
    }
  };
  visit(root, "");
  return ctx;
}

// Rethrows a storage access on a proxy as the control-flow TraceError.
[[noreturn]] void rethrow_storage_error(const c10::Error& e) {
  const std::string msg = e.what_without_backtrace();
  if (msg.find("doesn't have storage") != std::string::npos ||
      msg.find("Cannot access storage") != std::string::npos) {
    throw TraceError(
        "symbolically traced variables cannot be used as inputs to control flow (the traced code read a "
        "proxy tensor's data through data_ptr(), an accessor or its storage)");
  }
  throw;
}

}  // namespace

Tracer::Tracer() = default;
Tracer::~Tracer() = default;

bool Tracer::is_leaf_module(const torch::nn::Module& m, const std::string& /*qualified_name*/) {
  return trace_impl::has_leaf_pattern(m);
}

std::shared_ptr<Graph> Tracer::trace(std::shared_ptr<torch::nn::Module> root, const TracedFunction& forward,
                                     std::vector<c10::IValue> example_inputs, const ConcreteArgs& concrete_args) {
  if (!options_.dynamic_dims.empty()) return trace_dynamic(root, forward, std::move(example_inputs), concrete_args);
  auto graph = trace_once(root, forward, std::move(example_inputs), concrete_args, /*record_factories=*/false);
  if (!options_.shape_guards) {
    for (Node* p : graph->find_nodes(Opcode::Placeholder)) p->meta().erase(kShapeGuardKey);
  }
  return graph;
}

std::shared_ptr<Graph> Tracer::trace_once(const std::shared_ptr<torch::nn::Module>& root,
                                          const TracedFunction& forward, std::vector<c10::IValue> example_inputs,
                                          const ConcreteArgs& concrete_args, bool record_factories) {
  meta_fallbacks_.clear();
  if (trace_impl::current_handler() != nullptr) {
    throw TraceError("symbolic_trace cannot be called from code that is being traced");
  }
  trace_impl::install_trace_kernel();
  if (!options_.real_values) register_meta_shape_functions();
  const size_t total = example_inputs.size() + concrete_args.size();
  for (const auto& c : concrete_args) {
    if (c.first >= total) {
      throw TraceError("concrete_args position " + std::to_string(c.first) + " is past the " +
                       std::to_string(total) + " forward arguments (example inputs + concrete args)");
    }
  }
  LeafContext ctx = root ? leaf_context(*this, *root) : LeafContext{};

  auto graph = std::make_shared<Graph>();
  TraceSession session(*graph, root.get(), record_factories,
                       options_.real_values ? trace_impl::ExampleValues::Real : trace_impl::ExampleValues::Meta);
  std::vector<c10::IValue> args;
  args.reserve(total);
  size_t next = 0;
  for (size_t pos = 0; pos < total; ++pos) {
    auto c = concrete_args.find(pos);
    if (c != concrete_args.end()) {
      args.push_back(c->second);
      continue;
    }
    const std::string name =
        next < input_names_.size() ? input_names_[next] : default_input_name(next, example_inputs.size());
    args.push_back(session.add_input(example_inputs[next], name));
    ++next;
  }

  c10::IValue result;
  {
    trace_impl::ActiveTrace active(&session, /*below_autograd=*/record_factories);
    try {
      result = forward(std::move(args));
    } catch (const c10::Error& e) {
      rethrow_storage_error(e);
    }
  }
  graph->output(session.output_argument(result));
  meta_fallbacks_ = session.fallbacks();
  result = c10::IValue();

  ctx.tensor_of = [&session](const std::string& name) {
    const AttrTensor* a = session.find_attr(name);
    return a ? a->tensor : at::Tensor();
  };
  trace_impl::fold_leaf_modules(*graph, ctx, session.calls());

  // The module the graph refers to: the root's children, parameters and
  // buffers (shared, not copied), plus the constants still in use.
  class_name_ = root ? class_name_of(*root) : "GraphModule";
  auto traced_root = std::make_shared<torch::nn::Module>(class_name_);
  if (root) {
    for (const auto& c : root->named_children()) traced_root->register_module(c.key(), c.value());
    for (const auto& p : root->named_parameters(/*recurse=*/false)) {
      if (p.value().defined()) traced_root->register_parameter(p.key(), p.value(), p.value().requires_grad());
    }
    for (const auto& b : root->named_buffers(/*recurse=*/false)) {
      if (b.value().defined()) traced_root->register_buffer(b.key(), b.value());
    }
  }
  std::set<std::string> used;
  for (Node* n : graph->find_nodes(Opcode::GetAttr)) used.insert(n->target());
  for (const AttrTensor* c : session.constants()) {
    if (!used.count(c->name)) continue;
    at::Tensor t = c->tensor;
    if (t.requires_grad()) {
      traced_root->register_parameter(c->name, t.is_leaf() ? t : t.detach(), true);
    } else {
      traced_root->register_buffer(c->name, t);
    }
  }
  traced_root_ = std::move(traced_root);
  return graph;
}

std::shared_ptr<GraphModule> to_graph_module(const Tracer& tracer, std::shared_ptr<Graph> graph) {
  return std::make_shared<GraphModule>(tracer.root(), std::move(graph), tracer.root_class_name());
}

std::shared_ptr<GraphModule> symbolic_trace(std::shared_ptr<torch::nn::Module> root, const TracedFunction& forward,
                                            std::vector<c10::IValue> example_inputs,
                                            const ConcreteArgs& concrete_args, const TraceOptions& options) {
  Tracer tracer;
  tracer.set_options(options);
  auto graph = tracer.trace(std::move(root), forward, std::move(example_inputs), concrete_args);
  return to_graph_module(tracer, std::move(graph));
}

}  // namespace fx
