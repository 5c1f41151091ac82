// TraceSession: records operator calls into a graph, computes them on
// example values, and hands back proxies.
#include "trace/trace_session.h"

#include "trace/kernel_registry.h"

#include <fx/error.h>
#include <fx/shape_guard.h>
#include <fx/tensor_meta.h>

#include <ATen/core/grad_mode.h>
#include <ATen/core/jit_type.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <atomic>

namespace fx::trace_impl {
namespace {

std::atomic<uint64_t> next_session_id{1};

const char* const kControlFlow = "symbolically traced variables cannot be used as inputs to control flow";

c10::TypePtr unwrap_optional(const c10::TypePtr& t) {
  if (t->kind() == c10::TypeKind::OptionalType) return t->expectRef<c10::OptionalType>().getElementType();
  return t;
}

// Whether a boxed argument equals the schema default (so it can be left out).
bool same_as_default(const c10::IValue& v, const c10::Argument& arg) {
  const c10::optional<c10::IValue>& d = arg.default_value();
  if (!d) return false;
  if (v.isNone()) return d->isNone();
  if (v.isTensor()) return !v.toTensor().defined() && d->isNone();
  if (v.isBool()) return d->isBool() && d->toBool() == v.toBool();
  if (v.isInt()) return d->isInt() && d->toInt() == v.toInt();
  if (v.isDouble()) return d->isDouble() && d->toDouble() == v.toDouble();
  if (v.isString()) return d->isString() && d->toStringRef() == v.toStringRef();
  if (v.isIntList()) {
    // int[2] padding=0: the default [0, 0] and a passed [0] mean the same.
    if (!d->isIntList()) return false;
    if (!arg.N()) return v.toIntVector() == d->toIntVector();
    const std::vector<int64_t> a = v.toIntVector();
    const std::vector<int64_t> b = d->toIntVector();
    if (a == b) return true;
    auto all_equal_to = [](const std::vector<int64_t>& xs, int64_t x) {
      for (int64_t e : xs) {
        if (e != x) return false;
      }
      return true;
    };
    if (a.size() == 1 && !b.empty()) return all_equal_to(b, a[0]);
    if (b.size() == 1 && !a.empty()) return all_equal_to(a, b[0]);
    return false;
  }
  if (v.isBoolList()) return d->isBoolList() && d->toBoolList().vec() == v.toBoolList().vec();
  return false;
}

// A factory: no tensor arguments, a tensor result, nothing written (out=).
// The aten::empty family is left out: code that makes an empty tensor fills
// it through its data pointer next (torch::tensor({1, 2}) does), which a
// proxy cannot serve.
bool is_factory(const c10::FunctionSchema& schema) {
  if (schema.name().rfind("aten::empty", 0) == 0) return false;
  for (const c10::Argument& a : schema.arguments()) {
    if (type_has_tensor(a.type()) || (a.alias_info() && a.alias_info()->isWrite())) return false;
  }
  for (const c10::Argument& r : schema.returns()) {
    if (type_has_tensor(r.type())) return true;
  }
  return false;
}

// Whether `t` can be replaced by a meta tensor of its metadata (wrapped
// numbers stay CPU scalars: they promote types differently).
bool has_meta_form(const at::Tensor& t) {
  return t.defined() && !t.is_meta() && t.layout() == c10::kStrided && !t.is_quantized() &&
         !t.unsafeGetTensorImpl()->is_wrapped_number();
}

at::Tensor meta_like(const at::Tensor& t) {
  if (!has_meta_form(t)) return t;
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta));
}

// A real tensor of `t`'s metadata on `device`, every element zero.
at::Tensor zeros_like_strided(const at::Tensor& t, c10::Device device) {
  at::Tensor r = at::empty_strided(t.sizes(), t.strides(), t.options().device(device));
  const int64_t n = static_cast<int64_t>(r.storage().nbytes() / r.element_size());
  r.as_strided({n}, {1}, 0).zero_();
  return r;
}

