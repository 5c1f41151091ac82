// Internal helpers shared by fuse, prepare and convert.
#include "quantization/common.h"

#include "passes/graph_copy.h"

#include <fx/error.h>
#include <fx/quantization/observers.h>

namespace fx::quantization::detail {

std::optional<ModuleAttributes> node_module_attributes(const GraphModule& gm, const Node* n) {
  if (n->op() != Opcode::CallModule) return std::nullopt;
  std::shared_ptr<torch::nn::Module> m;
  try {
    m = gm.get_submodule(n->target());
  } catch (const Error&) {
    return std::nullopt;
  }
  return module_attributes(*m);
}

std::string module_type(const GraphModule& gm, const Node* n) {
  auto a = node_module_attributes(gm, n);
  return a ? a->type : "";
}

bool is_relu(const GraphModule& gm, const Node* n) {
  if (n->args().size() != 1) return false;
  if (n->op() == Opcode::CallFunction) return n->target() == "aten::relu" || n->target() == "aten::relu_";
  return n->op() == Opcode::CallModule && module_type(gm, n) == "ReLU";
}

at::Tensor module_tensor(const torch::nn::Module& m, const std::string& name) {
  if (const at::Tensor* p = m.named_parameters(false).find(name)) return *p;
  if (const at::Tensor* b = m.named_buffers(false).find(name)) return *b;
  return at::Tensor();
}

std::shared_ptr<GraphModule> copy_graph_module(const std::shared_ptr<GraphModule>& gm) {
  return std::make_shared<GraphModule>(gm, passes_detail::copy_graph(gm->graph()), gm->class_name());
}

bool any_training(const GraphModule& gm, std::string* which) {
  for (const Node* n : gm.graph().nodes()) {
    if (n->op() != Opcode::CallModule) continue;
    auto m = gm.get_submodule(n->target());
    if (m->is_training() && !as_observer(*m)) {
      if (which) *which = n->target();
      return true;
    }
  }
  return false;
}

}  // namespace fx::quantization::detail
