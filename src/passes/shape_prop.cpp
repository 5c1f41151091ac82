// ShapeProp: tensor_meta for every node, on real data or on the meta device.
#include <fx/passes/shape_prop.h>

#include "execution/map_tensors.h"
#include "execution/node_error.h"

#include <fx/control_flow.h>
#include <fx/error.h>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <sstream>

namespace fx {

/// What one node's run found; written to the node when the whole run succeeds.
struct ShapeProp::Pending {
  Node* node;
  std::any tensor_meta;
  std::string type;
};

namespace {

void collect_tensor_meta(const c10::IValue& v, std::vector<TensorMetadata>& out) {
  if (v.isTensor()) {
    if (v.toTensor().defined()) out.push_back(TensorMetadata::from_tensor(v.toTensor()));
  } else if (v.isTuple()) {
    for (const c10::IValue& e : v.toTupleRef().elements()) collect_tensor_meta(e, out);
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) collect_tensor_meta(e, out);
  } else if (v.isGenericDict()) {
    for (const auto& kv : v.toGenericDict()) collect_tensor_meta(kv.value(), out);
  }
}

/// Python's repr of a string, single-quoted.
std::string py_str_repr(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out + "'";
}

/// torch.fx prints n.meta, a Python dict; this is its C++ counterpart.
std::string meta_repr(const Node& n) {
  std::ostringstream os;
  os << "{";
  bool first = true;
  for (const auto& [key, value] : n.meta()) {
    os << (first ? "" : ", ") << py_str_repr(key) << ": ";
    first = false;
    if (const auto* m = std::any_cast<TensorMetadata>(&value)) {
      os << m->str();
    } else if (const auto* ms = std::any_cast<std::vector<TensorMetadata>>(&value)) {
      os << "(";
      for (size_t i = 0; i < ms->size(); ++i) os << (i ? ", " : "") << (*ms)[i].str();
      os << (ms->size() == 1 ? ",)" : ")");
    } else if (const auto* s = std::any_cast<std::string>(&value)) {
      os << (key == "type" ? "<class " + py_str_repr(*s) + ">" : py_str_repr(*s));
    } else {
      os << "<" << c10::demangle(value.type().name()) << ">";
    }
  }
  os << "}";
  return os.str();
}

/// Number of elements the storage of a (sizes, strides) tensor spans.
int64_t storage_span(c10::IntArrayRef sizes, c10::IntArrayRef strides) {
  int64_t span = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) return 0;
    span += (sizes[i] - 1) * strides[i];
  }
  return span;
}

/// A tensor like `t` (sizes, strides, dtype, requires_grad, leaf or not) on
/// `device`: uninitialised on meta, zero-filled elsewhere. t's data is not read.
at::Tensor make_like(const at::Tensor& t, c10::Device device) {
  at::Tensor out;
  {
    at::NoGradGuard no_grad;
    const auto opts = t.options().device(device).requires_grad(false);
    if (device.is_meta()) {
      out = at::empty_strided(t.sizes(), t.strides(), opts);
    } else {
      out = at::zeros({storage_span(t.sizes(), t.strides())}, opts).as_strided(t.sizes(), t.strides());
    }
  }
  if (!t.requires_grad()) return out;
  at::Tensor leaf = out.detach().requires_grad_(true);
  if (t.is_leaf()) return leaf;
  // A computed value is not a leaf: in-place operators must work on it as
  // they do on the value it stands for.
  at::AutoGradMode grad(true);
  if (leaf.unsafeGetTensorImpl()->is_non_overlapping_and_dense()) return leaf.clone(at::MemoryFormat::Preserve);
  return leaf.as_strided(t.sizes(), t.strides());
}

/// `v` with every real tensor replaced by a meta tensor of the same metadata.
c10::IValue to_meta_value(const c10::IValue& v) {
  return detail::map_tensors(v, [](const at::Tensor& t) { return to_meta_tensor(t); });
}

}  // namespace

std::any tensor_meta_of(const c10::IValue& value) {
  if (value.isTensor()) {
    if (!value.toTensor().defined()) return {};
    return TensorMetadata::from_tensor(value.toTensor());
  }
  if (!value.isTuple() && !value.isList() && !value.isGenericDict()) return {};
  std::vector<TensorMetadata> metas;
  collect_tensor_meta(value, metas);
  if (metas.empty()) return {};
  return metas;
}

