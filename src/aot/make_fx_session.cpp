// MakeFxSession: ATen calls below autograd → call_function nodes, with
// writes functionalised.
#include "aot/make_fx_session.h"

#include "trace/kernel_registry.h"
#include "trace/trace_session.h"

#include <fx/error.h>
#include <fx/tensor_meta.h>

#include <ATen/core/jit_type.h>
#include <ATen/ops/clone.h>

#include <atomic>
#include <mutex>
#include <set>

namespace fx::aot_impl {
namespace {

std::atomic<uint64_t> next_session{1};

// Whether a boxed argument equals its schema default (and may be left out,
// as Python's dispatcher leaves it out of a __torch_dispatch__ call).
bool is_default(const c10::IValue& v, const c10::Argument& arg) {
  const c10::optional<c10::IValue>& d = arg.default_value();
  if (!d) return false;
  if (v.isNone() || (v.isTensor() && !v.toTensor().defined())) return d->isNone();
  if (v.isBool()) return d->isBool() && d->toBool() == v.toBool();
  if (v.isInt()) return d->isInt() && d->toInt() == v.toInt();
  if (v.isDouble()) return d->isDouble() && d->toDouble() == v.toDouble();
  if (v.isString()) return d->isString() && d->toStringRef() == v.toStringRef();
  if (v.isIntList()) return d->isIntList() && d->toIntVector() == v.toIntVector();
  return false;
}

// Writes the schema does not declare: aten::native_batch_norm updates its
// running statistics (arguments 3 and 4) in training mode, yet 1.13's
// schema gives them no (a!) annotation.
std::vector<size_t> hidden_writes(const std::string& target, const torch::jit::Stack& stack, size_t base) {
  if (target == "aten::native_batch_norm" && stack[base + 5].isBool() && stack[base + 5].toBool()) return {3, 4};
  return {};
}

bool is_write(const c10::Argument& a) { return a.alias_info() != nullptr && a.alias_info()->isWrite(); }

// The functional twin of an in-place operator (aten::add_.Tensor →
// aten::add.Tensor), or nullopt.
c10::optional<c10::OperatorHandle> functional_twin(const c10::OperatorHandle& op) {
  const c10::FunctionSchema& s = op.schema();
  const std::string& name = s.name();
  if (name.size() < 2 || name.back() != '_' || name[name.size() - 2] == '_') return c10::nullopt;
  if (s.arguments().empty() || !is_write(s.arguments()[0])) return c10::nullopt;
  for (size_t i = 1; i < s.arguments().size(); ++i)
    if (is_write(s.arguments()[i])) return c10::nullopt;
  auto twin = c10::Dispatcher::singleton().findSchema({name.substr(0, name.size() - 1), s.overload_name()});
  if (!twin || twin->schema().arguments().size() != s.arguments().size()) return c10::nullopt;
  return twin;
}

}  // namespace

struct MakeFxSession::Written {
  size_t index;       // schema argument
  at::Tensor tensor;  // the traced tensor written (a tracer or a bound tensor)
};

MakeFxSession::MakeFxSession()
    : id_(next_session.fetch_add(1)),
      graph_(std::make_shared<Graph>()),
      root_(std::make_shared<torch::nn::Module>()),
      rng_state_(at::Generator(at::detail::getDefaultCPUGenerator()).get_state()) {
  install_make_fx_kernel();
}

MakeFxSession::~MakeFxSession() {
  // Tracing draws from the default generator (dropout's masks): leave it as
  // the caller had it, so the compiled program draws what eager would.
  try {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(rng_state_);
  } catch (...) {
  }
}

void MakeFxSession::track_storage(const at::Tensor& example, const at::Tensor& owner) {
  if (example.has_storage())
    by_storage_[example.storage().unsafeGetStorageImpl()].push_back(
        c10::weak_intrusive_ptr<c10::TensorImpl>(owner.getIntrusivePtr()));
}

at::Tensor MakeFxSession::new_tracer(const at::Tensor& example, Node* node) {
  at::Tensor t = make_tracer(example, id_, node);
  track_storage(example, t);
  return t;
}

namespace {
at::Tensor private_copy(const at::Tensor& t) {
  PauseRecording untraced;
  return t.detach().clone(at::MemoryFormat::Preserve);
}

/// `t` itself, as an untraced alias (its storage, no autograd history).
at::Tensor alias_of(const at::Tensor& t) {
  PauseRecording untraced;
  return t.detach();
}
}  // namespace

at::Tensor MakeFxSession::add_input(const at::Tensor& example, const std::string& name, bool requires_grad) {
  Node* ph = graph_->placeholder(name);
  ph->meta()["tensor_meta"] = TensorMetadata::from_tensor(example, requires_grad);
  at::Tensor t = new_tracer(private_copy(example), ph);
  if (requires_grad) t.set_requires_grad(true);
  inputs_.emplace_back(ph, t);
  return t;
}

at::Tensor MakeFxSession::add_late_input(const at::Tensor& example, const std::string& name) {
  Node* last = nullptr;
  for (Node* n : graph_->nodes())
    if (n->op() == Opcode::Placeholder) last = n;
  Node* ph;
  {
    auto guard = last ? graph_->inserting_after(last) : graph_->inserting_before(nullptr);
    ph = graph_->placeholder(name);
  }
  ph->meta()["tensor_meta"] = TensorMetadata::from_tensor(example, false);
  return new_tracer(private_copy(example), ph);
}

void MakeFxSession::bind(const at::Tensor& t, const std::string& name) {
  Node* ph = graph_->placeholder(name);
  ph->meta()["tensor_meta"] = TensorMetadata::from_tensor(t);
  const bool shared = t.is_leaf() && t.requires_grad();
  at::Tensor example = shared ? alias_of(t) : private_copy(t);
  bound_[t.unsafeGetTensorImpl()] = Bound{ph, example, shared};
  inputs_.emplace_back(ph, t);
  track_storage(example, t);
}

void MakeFxSession::copy_on_write(const at::Tensor& t, const std::string& target) {
  auto it = bound_.find(t.unsafeGetTensorImpl());
  if (it == bound_.end() || !it->second.shared) return;
  // Views of the caller's tensor made during the trace would read its
  // storage, not the copy the write goes to.
  if (aliased(t))
    throw TraceError("make_fx: " + target + " writes parameter " + it->second.node->name() +
                     " in place while views of it are live; the trace does not write the caller's tensors");
  it->second.example = private_copy(it->second.example);
  it->second.shared = false;
  track_storage(it->second.example, t);
}

bool MakeFxSession::is_traced(const at::Tensor& t) const {
  if (!t.defined()) return false;
  if (TracerTensorImpl* tr = as_tracer(t)) {
    if (tr->session() != id_) throw TraceError("make_fx: a tensor of another (or a finished) trace was used");
    return true;
  }
  return bound_.count(t.unsafeGetTensorImpl()) > 0;
}

const at::Tensor& MakeFxSession::example_of(const at::Tensor& t) const {
  if (TracerTensorImpl* tr = as_tracer(t)) return tr->example();
  auto it = bound_.find(t.unsafeGetTensorImpl());
  return it != bound_.end() ? it->second.example : t;
}

Node* MakeFxSession::current_node(const at::Tensor& t) const {
  if (TracerTensorImpl* tr = as_tracer(t)) return tr->node();
  return bound_.at(t.unsafeGetTensorImpl()).node;
}

void MakeFxSession::set_current(const at::Tensor& t, Node* n) {
  if (TracerTensorImpl* tr = as_tracer(t)) {
    tr->set_node(n);
    return;
  }
  bound_.at(t.unsafeGetTensorImpl()).node = n;
}

bool MakeFxSession::aliased(const at::Tensor& t) const {
  const at::Tensor& ex = example_of(t);
  if (!ex.has_storage()) return false;
  auto it = by_storage_.find(ex.storage().unsafeGetStorageImpl());
  if (it == by_storage_.end()) return false;
  for (const auto& weak : it->second) {
    c10::intrusive_ptr<c10::TensorImpl> other = weak.lock();
    if (other && other.get() != t.unsafeGetTensorImpl()) return true;
  }
  return false;
}

Node* MakeFxSession::tensor_node(const at::Tensor& t) {
  if (is_traced(t)) return current_node(t);
  auto it = constants_.find(t.unsafeGetTensorImpl());
  if (it != constants_.end()) return it->second.second;
  const std::string name = "_tensor_constant" + std::to_string(constants_.size());
  root_->register_buffer(name, t);
  Node* first_op = nullptr;
  for (Node* n : graph_->nodes()) {
    if (n->op() != Opcode::Placeholder) {
      first_op = n;
      break;
    }
  }
  Node* n;
  {
    auto guard = graph_->inserting_before(first_op);
    n = graph_->get_attr(name);
  }
  n->meta()["tensor_meta"] = TensorMetadata::from_tensor(t);
  constants_.emplace(t.unsafeGetTensorImpl(), std::make_pair(t, n));
  return n;
}

Argument MakeFxSession::argument_of(const c10::IValue& v, const c10::TypePtr& type) {
  return trace_impl::boxed_argument(v, type, [this](const at::Tensor& t) {
    return t.defined() ? Argument(tensor_node(t)) : Argument();
  });
}

c10::IValue MakeFxSession::unwrap(const c10::IValue& v) const {
  if (v.isTensor()) return example_of(v.toTensor());
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorVector()) out.push_back(example_of(t));
    return out;
  }
  if (v.isList()) {
    const c10::List<c10::IValue> in = v.toList();
    c10::impl::GenericList out(in.elementType());
    for (const c10::IValue& e : in) out.push_back(unwrap(e));
    return out;
  }
  return v;
}