bool is_float_like(c10::ScalarType t) { return c10::isFloatingType(t) || c10::isComplexType(t); }

// The argument a written (in-place / out=) return aliases, or -1.
int written_arg_for_return(const c10::FunctionSchema& schema, const c10::Argument& ret) {
  const c10::AliasInfo* ra = ret.alias_info();
  if (ra == nullptr || !ra->isWrite()) return -1;
  const auto& args = schema.arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::AliasInfo* a = args[i].alias_info();
    if (a != nullptr && a->isWrite() && a->beforeSets() == ra->beforeSets()) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

bool reads_value(const std::string& target, const c10::FunctionSchema& schema) {
  static const char* const names[] = {"aten::_local_scalar_dense", "aten::item", "aten::is_nonzero", "aten::equal",
                                      "aten::allclose"};
  for (const char* n : names) {
    if (target == n) return true;
  }
  for (const c10::Argument& r : schema.returns()) {
    if (r.type()->kind() == c10::TypeKind::NumberType) return true;  // a Scalar computed from data
  }
  return false;
}

bool type_has_tensor(const c10::TypePtr& t) {
  switch (t->kind()) {
    case c10::TypeKind::TensorType:
      return true;
    case c10::TypeKind::OptionalType:
      return type_has_tensor(t->expectRef<c10::OptionalType>().getElementType());
    case c10::TypeKind::ListType:
      return type_has_tensor(t->expectRef<c10::ListType>().getElementType());
    default:
      return false;
  }
}


struct TraceSession::Scan {
  bool proxy = false;        // a proxy of this trace
  bool foreign = false;      // a proxy of another (or a finished) trace
  bool traced_attr = false;  // a parameter, or an attribute written by a recorded call
  bool buffer = false;       // a buffer (computed on its private copy, not recorded)
};

TraceSession::TraceSession(Graph& graph, const torch::nn::Module* root, bool record_factories, ExampleValues values)
    : graph_(graph), id_(next_session_id.fetch_add(1)), record_factories_(record_factories), values_(values) {
  if (root == nullptr) return;
  auto add = [&](const std::string& name, const at::Tensor& t, AttrTensor::Kind kind) {
    if (!t.defined() || attrs_.count(t.unsafeGetTensorImpl())) return;  // tied weights: the first name wins
    auto a = std::make_unique<AttrTensor>();
    a->name = name;
    a->kind = kind;
    a->tensor = t;
    a->example = t;
    attrs_by_name_[name] = a.get();
    attrs_.emplace(t.unsafeGetTensorImpl(), std::move(a));
  };
  for (const auto& p : root->named_parameters(/*recurse=*/true)) add(p.key(), p.value(), AttrTensor::Kind::Parameter);
  for (const auto& b : root->named_buffers(/*recurse=*/true)) add(b.key(), b.value(), AttrTensor::Kind::Buffer);
}

TraceSession::~TraceSession() = default;

const AttrTensor* TraceSession::find_attr(const std::string& name) const {
  auto it = attrs_by_name_.find(name);
  return it == attrs_by_name_.end() ? nullptr : it->second;
}

c10::IValue TraceSession::add_input(const c10::IValue& example, const std::string& name) {
  auto clone = [](const at::Tensor& t) {
    at::NoGradGuard no_grad;
    return t.clone();
  };
  Node* ph = graph_.placeholder(name);
  if (example.isTensor() && example.toTensor().defined()) {
    const at::Tensor& t = example.toTensor();
    ph->meta()["tensor_meta"] = TensorMetadata::from_tensor(t);
    ph->meta()[kShapeGuardKey] = ShapeGuard{t.sizes().vec(), t.scalar_type()};
    if (!device_) device_ = t.device();
    at::Tensor proxy = make_proxy(values_ == ExampleValues::Meta ? meta_like(t) : clone(t), id_, ValueRef{ph, {}},
                                  t.device());
    static_cast<ProxyTensorImpl*>(proxy.unsafeGetTensorImpl())->set_traced_requires_grad(t.requires_grad());
    return proxy;
  }
  if (example.isTensorList() || (example.isTuple() && !example.toTupleRef().elements().empty())) {
    std::vector<at::Tensor> items;
    std::vector<TensorMetadata> metas;
    if (example.isTensorList()) {
      items = example.toTensorVector();
    } else {
      for (const c10::IValue& e : example.toTupleRef().elements()) {
        if (!e.isTensor()) throw TraceError("input '" + name + "': a tuple input must hold only tensors");
        items.push_back(e.toTensor());
      }
    }
    std::vector<c10::IValue> proxies;
    for (size_t i = 0; i < items.size(); ++i) {
      metas.push_back(TensorMetadata::from_tensor(items[i]));
      if (!device_) device_ = items[i].device();
      at::Tensor p = make_proxy(values_ == ExampleValues::Meta ? meta_like(items[i]) : clone(items[i]), id_,
                                ValueRef{ph, {static_cast<int64_t>(i)}}, items[i].device());
      static_cast<ProxyTensorImpl*>(p.unsafeGetTensorImpl())->set_traced_requires_grad(items[i].requires_grad());
      proxies.emplace_back(std::move(p));
    }
    ph->meta()["tensor_meta"] = metas;
    if (example.isTensorList()) {
      c10::List<at::Tensor> list;
      for (auto& p : proxies) list.push_back(p.toTensor());
      return list;
    }
    return c10::ivalue::Tuple::create(std::move(proxies));
  }
  throw TraceError("input '" + name + "' is " + example.tagKind() +
                   ": only tensors and lists/tuples of tensors become placeholders; bind other forward "
                   "arguments with concrete_args");
}

void TraceSession::scan(const c10::IValue& v, Scan& s) const {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) return;
    if (ProxyTensorImpl* p = as_proxy(t)) {
      (p->session() == id_ ? s.proxy : s.foreign) = true;
      return;
    }
    auto it = attrs_.find(t.unsafeGetTensorImpl());
    if (it == attrs_.end()) return;
    const AttrTensor& a = *it->second;
    if (a.kind == AttrTensor::Kind::Parameter || a.current != a.node) {
      s.traced_attr = true;
    } else if (a.kind == AttrTensor::Kind::Buffer) {
      s.buffer = true;
    }
    return;
  }
  if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) scan(e, s);
  } else if (v.isTuple()) {
    for (const c10::IValue& e : v.toTupleRef().elements()) scan(e, s);
  }
}