std::string python_type_name(const c10::IValue& value) {
  if (value.isTensor()) return value.toTensor().defined() ? "torch.Tensor" : "NoneType";
  if (value.isNone()) return "NoneType";
  if (value.isBool()) return "bool";
  if (value.isInt()) return "int";
  if (value.isDouble()) return "float";
  if (value.isComplexDouble()) return "complex";
  if (value.isString()) return "str";
  if (value.isTuple()) return "tuple";
  if (value.isList()) return "list";
  if (value.isGenericDict()) return "dict";
  if (value.isDevice()) return "torch.device";
  return "object";
}

at::Tensor to_meta_tensor(const at::Tensor& t) {
  if (!t.defined() || t.is_meta()) return t;
  return make_like(t, c10::Device(c10::kMeta));
}

// ---- ShapeProp ---------------------------------------------------------------------

ShapeProp::ShapeProp(std::shared_ptr<GraphModule> module) : Interpreter(std::move(module)) {}

ShapeProp::~ShapeProp() = default;

c10::IValue ShapeProp::propagate(std::vector<c10::IValue> args) { return propagate_impl(std::move(args), false); }

c10::IValue ShapeProp::propagate_meta(std::vector<c10::IValue> args) {
  register_meta_shape_functions();
  return propagate_impl(std::move(args), true);
}

c10::IValue ShapeProp::propagate_impl(std::vector<c10::IValue> args, bool meta) {
  struct Reset {
    ShapeProp* self;
    ~Reset() { self->clear(); }
  } reset{this};
  c10::IValue out = run_uncommitted(std::move(args), meta);
  commit();  // every node ran: now, and only now, the graphs' meta changes
  return out;
}

c10::IValue ShapeProp::run_uncommitted(std::vector<c10::IValue> args, bool meta) {
  meta_ = meta;
  fallback_nodes_.clear();
  clear();
  if (meta)
    for (c10::IValue& a : args) a = to_meta_value(a);
  pending_.reserve(module().graph().nodes().size());
  return run(std::move(args));
}

void ShapeProp::clear() {
  pending_.clear();
  real_attrs_.clear();
  children_.clear();
  cleared_.clear();
  node_meta_.reset();
}

void ShapeProp::commit() {
  for (Pending& p : pending_) {
    Meta& m = p.node->meta();
    if (p.tensor_meta.has_value()) {
      m["tensor_meta"] = std::move(p.tensor_meta);
    } else {
      m.erase("tensor_meta");
    }
    m["type"] = std::move(p.type);
  }
  for (auto& child : children_) child->commit();
  auto erase_meta = [](GraphModule& g) {
    for (Node* n : g.graph().nodes()) {
      n->meta().erase("tensor_meta");
      n->meta().erase("type");
    }
  };
  for (GraphModule* g : cleared_) {
    for_each_subgraph(*g, [&](const std::string&, GraphModule& sub) { erase_meta(sub); });
    erase_meta(*g);
  }
  clear();
}

c10::IValue ShapeProp::run_node(Node* n) {
  c10::IValue result;
  node_meta_.reset();
  try {
    result = Interpreter::run_node(n);
  } catch (...) {
    throw Error("ShapeProp error for: node=" + n->format_node() + " with meta=" + meta_repr(*n) + "\n" +
                detail::current_exception_message());
  }
  std::any meta = node_meta_ ? std::move(*node_meta_) : tensor_meta_of(result);
  node_meta_.reset();
  pending_.push_back(Pending{n, std::move(meta), python_type_name(result)});
  return result;
}

c10::IValue ShapeProp::get_attr(const std::string& target, std::vector<c10::IValue>& args, ValueKwargs& kwargs) {
  c10::IValue v = Interpreter::get_attr(target, args, kwargs);
  if (!meta_ || !v.isTensor() || !v.toTensor().defined() || v.toTensor().is_meta()) return v;
  at::Tensor m = to_meta_tensor(v.toTensor());
  real_attrs_[m.unsafeGetTensorImpl()] = {m, v.toTensor()};
  return m;
}