void MakeFxSession::handle(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  const auto& args = schema.arguments();
  const size_t n = args.size();
  const size_t base = stack->size() - n;
  const std::string target = trace_impl::full_operator_name(op.operator_name());

  bool tracer = false, any_tensor = false;
  for (size_t i = base; i < stack->size(); ++i) {
    const c10::IValue& v = (*stack)[i];
    if (v.isTensor() && v.toTensor().defined()) {
      any_tensor = true;
      tracer = tracer || is_traced(v.toTensor());
    } else if (v.isTensorList() || v.isList()) {
      for (const c10::IValue& e : v.toListRef()) {
        if (!e.isTensor()) continue;
        any_tensor = true;
        tracer = tracer || is_traced(e.toTensor());
      }
    }
  }
  bool returns_tensor = false;
  for (const c10::Argument& r : schema.returns()) returns_tensor = returns_tensor || trace_impl::type_has_tensor(r.type());
  // Ordinary tensors only: a constant computation. A factory is recorded.
  if (!tracer && (any_tensor || !returns_tensor)) {
    PauseRecording untraced;
    op.callBoxed(stack);
    return;
  }
  if (tracer && !returns_tensor) {
    bool writes = false;
    for (const c10::Argument& a : args) writes = writes || is_write(a);
    if (!writes && target == "aten::equal" && n == 2 && (*stack)[base].isTensor() &&
        (*stack)[base + 1].isTensor() && is_traced((*stack)[base].toTensor()) &&
        is_traced((*stack)[base + 1].toTensor()) &&
        current_node((*stack)[base].toTensor()) == current_node((*stack)[base + 1].toTensor())) {
      // equal(x, x) of one traced value is true without reading it (libtorch's
      // MultiheadAttention asks torch::equal(query, key) for self-attention).
      torch::jit::drop(*stack, n);
      torch::jit::push(*stack, true);
      return;
    }
    if (!writes && trace_impl::reads_value(target, schema))
      throw TraceError("make_fx: " + target +
                       " reads the value of a traced tensor (data-dependent control flow or item() cannot be "
                       "captured in a graph)");
  }

  // Which arguments are written, and how each write is recorded.
  std::vector<size_t> written_idx;
  for (size_t i = 0; i < n; ++i)
    if (is_write(args[i])) written_idx.push_back(i);
  for (size_t i : hidden_writes(target, *stack, base)) written_idx.push_back(i);
  std::vector<Written> written;
  for (size_t i : written_idx) {
    const c10::IValue& v = (*stack)[base + i];
    if (v.isTensor() && is_traced(v.toTensor())) written.push_back({i, v.toTensor()});
  }
  bool functionalize = true;
  for (const Written& w : written) functionalize = functionalize && !aliased(w.tensor);

  // The node's arguments (trailing defaults and default keyword-only ones left out).
  std::string node_target = target;
  std::vector<Argument> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = argument_of((*stack)[base + i], args[i].real_type());
  c10::optional<c10::OperatorHandle> twin = written.size() == 1 && written[0].index == 0 ? functional_twin(op)
                                                                                          : c10::nullopt;
  if (functionalize && !written.empty()) {
    if (twin) {
      node_target = trace_impl::full_operator_name(twin->operator_name());
    } else {
      for (const Written& w : written) {
        // The write goes into a private copy that stands for the value from now on.
        Node* copy = graph_->call_function("aten::clone", {Argument(current_node(w.tensor))});
        copy->meta()["tensor_meta"] = TensorMetadata::from_tensor(example_of(w.tensor), false);
        values[w.index] = Argument(copy);
        set_current(w.tensor, copy);
      }
    }
  }
  ArgList pos;
  Kwargs kw;
  size_t last = 0;
  for (size_t i = 0; i < n; ++i)
    if (!args[i].kwarg_only() && !is_default((*stack)[base + i], args[i])) last = i + 1;
  for (size_t i = 0; i < n; ++i) {
    if (!args[i].kwarg_only()) {
      if (i < last) pos.push_back(values[i]);
    } else if (!is_default((*stack)[base + i], args[i])) {
      kw.emplace_back(args[i].name(), values[i]);
    }
  }
  Node* node = graph_->call_function(node_target, std::move(pos), std::move(kw));

  // Run the original operator on the example values.
  for (const Written& w : written) copy_on_write(w.tensor, target);
  for (size_t i = base; i < stack->size(); ++i) (*stack)[i] = unwrap((*stack)[i]);
  {
    PauseRecording untraced;
    op.callBoxed(stack);
  }
  // A functional twin's result, like any write the operator returns, is
  // repointed by wrap_results.
  for (const Written& w : written)
    if (TracerTensorImpl* tr = as_tracer(w.tensor)) tr->refresh_metadata();
  wrap_results(op, stack, base, node, written);
}