void TraceSession::handle(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const bool grad_enabled = c10::GradMode::is_enabled();
  SuspendTracing untraced;  // everything below runs on ordinary tensors
  const size_t n = op.schema().arguments().size();
  Scan s;
  for (size_t i = stack->size() - n; i < stack->size(); ++i) scan((*stack)[i], s);
  if (s.foreign) {
    throw TraceError("a proxy tensor of another or a finished symbolic_trace was used in " +
                     full_operator_name(op.operator_name()));
  }
  if (!s.proxy && !s.traced_attr && !(record_factories_ && is_factory(op.schema()))) {
    run_untraced(op, stack, s.buffer);
    return;
  }
  record(op, stack, grad_enabled);
}

void TraceSession::run_untraced(const c10::OperatorHandle& op, torch::jit::Stack* stack, bool substitute_buffers) {
  if (substitute_buffers) {
    const size_t n = op.schema().arguments().size();
    for (size_t i = stack->size() - n; i < stack->size(); ++i) (*stack)[i] = unwrap((*stack)[i], true);
  }
  op.callBoxed(stack);
}

at::Tensor TraceSession::example_of(const at::Tensor& t, bool substitute_buffers, As as) {
  if (!t.defined()) return t;
  if (ProxyTensorImpl* p = as_proxy(t)) {
    if (as == As::Zeros && p->example().is_meta()) return zeros_like_strided(p->example(), p->device());
    return p->example();
  }
  if (as == As::Meta) return meta_like(example_of(t, substitute_buffers));
  auto it = attrs_.find(t.unsafeGetTensorImpl());
  if (it == attrs_.end()) return t;
  AttrTensor& a = *it->second;
  if (a.kind == AttrTensor::Kind::Buffer && substitute_buffers && !a.copied) {
    // Buffers change in forward (BatchNorm statistics): compute on a copy so
    // that tracing leaves the model untouched.
    at::NoGradGuard no_grad;
    a.example = a.tensor.clone();
    a.copied = true;
  }
  return a.example;
}