c10::IValue ShapeProp::to_real(const c10::IValue& v) const {
  return detail::map_tensors(v, [&](const at::Tensor& t) {
    if (!t.is_meta()) return t;
    auto it = real_attrs_.find(t.unsafeGetTensorImpl());
    if (it != real_attrs_.end()) return it->second.second;
    return make_like(t, c10::Device(c10::kCPU));
  });
}

template <class Call>
c10::IValue ShapeProp::meta_or_fallback(std::vector<c10::IValue>& args, ValueKwargs& kwargs, Call&& call) {
  // The call may consume its arguments (a scripted forward takes them by
  // value): keep them for the fallback.
  std::vector<c10::IValue> saved_args = args;
  ValueKwargs saved_kwargs = kwargs;
  try {
    return call(args, kwargs);
  } catch (const std::exception&) {
    // No Meta kernel (or one that reads data): run on zeros below.
  }
  std::vector<c10::IValue> real_args;
  real_args.reserve(saved_args.size());
  for (const c10::IValue& a : saved_args) real_args.push_back(to_real(a));
  ValueKwargs real_kwargs;
  for (const auto& kv : saved_kwargs) real_kwargs.emplace_back(kv.first, to_real(kv.second));
  c10::IValue out = call(real_args, real_kwargs);
  if (current_node()) fallback_nodes_.push_back(current_node());
  return to_meta_value(out);
}

c10::IValue ShapeProp::call_function(const std::string& target, std::vector<c10::IValue>& args,
                                     ValueKwargs& kwargs) {
  if (!meta_) return Interpreter::call_function(target, args, kwargs);
  return meta_or_fallback(args, kwargs, [&](std::vector<c10::IValue>& a, ValueKwargs& k) {
    return Interpreter::call_function(target, a, k);
  });
}

c10::IValue ShapeProp::call_method(const std::string& target, std::vector<c10::IValue>& args,
                                   ValueKwargs& kwargs) {
  if (!meta_) return Interpreter::call_method(target, args, kwargs);
  return meta_or_fallback(args, kwargs, [&](std::vector<c10::IValue>& a, ValueKwargs& k) {
    return Interpreter::call_method(target, a, k);
  });
}

c10::IValue ShapeProp::call_module(const std::string& target, std::vector<c10::IValue>& args,
                                   ValueKwargs& kwargs) {
  std::shared_ptr<torch::nn::Module> m = module().get_submodule(target);
  if (kwargs.empty()) {
    if (auto* cond = dynamic_cast<CondModule*>(m.get())) return call_cond(target, *cond, args, kwargs);
    if (auto* loop = dynamic_cast<WhileLoopModule*>(m.get())) return call_loop(target, *loop, args, kwargs);
  }
  if (!meta_) return Interpreter::call_module(target, args, kwargs);
  return meta_or_fallback(args, kwargs, [&](std::vector<c10::IValue>& a, ValueKwargs& k) {
    return Interpreter::call_module(target, a, k);
  });
}

// ---- control flow ------------------------------------------------------------------

namespace {

/// Whether two tensor_meta values (TensorMetadata or a vector of them, or none) are equal.
bool same_tensor_meta(const std::any& a, const std::any& b) {
  if (!a.has_value() || !b.has_value()) return a.has_value() == b.has_value();
  if (const auto* x = std::any_cast<TensorMetadata>(&a)) {
    const auto* y = std::any_cast<TensorMetadata>(&b);
    return y && *x == *y;
  }
  const auto* x = std::any_cast<std::vector<TensorMetadata>>(&a);
  const auto* y = std::any_cast<std::vector<TensorMetadata>>(&b);
  return x && y && *x == *y;
}

// A copy of `v` that shares nothing a graph can change in place: tensors
// cloned, lists and dicts new. Propagating into a branch that is not taken
// (or a loop body one extra time) must not append to the model's lists or
// write into its tensors.
c10::IValue private_copy(const c10::IValue& v) {
  return detail::map_tensors(v, [](const at::Tensor& t) { return t.clone(); });
}

}  // namespace

