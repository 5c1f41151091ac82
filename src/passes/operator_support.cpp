// OperatorSupport (torch.fx passes/operator_support.py).
#include <fx/passes/operator_support.h>
#include <fx/tensor_meta.h>

#include <algorithm>

namespace fx {

namespace {

bool is_callable(const Node* n) {
  return n->op() == Opcode::CallFunction || n->op() == Opcode::CallMethod || n->op() == Opcode::CallModule;
}

/// torch.fx _get_arg_dtype: the dtype in the node's tensor_meta.
c10::ScalarType arg_dtype(const Node* user, const Node* arg) {
  const Meta& meta = arg->meta();
  auto it = meta.find("tensor_meta");
  if (it != meta.end())
    if (const auto* tm = std::any_cast<TensorMetadata>(&it->second)) return tm->dtype;
  throw Error("OperatorSupport: argument " + arg->name() + " of node " + user->name() +
              " has no meta['tensor_meta'] to read its dtype from (run ShapeProp first)");
}

class FunctionalOperatorSupport : public OperatorSupportBase {
 public:
  explicit FunctionalOperatorSupport(IsNodeSupported f) : f_(std::move(f)) {}
  bool is_node_supported(const SubmoduleMap& submodules, const Node* node) const override {
    return f_(submodules, node);
  }

 private:
  IsNodeSupported f_;
};

}  // namespace

std::string get_node_target(const SubmoduleMap& submodules, const Node* node) {
  switch (node->op()) {
    case Opcode::CallModule: {
      const auto* m = submodules.find(node->target());
      if (!m) throw Error("get_node_target: node " + node->name() + " calls " + node->target() + ", which is not a submodule");
      return (*m)->name();
    }
    case Opcode::CallFunction:
    case Opcode::CallMethod: return node->target();
    default:
      throw Error("get_node_target: Expect op types of call_module, call_function, call_method, but found " +
                  std::string(to_string(node->op())) + " (node " + node->name() + ")");
  }
}

OperatorSupport::OperatorSupport(SupportDict support_dict) : support_dict_(std::move(support_dict)) {}

bool OperatorSupport::is_node_supported(const SubmoduleMap& submodules, const Node* node) const {
  if (!is_callable(node)) return true;
  auto it = support_dict_.find(get_node_target(submodules, node));
  if (it == support_dict_.end()) return false;
  if (!it->second) return true;
  const auto& [args_dtypes, kwargs_dtypes] = *it->second;
  for (size_t i = 0; i < args_dtypes.size() && i < node->args().size(); ++i) {
    if (!args_dtypes[i] || !node->args()[i].is_node()) continue;
    const auto& allowed = *args_dtypes[i];
    if (std::find(allowed.begin(), allowed.end(), arg_dtype(node, node->args()[i].to_node())) == allowed.end())
      return false;
  }
  for (const auto& [key, allowed] : kwargs_dtypes) {
    const Argument* a = find_kwarg(node->kwargs(), key);
    if (!a || !a->is_node()) continue;
    if (std::find(allowed.begin(), allowed.end(), arg_dtype(node, a->to_node())) == allowed.end()) return false;
  }
  return true;
}

std::shared_ptr<OperatorSupportBase> create_op_support(IsNodeSupported is_node_supported) {
  if (!is_node_supported) throw Error("create_op_support: empty function");
  return std::make_shared<FunctionalOperatorSupport>(std::move(is_node_supported));
}

std::shared_ptr<OperatorSupportBase> chain(std::vector<std::shared_ptr<OperatorSupportBase>> op_support) {
  return create_op_support([ops = std::move(op_support)](const SubmoduleMap& s, const Node* n) {
    for (const auto& o : ops)
      if (!o->is_node_supported(s, n)) return false;
    return true;
  });
}

std::shared_ptr<OperatorSupportBase> any_chain(std::vector<std::shared_ptr<OperatorSupportBase>> op_support) {
  return create_op_support([ops = std::move(op_support)](const SubmoduleMap& s, const Node* n) {
    for (const auto& o : ops)
      if (o->is_node_supported(s, n)) return true;
    return false;
  });
}

std::shared_ptr<OperatorSupportBase> OpSupports::decline_if_input_dtype(c10::ScalarType dtype) {
  return create_op_support([dtype](const SubmoduleMap&, const Node* node) {
    for (Node* arg : node->all_input_nodes()) {
      if (arg->op() == Opcode::GetAttr) continue;
      if (arg_dtype(node, arg) == dtype) return false;
    }
    return true;
  });
}

std::shared_ptr<OperatorSupportBase> OpSupports::decline_if_node_in_names(std::unordered_set<std::string> disallow_set) {
  return create_op_support(
      [names = std::move(disallow_set)](const SubmoduleMap&, const Node* node) { return names.count(node->name()) == 0; });
}

}  // namespace fx