c10::IValue TraceSession::unwrap(const c10::IValue& v, bool substitute_buffers, As as) {
  if (v.isTensor()) return example_of(v.toTensor(), substitute_buffers, as);
  if (v.isList()) {
    c10::List<c10::IValue> in = v.toList();
    c10::impl::GenericList out(in.elementType());
    out.reserve(in.size());
    for (const c10::IValue& e : in) out.push_back(unwrap(e, substitute_buffers, as));
    return out;
  }
  if (v.isTuple()) {
    std::vector<c10::IValue> items;
    for (const c10::IValue& e : v.toTupleRef().elements()) items.push_back(unwrap(e, substitute_buffers, as));
    return c10::ivalue::Tuple::create(std::move(items));
  }
  return v;
}

bool TraceSession::requires_grad_of(const at::Tensor& t) const {
  if (!t.defined()) return false;
  if (ProxyTensorImpl* p = as_proxy(t)) return p->traced_requires_grad();
  return t.requires_grad();
}

AttrTensor* TraceSession::attr_for(const at::Tensor& t, bool create_constant) {
  auto it = attrs_.find(t.unsafeGetTensorImpl());
  if (it != attrs_.end()) return it->second.get();
  if (!create_constant) return nullptr;
  auto a = std::make_unique<AttrTensor>();
  a->name = "_tensor_constant" + std::to_string(constants_.size());
  a->kind = AttrTensor::Kind::Constant;
  a->tensor = t;
  a->example = t;
  AttrTensor* raw = a.get();
  constants_.push_back(raw);
  attrs_by_name_[raw->name] = raw;
  attrs_.emplace(t.unsafeGetTensorImpl(), std::move(a));
  return raw;
}

Node* TraceSession::resolve(const ProxyTensorImpl& p) {
  const ValueRef& ref = p.ref();
  Node* cur = ref.node;
  for (size_t i = 0; i < ref.path.size(); ++i) {
    auto key = std::make_pair(static_cast<const Node*>(cur), ref.path[i]);
    auto it = getitems_.find(key);
    if (it != getitems_.end()) {
      cur = it->second;
      continue;
    }
    Node* g = graph_.call_function("operator.getitem", {Argument(cur), Argument(ref.path[i])});
    if (i + 1 == ref.path.size()) g->meta()["tensor_meta"] = TensorMetadata::from_tensor(p.example(), p.traced_requires_grad());
    getitems_.emplace(key, g);
    cur = g;
  }
  return cur;
}

Argument TraceSession::tensor_argument(const at::Tensor& t) {
  if (!t.defined()) return Argument();
  if (ProxyTensorImpl* p = as_proxy(t)) return Argument(resolve(*p));
  if (t.unsafeGetTensorImpl()->is_wrapped_number()) {
    // A Python number the C++ API wrapped into a tensor (x * 2 in some overloads).
    const c10::Scalar s = t.item();
    if (s.isFloatingPoint()) return Argument(s.toDouble());
    if (s.isBoolean()) return Argument(s.toBool());
    return Argument(s.toLong());
  }
  AttrTensor* a = attr_for(t, /*create_constant=*/true);
  if (a->current == nullptr) {
    a->node = graph_.get_attr(a->name);
    a->node->meta()["tensor_meta"] = TensorMetadata::from_tensor(a->tensor);
    a->current = a->node;
  }
  return Argument(a->current);
}