void MakeFxSession::wrap_results(const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t, Node* node,
                                 const std::vector<Written>& written) {
  const auto& returns = op.schema().returns();
  const size_t nret = returns.size();
  const size_t first = stack->size() - nret;
  // An in-place result is the written tracer itself (autograd expects `self` back).
  auto written_result = [&](size_t r) -> const at::Tensor* {
    const c10::AliasInfo* ai = returns[r].alias_info();
    if (ai == nullptr || !ai->isWrite()) return nullptr;
    for (const Written& w : written) {
      const c10::AliasInfo* wi = op.schema().arguments()[w.index].alias_info();
      if (wi != nullptr && wi->beforeSets() == ai->beforeSets()) return &w.tensor;
    }
    return nullptr;
  };
  // A written value the operator returns is, from now on, that result: later
  // uses depend on this node (the write), not on what it overwrote.
  auto repoint = [&](const at::Tensor& w, Node* result) {
    if (current_node(w) == result) return;
    set_current(w, result);
    result->meta()["tensor_meta"] = TensorMetadata::from_tensor(example_of(w), false);
  };
  if (nret == 1 && (*stack)[first].isTensor()) {
    if (const at::Tensor* w = written_result(0)) {
      repoint(*w, node);
      (*stack)[first] = *w;
      return;
    }
    const at::Tensor& ex = (*stack)[first].toTensor();
    if (ex.defined()) {
      node->meta()["tensor_meta"] = TensorMetadata::from_tensor(ex, false);
      (*stack)[first] = new_tracer(ex, node);
    }
    return;
  }
  // Several results (or a list): one getitem node per tensor, as make_fx's
  // tree of proxies creates them.
  int64_t index = 0;
  for (size_t r = 0; r < nret; ++r, ++index) {
    c10::IValue& v = (*stack)[first + r];
    if (v.isTensor()) {
      if (const at::Tensor* w = written_result(r)) {
        repoint(*w, graph_->call_function("operator.getitem", {Argument(node), Argument(index)}));
        v = *w;
        continue;
      }
      const at::Tensor ex = v.toTensor();
      if (!ex.defined()) continue;
      Node* g = graph_->call_function("operator.getitem", {Argument(node), Argument(index)});
      g->meta()["tensor_meta"] = TensorMetadata::from_tensor(ex, false);
      v = new_tracer(ex, g);
    } else if (v.isTensorList()) {
      if (nret != 1) throw TraceError("make_fx: " + trace_impl::full_operator_name(op.operator_name()) +
                                      " returns a list of tensors among other results: not supported");
      c10::List<at::Tensor> out;
      int64_t k = 0;
      for (const at::Tensor& ex : v.toTensorVector()) {
        Node* g = graph_->call_function("operator.getitem", {Argument(node), Argument(k++)});
        g->meta()["tensor_meta"] = TensorMetadata::from_tensor(ex, false);
        out.push_back(new_tracer(ex, g));
      }
      v = out;
    }
  }
}

