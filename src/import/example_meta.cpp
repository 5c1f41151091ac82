// Ranks and dtypes known at import from example inputs (ImportOptions::example_inputs).
//
// TorchScript code asks a tensor's rank and dtype to pick what to run (torch's
// F.interpolate: `if input.dim() == 3 and mode == "nearest"`; nn.LSTM:
// `is_batched = input.dim() == 3`). A given input fixes them, so these
// queries fold to constants and the conditions on them fold with them.
//
// The value of a node is computed lazily and only upstream of a query, on
// meta tensors (shapes and dtypes, no data): each call_function runs its
// target on meta tensors, or on zeros of the same shape when the operator
// has no meta kernel; a leaf module runs its scripted forward on zeros.
// Nothing is computed for graphs imported without example inputs. With
// ImportOptions::specialize_shapes, sizes (x.size(d), x.shape) are known too.
#include "import/importer.h"

#include "torchscript/leaf_module.h"

#include "execution/map_tensors.h"

#include <fx/shape_guard.h>
#include <fx/target.h>

#include <ATen/ops/empty_strided.h>
#include <ATen/ops/zeros.h>

namespace fx::import_detail {

namespace jit = torch::jit;

namespace {


at::Tensor to_meta(const at::Tensor& t) {
  if (t.is_meta()) return t;
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta));
}

at::Tensor to_zeros(const at::Tensor& t) { return at::zeros(t.sizes(), t.options().device(c10::kCPU)); }

// The attribute of `root` at a dotted path ("layer1.0.conv1.weight"), or None.
c10::IValue attribute_at(const jit::Module& root, const std::string& path) {
  c10::IValue v = root._ivalue();
  size_t start = 0;
  while (start <= path.size()) {
    const size_t dot = std::min(path.find('.', start), path.size());
    if (!v.isObject()) return c10::IValue();
    const auto& object = v.toObjectRef();
    const std::string atom = path.substr(start, dot - start);
    if (!object.type()->hasAttribute(atom)) return c10::IValue();
    v = object.getAttr(atom);
    start = dot + 1;
  }
  return v;
}

// Whether `n` writes to one of its arguments (and does nothing else that
// must not happen at import: warnings, asserts and raises are left out).
bool changes_in_place(const Node* n) {
  if (n->op() != Opcode::CallFunction || !n->is_impure()) return false;
  const std::string& t = n->target();
  return t != "torch._assert" && t != "aten::warn" && t != "prim::RaiseException";
}

// Whether `a` comes before `b` in the same graph.
bool comes_before(const Node* a, const Node* b) {
  if (&a->graph() != &b->graph()) return false;
  for (const Node* p = a->next(); p; p = p->next())
    if (p == b) return true;
  return false;
}

}  // namespace

std::optional<c10::IValue> Importer::meta_value(Node* target) {
  if (options_.example_inputs.empty()) return std::nullopt;
  // Depth first over the arguments, without recursion (graphs are deep).
  std::vector<Node*> stack{target};
  while (!stack.empty()) {
    Node* n = stack.back();
    if (meta_.count(n)) {
      stack.pop_back();
      continue;
    }
    std::vector<Node*> inputs;
    if (n->op() == Opcode::Placeholder) {
      auto origin = placeholder_origin_.find(n);
      if (origin != placeholder_origin_.end()) inputs.push_back(origin->second);
    } else {
      inputs = n->all_input_nodes();
      // What changed an input in place before n (a dict's _set_item, a
      // list's append) runs first: meta lists and dicts are shared objects too.
      const size_t direct = inputs.size();
      for (size_t i = 0; i < direct; ++i)
        for (Node* u : inputs[i]->users())
          if (u != n && changes_in_place(u) && comes_before(u, n)) inputs.push_back(u);
    }
    bool ready = true;
    for (Node* in : inputs) {
      if (!meta_.count(in)) {
        stack.push_back(in);
        ready = false;
      }
    }
    if (!ready) continue;
    stack.pop_back();
    meta_[n] = compute_meta(n);
  }
  return meta_.at(target);
}