Argument boxed_argument(const c10::IValue& v, const c10::TypePtr& type,
                        const std::function<Argument(const at::Tensor&)>& tensor) {
  if (v.isTensor()) return tensor(v.toTensor());
  if (v.isNone()) return Argument();
  const c10::TypePtr t = unwrap_optional(type);
  if (v.isInt()) {
    switch (t->kind()) {
      case c10::TypeKind::ScalarTypeType:
        return Argument(static_cast<c10::ScalarType>(v.toInt()));
      case c10::TypeKind::LayoutType:
        return Argument(static_cast<c10::Layout>(v.toInt()));
      case c10::TypeKind::MemoryFormatType:
        return Argument(static_cast<c10::MemoryFormat>(v.toInt()));
      default:
        return Argument(v.toInt());
    }
  }
  if (v.isSymInt()) return Argument(v.toSymInt().expect_int());
  if (v.isList()) {
    c10::TypePtr elem = t->kind() == c10::TypeKind::ListType ? t->expectRef<c10::ListType>().getElementType()
                                                              : c10::AnyType::get();
    std::vector<Argument> items;
    for (const c10::IValue& e : v.toListRef()) items.push_back(boxed_argument(e, elem, tensor));
    return Argument::list(std::move(items));
  }
  if (v.isTuple()) {
    std::vector<Argument> items;
    for (const c10::IValue& e : v.toTupleRef().elements()) items.push_back(boxed_argument(e, c10::AnyType::get(), tensor));
    return Argument::tuple(std::move(items));
  }
  return Argument::from_ivalue(v);
}

Argument TraceSession::value_argument(const c10::IValue& v, const c10::TypePtr& type) {
  return boxed_argument(v, type, [this](const at::Tensor& t) { return tensor_argument(t); });
}