std::optional<c10::IValue> ShapeProp::propagate_subgraph(GraphModule& sub, std::vector<c10::IValue> inputs,
                                                         std::exception_ptr* failure) {
  auto child = std::make_unique<ShapeProp>(std::dynamic_pointer_cast<GraphModule>(sub.shared_from_this()));
  for (auto& in : inputs) in = private_copy(in);
  try {
    c10::IValue out = child->run_uncommitted(std::move(inputs), meta_);
    fallback_nodes_.insert(fallback_nodes_.end(), child->fallback_nodes_.begin(), child->fallback_nodes_.end());
    children_.push_back(std::move(child));
    return out;
  } catch (const std::exception&) {
    cleared_.push_back(&sub);  // raises on these operands: no meta inside
    if (failure) *failure = std::current_exception();
    return std::nullopt;
  }
}

c10::IValue ShapeProp::call_cond(const std::string& target, const CondModule& cond, std::vector<c10::IValue>& args,
                                 ValueKwargs& kwargs) {
  if (args.empty()) throw Error("cond: missing the condition argument");
  std::vector<c10::IValue> operands(args.begin() + 1, args.end());
  std::exception_ptr true_failure, false_failure;
  std::optional<c10::IValue> taken_true = propagate_subgraph(cond.true_graph(), operands, &true_failure);
  std::optional<c10::IValue> taken_false = propagate_subgraph(cond.false_graph(), operands, &false_failure);
  // Meta mode: a predicate computed on meta tensors is unknown; zeros (the
  // fallback's data) take the false branch.
  const c10::IValue& pred = args[0];
  const bool unknown = pred.isTensor() && pred.toTensor().defined() && pred.toTensor().is_meta();
  bool which = unknown ? !taken_false && taken_true : predicate_value(pred);
  std::optional<c10::IValue>& result = which ? taken_true : taken_false;
  if (!result) std::rethrow_exception(which ? true_failure : false_failure);  // as forward would fail
  if (taken_true && taken_false) {
    std::any t = tensor_meta_of(*taken_true), f = tensor_meta_of(*taken_false);
    node_meta_ = same_tensor_meta(t, f) ? std::move(t) : std::any();
  } else {
    node_meta_ = tensor_meta_of(*result);  // the other branch never returns
  }
  // The branches ran on private copies of the operands: the value passed on
  // is the module's own run on the real ones (its changes to them included).
  if (unknown) return *result;
  return Interpreter::call_module(target, args, kwargs);
}

c10::IValue ShapeProp::call_loop(const std::string& target, const WhileLoopModule& loop,
                                 std::vector<c10::IValue>& args, ValueKwargs& kwargs) {
  const size_t n = loop.num_carried();
  if (args.size() >= 2 + n) {
    std::vector<c10::IValue> inputs;
    inputs.emplace_back(int64_t{0});
    inputs.insert(inputs.end(), args.begin() + 2, args.end());
    std::optional<c10::IValue> out = propagate_subgraph(loop.body(), inputs, nullptr);
    bool invariant = false;
    if (out) {
      std::vector<c10::IValue> carried_out;
      if (out->isTuple()) {
        const auto& e = out->toTupleRef().elements();
        carried_out.assign(e.begin() + (e.empty() ? 0 : 1), e.end());
      }
      invariant = carried_out.size() == n;
      for (size_t k = 0; invariant && k < n; ++k)
        invariant = same_tensor_meta(tensor_meta_of(carried_out[k]), tensor_meta_of(args[2 + k]));
      if (!invariant) cleared_.push_back(&loop.body());  // meta of iteration 0 only: not kept
    }
    if (!invariant) node_meta_ = std::any();
  }
  c10::IValue result;
  if (!meta_) {
    result = Interpreter::call_module(target, args, kwargs);
  } else {
    result = meta_or_fallback(args, kwargs, [&](std::vector<c10::IValue>& a, ValueKwargs& k) {
      return Interpreter::call_module(target, a, k);
    });
  }
  return result;
}

// ---- as a pass -------------------------------------------------------------------------

PassResult ShapePropPass::call(std::shared_ptr<GraphModule> gm) {
  ShapeProp prop(gm);
  if (meta_) {
    prop.propagate_meta(inputs_);
  } else {
    prop.propagate(inputs_);
  }
  return PassResult{std::move(gm), false};
}

}  // namespace fx