Argument MakeFxSession::output_argument(const c10::IValue& value, const std::string& where) {
  if (value.isNone()) return Argument();
  if (value.isTensor()) return value.toTensor().defined() ? Argument(tensor_node(value.toTensor())) : Argument();
  if (value.isTensorList() || value.isList() || value.isTuple()) {
    std::vector<Argument> items;
    size_t i = 0;
    const std::vector<c10::IValue> elems =
        value.isTuple() ? value.toTupleRef().elements().vec() : value.toListRef().vec();
    for (const c10::IValue& e : elems) items.push_back(output_argument(e, where + "[" + std::to_string(i++) + "]"));
    return value.isTuple() ? Argument::tuple(std::move(items)) : Argument::list(std::move(items));
  }
  throw TraceError("make_fx: the traced function returned a " + value.tagKind() + " at " + where +
                   ": outputs are tensors, None, and tuples or lists of them");
}

std::shared_ptr<GraphModule> MakeFxSession::finish(const Argument& output) {
  // Inputs whose value was written (functionalised) get their final value back.
  for (const auto& [ph, t] : inputs_) {
    Node* now = current_node(t);
    if (now != ph) graph_->call_function("aten::copy_", {Argument(ph), Argument(now)});
  }
  graph_->output(output);
  graph_->lint();
  inputs_.clear();
  bound_.clear();
  return std::make_shared<GraphModule>(root_, graph_, "GraphModule");
}

}  // namespace fx::aot_impl