void TraceSession::record(const c10::OperatorHandle& op, torch::jit::Stack* stack, bool grad_enabled) {
  const c10::FunctionSchema& schema = op.schema();
  const std::string target = full_operator_name(op.operator_name());
  const size_t n = schema.arguments().size();
  const size_t base = stack->size() - n;

  if (reads_value(target, schema)) {
    if (target == "aten::equal" && n == 2) {
      // equal(x, x) of one traced value is true without reading it (the C++
      // MultiheadAttention asks torch::equal(query, key) for self-attention).
      ProxyTensorImpl* a = as_proxy((*stack)[base].toTensor());
      ProxyTensorImpl* b = as_proxy((*stack)[base + 1].toTensor());
      if (a != nullptr && b != nullptr && a->ref().node == b->ref().node && a->ref().path == b->ref().path &&
          a->example().is_same(b->example())) {
        torch::jit::drop(*stack, n);
        torch::jit::push(*stack, true);
        return;
      }
    }
    throw TraceError(std::string(kControlFlow) + " (" + target + " reads the value of a traced tensor)");
  }

  const auto& returns = schema.returns();
  bool tensor_result = false;
  bool writes = false;
  for (const c10::Argument& r : returns) tensor_result = tensor_result || type_has_tensor(r.type());
  for (const c10::Argument& a : schema.arguments()) writes = writes || (a.alias_info() && a.alias_info()->isWrite());
  if (!returns.empty() && !tensor_result && !writes) {
    // A metadata query (is_same_size, size.int ...): answer it, record nothing.
    std::vector<c10::IValue> originals(stack->begin() + base, stack->end());
    compute(op, stack, originals, target);
    return;
  }

  // The node's arguments, and whether the result requires grad.
  std::vector<Argument> full(n);
  bool requires_grad = false;
  for (size_t i = 0; i < n; ++i) {
    const c10::IValue& v = (*stack)[base + i];
    full[i] = value_argument(v, schema.arguments()[i].real_type());
    if (grad_enabled) {
      if (v.isTensor()) {
        requires_grad = requires_grad || requires_grad_of(v.toTensor());
      } else if (v.isTensorList()) {
        for (const at::Tensor& t : v.toTensorVector()) requires_grad = requires_grad || requires_grad_of(t);
      }
    }
  }
  if (target == "aten::detach" || target == "aten::detach_") requires_grad = false;

  // Compute on the example values; attributes get a private copy before
  // anything writes to them.
  std::vector<c10::IValue> originals(stack->begin() + base, stack->end());
  for (size_t i = 0; i < n; ++i) {
    const c10::AliasInfo* ai = schema.arguments()[i].alias_info();
    if (ai == nullptr || !ai->isWrite() || !originals[i].isTensor()) continue;
    const at::Tensor& t = originals[i].toTensor();
    if (!t.defined() || as_proxy(t)) continue;
    AttrTensor* a = attr_for(t, true);
    if (!a->copied) {
      at::NoGradGuard no_grad;
      a->example = a->example.clone();
      a->copied = true;
    }
  }
  compute(op, stack, originals, target);

  // The node: positional arguments up to the last one that differs from its
  // default, keyword-only arguments only when they differ.
  ArgList args;
  Kwargs kwargs;
  size_t last = 0;
  for (size_t i = 0; i < n; ++i) {
    const c10::Argument& a = schema.arguments()[i];
    if (a.kwarg_only()) {
      if (!same_as_default(originals[i], a)) kwargs.emplace_back(a.name(), full[i]);
    } else if (!same_as_default(originals[i], a)) {
      last = i + 1;
    }
  }
  for (size_t i = 0; i < last; ++i) {
    if (!schema.arguments()[i].kwarg_only()) args.push_back(full[i]);
  }
  Node* node = graph_.call_function(target, std::move(args), std::move(kwargs));
  calls_.emplace(node, RecordedCall{op, std::move(full)});

  // The results: new proxies, or the written argument itself.
  const size_t r = returns.size();
  const size_t rbase = stack->size() - r;
  std::vector<TensorMetadata> metas;
  auto ref_for = [&](size_t j) { return r == 1 ? ValueRef{node, {}} : ValueRef{node, {static_cast<int64_t>(j)}}; };
  auto new_proxy = [&](const at::Tensor& example, ValueRef ref) {
    const bool rg = requires_grad && is_float_like(example.scalar_type());
    metas.push_back(TensorMetadata::from_tensor(example, rg));
    at::Tensor p = make_proxy(example, id_, std::move(ref),
                              values_ == ExampleValues::Meta ? c10::optional<c10::Device>(device_.value_or(c10::kCPU))
                                                             : c10::nullopt);
    static_cast<ProxyTensorImpl*>(p.unsafeGetTensorImpl())->set_traced_requires_grad(rg);
    return p;
  };
  for (size_t j = 0; j < r; ++j) {
    c10::IValue& out = (*stack)[rbase + j];
    const int k = written_arg_for_return(schema, returns[j]);
    if (k >= 0 && out.isTensor() && originals[k].isTensor()) {
      const at::Tensor& orig = originals[k].toTensor();
      const at::Tensor example = out.toTensor();
      metas.push_back(TensorMetadata::from_tensor(example, requires_grad_of(orig) || requires_grad));
      if (ProxyTensorImpl* p = as_proxy(orig)) {
        p->set_example(example);
        p->set_ref(ref_for(j));
      } else {
        AttrTensor* a = attr_for(orig, true);
        if (!example.is_meta() || a->example.is_meta()) a->example = example;  // meta: keep the real value
        ValueRef ref = ref_for(j);
        a->current = ref.path.empty() ? node : graph_.call_function("operator.getitem", {Argument(node), Argument(ref.path[0])});
      }
      out = orig;
    } else if (out.isTensor()) {
      if (out.toTensor().defined()) out = new_proxy(out.toTensor(), ref_for(j));
    } else if (out.isTensorList()) {
      c10::List<at::Tensor> list;
      std::vector<at::Tensor> items = out.toTensorVector();
      for (size_t e = 0; e < items.size(); ++e) {
        ValueRef ref = ref_for(j);
        ref.path.push_back(static_cast<int64_t>(e));
        list.push_back(new_proxy(items[e], std::move(ref)));
      }
      out = list;
    }
  }
  if (metas.size() == 1 && r == 1) {
    node->meta()["tensor_meta"] = metas.front();
  } else if (!metas.empty()) {
    node->meta()["tensor_meta"] = metas;
  }
}

