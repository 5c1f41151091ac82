// remove_noops: identity modules and no-op arithmetic replaced by their input.
#include <fx/passes/remove_noops.h>

#include "passes/bypass.h"

#include <fx/tensor_meta.h>

#include <torch/nn/modules/linear.h>

namespace fx {

namespace {

/// The operator name without namespace and overload ("aten::add.Tensor" → "add").
std::string op_name(const Node* n) {
  if (n->op() == Opcode::CallMethod) return n->target();
  const std::string& t = n->target();
  if (n->op() != Opcode::CallFunction || t.rfind("aten::", 0) != 0) return "";
  size_t dot = t.find('.');
  return t.substr(6, dot == std::string::npos ? std::string::npos : dot - 6);
}

bool is_literal(const Argument& a, double v) {
  return (a.kind() == Argument::Kind::Int && a.to_int() == static_cast<int64_t>(v)) ||
         (a.kind() == Argument::Kind::Double && a.to_double() == v);
}

/// Whether some user of `n` may write to it.
bool written_by_user(const Node* n) {
  for (Node* u : n->users()) {
    if (u->op() == Opcode::Output) continue;
    if (u->op() == Opcode::CallModule || u->is_impure()) return true;
    std::string op = op_name(u);
    if (!op.empty() && op.back() == '_') return true;
  }
  return false;
}

/// The input `n` returns unchanged, or nullptr.
Node* noop_input(GraphModule& gm, const Node* n) {
  if (n->args().empty() || !n->args()[0].is_node()) return nullptr;
  Node* in = n->args()[0].to_node();
  if (n->op() == Opcode::CallModule) {
    auto m = gm.get_submodule(n->target());
    bool identity = dynamic_cast<const torch::nn::IdentityImpl*>(m.get()) || m->name() == "Identity";
    return identity && n->args().size() == 1 ? in : nullptr;
  }
  const std::string op = op_name(n);
  if (op.empty()) return nullptr;
  const TensorMetadata* mi = tensor_meta_of(in);
  const TensorMetadata* mo = tensor_meta_of(n);
  if (!mi || !mo || mi->shape != mo->shape || mi->dtype != mo->dtype) return nullptr;
  const auto& args = n->args();
  const Argument* second = args.size() > 1 ? &args[1] : find_kwarg(n->kwargs(), "other");
  bool only_other = true;  // div's rounding_mode makes x / 1 a rounding
  for (const auto& kv : n->kwargs()) only_other = only_other && kv.first == "other";
  if ((op == "mul" || op == "div") && second && is_literal(*second, 1) && only_other) return in;
  if ((op == "add" || op == "sub") && second && is_literal(*second, 0)) return in;
  if (op == "contiguous" && mi->memory_format == c10::MemoryFormat::Contiguous) return in;
  if (op == "view" || op == "reshape" || op == "flatten") return in;  // same shape, proven above
  return nullptr;
}

}  // namespace

PassResult remove_noops(std::shared_ptr<GraphModule> gm) {
  if (!gm) throw PassError("remove_noops: no module given");
  // The no-ops of every graph (branches and bodies too), decided before any edit.
  bool removed = passes_detail::bypass_nodes(*gm, [](GraphModule& m, const Node* n) {
    if (n->op() != Opcode::CallModule && n->op() != Opcode::CallFunction && n->op() != Opcode::CallMethod)
      return false;
    return noop_input(m, n) && !written_by_user(n);
  });
  return PassResult{gm, removed};
}

}  // namespace fx