std::optional<c10::IValue> Importer::compute_meta(Node* n) {
  auto lookup_failed = [] { return std::optional<c10::IValue>(); };
  struct Unknown {};
  auto lookup = [&](Node* in) -> c10::IValue {
    const auto& m = meta_.at(in);
    if (!m) throw Unknown{};
    return *m;
  };
  try {
    switch (n->op()) {
      case Opcode::Placeholder: {
        auto origin = placeholder_origin_.find(n);
        if (origin != placeholder_origin_.end()) return meta_.at(origin->second);
        auto index = root_placeholders_.find(n);
        if (index == root_placeholders_.end()) return lookup_failed();
        if (index->second < options_.example_inputs.size())
          return detail::map_tensors(options_.example_inputs[index->second], to_meta);
        if (!n->args().empty()) return n->args()[0].to_ivalue();  // not given: its default
        return lookup_failed();
      }
      case Opcode::GetAttr:
        return detail::map_tensors(attribute_at(root_, n->target()), to_meta);
      case Opcode::CallFunction: {
        std::vector<c10::IValue> args;
        for (const Argument& a : n->args()) args.push_back(a.to_ivalue(lookup));
        ValueKwargs kwargs;
        for (const auto& [name, a] : n->kwargs()) kwargs.emplace_back(name, a.to_ivalue(lookup));
        try {
          return detail::map_tensors(fx::call_function(n->target(), args, kwargs), to_meta);
        } catch (const std::exception&) {
          // No meta kernel (or one that refused): zeros of the same shapes.
          for (auto& a : args) a = detail::map_tensors(a, to_zeros);
          for (auto& kv : kwargs) kv.second = detail::map_tensors(kv.second, to_zeros);
          return detail::map_tensors(fx::call_function(n->target(), std::move(args), std::move(kwargs)), to_meta);
        }
      }
      case Opcode::CallModule: {
        c10::IValue v = attribute_at(root_, n->target());
        if (!v.isObject() || !v.toObjectRef().type()->is_module()) return lookup_failed();  // cond_N, loop_N
        jit::Module module(v.toObject());
        JitLeafModule leaf(module, demangled_type_name(module));
        std::vector<c10::IValue> args;
        for (const Argument& a : n->args()) args.push_back(detail::map_tensors(a.to_ivalue(lookup), to_zeros));
        return detail::map_tensors(leaf.forward(std::move(args)), to_meta);
      }
      default:
        return lookup_failed();
    }
  } catch (const Unknown&) {
    return lookup_failed();
  } catch (const std::exception&) {
    return lookup_failed();  // not known: the query stays a run-time value
  }
}

bool Importer::fold_with_example(const jit::Node* n, Frame& f) {
  if (options_.example_inputs.empty()) return false;
  const std::string& name = n->schema().name();
  if (options_.specialize_shapes && name == "aten::size" && (n->inputs().size() == 1 || n->inputs().size() == 2)) {
    // x.shape / x.size(d): known when sizes are specialised.
    const Val& in = value(n->input(0), f, n);
    if (in.kind != Val::Kind::Symbolic || !in.symbolic.is_node()) return false;
    std::optional<c10::IValue> meta = meta_value(in.symbolic.to_node());
    if (!meta || !meta->isTensor() || !meta->toTensor().defined()) return false;
    const at::Tensor& t = meta->toTensor();
    c10::IValue result;
    if (n->inputs().size() == 1) {
      result = t.sizes().vec();
    } else {
      const Val& d = value(n->input(1), f, n);
      if (d.kind != Val::Kind::Constant || !d.constant.isInt()) return false;
      int64_t dim = d.constant.toInt();
      if (dim < 0) dim += t.dim();
      if (dim < 0 || dim >= t.dim()) return false;  // the run-time call raises the error
      result = t.size(dim);
    }
    bind(n->output(), Val::of_constant(result), f);
    folded_with_example_ = true;
    return true;
  }
  if (n->inputs().size() != 1) return false;
  const bool rank = name == "aten::dim" || name == "aten::len";
  if (!rank && name != "prim::dtype" && name != "aten::is_floating_point") return false;
  const Val& in = value(n->input(0), f, n);
  if (in.kind != Val::Kind::Symbolic || !in.symbolic.is_node()) return false;
  Node* tensor = in.symbolic.to_node();
  if (name == "aten::len") {
    // len(x.shape) / len(x.size()): the rank of x.
    if (tensor->op() != Opcode::CallFunction || tensor->target().rfind("aten::size", 0) != 0 ||
        tensor->args().size() != 1 || !tensor->args()[0].is_node())
      return false;
    tensor = tensor->args()[0].to_node();
  }
  std::optional<c10::IValue> meta = meta_value(tensor);
  if (!meta || !meta->isTensor() || !meta->toTensor().defined()) return false;
  const at::Tensor& t = meta->toTensor();
  c10::IValue result;
  if (rank) {
    result = static_cast<int64_t>(t.dim());
  } else if (name == "prim::dtype") {
    result = static_cast<int64_t>(t.scalar_type());
  } else {
    result = at::isFloatingType(t.scalar_type());
  }
  bind(n->output(), Val::of_constant(result), f);
  folded_with_example_ = true;
  return true;
}

void Importer::guard_example_inputs() {
  if (options_.example_inputs.empty()) return;
  for (const auto& [node, index] : root_placeholders_) {
    if (index >= options_.example_inputs.size()) continue;
    const c10::IValue& v = options_.example_inputs[index];
    if (!v.isTensor() || !v.toTensor().defined()) continue;
    const at::Tensor& t = v.toTensor();
    std::vector<int64_t> shape(t.dim(), kDynamicDim);
    if (options_.specialize_shapes) shape = t.sizes().vec();
    node->meta()[kShapeGuardKey] = ShapeGuard{std::move(shape), t.scalar_type()};
  }
}

}  // namespace fx::import_detail