void TraceSession::compute(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                           const std::vector<c10::IValue>& originals, const std::string& target) {
  const c10::FunctionSchema& schema = op.schema();
  const size_t n = originals.size();
  const size_t base = stack->size() - n;
  const bool meta = values_ == ExampleValues::Meta;
  for (size_t i = 0; i < n; ++i) (*stack)[base + i] = unwrap(originals[i], true, meta ? As::Meta : As::Example);
  if (meta && is_factory(schema)) {
    // A recorded factory (dynamic dimensions) makes its tensor on meta.
    for (size_t i = 0; i < n; ++i) {
      const c10::TypePtr t = unwrap_optional(schema.arguments()[i].real_type());
      if (t->kind() == c10::TypeKind::DeviceObjType) (*stack)[base + i] = c10::Device(c10::kMeta);
    }
  }
  c10::InferenceMode inference;
  try {
    op.callBoxed(stack);
    return;
  } catch (c10::Error& e) {
    if (!meta) {
      e.add_context("fxcpp: while tracing " + target + " on the example values");
      throw;
    }
  }
  // No meta kernel (or one that refused): run on zeros of the same metadata.
  stack->resize(base);
  for (size_t i = 0; i < n; ++i) stack->push_back(unwrap(originals[i], true, As::Zeros));
  try {
    op.callBoxed(stack);
  } catch (c10::Error& e) {
    e.add_context("fxcpp: while tracing " + target + " on zero-filled values (it has no meta kernel)");
    throw;
  }
  if (std::find(fallbacks_.begin(), fallbacks_.end(), target) == fallbacks_.end()) fallbacks_.push_back(target);
  const size_t r = schema.returns().size();
  for (size_t j = stack->size() - r; j < stack->size(); ++j) {
    c10::IValue& out = (*stack)[j];
    if (out.isTensor()) {
      out = meta_like(out.toTensor());
    } else if (out.isTensorList()) {
      c10::List<at::Tensor> list;
      for (const at::Tensor& t : out.toTensorVector()) list.push_back(meta_like(t));
      out = list;
    }
  }
}

Argument TraceSession::output_argument(const c10::IValue& v) {
  if (v.isTensor()) return tensor_argument(v.toTensor());
  if (v.isNone()) return Argument();
  if (v.isList()) {
    std::vector<Argument> items;
    for (const c10::IValue& e : v.toListRef()) items.push_back(output_argument(e));
    return Argument::list(std::move(items));
  }
  if (v.isTuple()) {
    std::vector<Argument> items;
    for (const c10::IValue& e : v.toTupleRef().elements()) items.push_back(output_argument(e));
    return Argument::tuple(std::move(items));
  }
  if (v.isGenericDict()) {
    Kwargs items;
    for (const auto& kv : v.toGenericDict()) {
      if (!kv.key().isString()) throw TraceError("forward returned a dict whose keys are not strings");
      items.emplace_back(kv.key().toStringRef(), output_argument(kv.value()));
    }
    return Argument::dict(std::move(items));
  }
  return Argument::from_ivalue(v);
}

}  // namespace fx::trace_impl
