// The compiled form of a GraphModule's graph (see compiled_plan.h).
#include "execution/compiled_plan.h"

#include "execution/node_error.h"
#include "execution/opcode_dispatch.h"
#include "targets/direct_ops.h"
#include "targets/operator_call.h"

#include <fx/error.h>

#include <limits>

namespace fx::detail {

namespace {

constexpr uint32_t kUndefined = std::numeric_limits<uint32_t>::max();
/// Steps with at most this many argument values gather them on the stack.
constexpr size_t kInlineArgs = 8;

bool contains_node(const Argument& arg) {
  bool found = false;
  for_each_node(arg, [&](Node*) { found = true; });
  return found;
}

/// Python's "missing 2 required positional arguments: 'x' and 'y'".
std::string missing_arguments_message(const std::vector<std::string>& names) {
  std::string list;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) list += names.size() == 2 ? " and " : (i + 1 == names.size() ? ", and " : ", ");
    list += "'" + names[i] + "'";
  }
  return "forward() missing " + std::to_string(names.size()) + " required positional argument" +
         (names.size() == 1 ? "" : "s") + ": " + list;
}

using Entry = OperatorCall::Entry;
using Direct = OperatorCall::Direct;

template <class Fn>
Fn direct_fn(const Entry& e) {
  return reinterpret_cast<Fn>(e.direct);
}

/// Whether value `v` has the kind entry `e` was resolved for at position i.
inline bool kind_ok(const Entry& e, size_t i, const c10::IValue& v) {
  return static_cast<char>(v.isTensor() ? 1 : value_kind(v)) == e.key[i];
}

/// The plan's fastest path: calls `e`'s ATen entry point with the step's
/// values read straight from slots/constants. False (nothing done) if the
/// values' kinds are not the entry's.
inline bool try_direct(const Entry& e, const Step& st, const ValueSource* src, c10::IValue* frame,
                       const c10::IValue* constants, c10::IValue& out) {
  if (st.num_args != e.num_args || st.num_kwargs != 0) return false;
  const c10::IValue* v[3];
  for (uint32_t i = 0; i < st.num_args && i < 3; ++i) {
    const ValueSource& s = src[i];
    if (s.kind == ValueSource::Kind::Aggregate) return false;
    v[i] = s.kind == ValueSource::Kind::Slot ? frame + s.index : constants + s.index;
    if (!kind_ok(e, i, *v[i])) return false;
  }
  at::Scalar t1, t2;
  auto scalar = [&](uint32_t i, at::Scalar& tmp) -> const at::Scalar& {
    if (i >= st.num_args) return e.scalar_defaults[i];
    tmp = v[i]->toScalar();
    return tmp;
  };
  switch (e.direct_sig) {
    case Direct::T:
      out = direct_fn<UnaryFn>(e)(v[0]->toTensor());
      return true;
    case Direct::TT:
      out = direct_fn<BinaryFn>(e)(v[0]->toTensor(), v[1]->toTensor());
      return true;
    case Direct::TTS:
      out = direct_fn<BinaryAlphaFn>(e)(v[0]->toTensor(), v[1]->toTensor(), scalar(2, t1));
      return true;
    case Direct::TS:
      out = direct_fn<ScalarFn>(e)(v[0]->toTensor(), scalar(1, t1));
      return true;
    case Direct::TSS:
      out = direct_fn<TwoScalarsFn>(e)(v[0]->toTensor(), scalar(1, t1), scalar(2, t2));
      return true;
    case Direct::None:
      break;
  }
  return false;
}

}  // namespace

CompiledPlan::CompiledPlan(GraphModule& module) {
  const Graph& g = module.graph();
  graph = &g;
  graph_version = g.version();
  node_values_.assign(g.max_node_id(), ValueSource{ValueSource::Kind::Constant, kUndefined});

  // The nodes that run (generated code returns at the output), and for each
  // value the node that reads it last.
  std::vector<Node*> order;
  for (Node* n : g.nodes()) {
    order.push_back(n);
    if (n->op() == Opcode::Output) break;
  }
  std::vector<const Node*> last_user(g.max_node_id(), nullptr);
  std::vector<std::vector<Node*>> dies_at(g.max_node_id());
  for (size_t i = order.size(); i-- > 0;) {
    for (Node* input : order[i]->all_input_nodes()) {
      if (!last_user[input->id()]) {
        last_user[input->id()] = order[i];
        dies_at[order[i]->id()].push_back(input);
      }
    }
  }

  // Slots are reused once their value is dead.
  std::vector<uint32_t> free_slots;
  auto take_slot = [&]() -> uint32_t {
    if (free_slots.empty()) return num_slots_++;
    uint32_t s = free_slots.back();
    free_slots.pop_back();
    return s;
  };

  // Inputs are written to their slots before the first step runs, so every
  // placeholder gets its slot first, wherever it stands in the graph (a
  // placeholder after a call must not share a slot with a value that dies
  // before it). Placeholders after the output are inputs too, as in
  // torch.fx's generated signature; nothing reads them.
  for (Node* n : g.nodes()) {
    if (n->op() != Opcode::Placeholder) continue;
    try {
      PlanInput in;
      in.name = n->target();
      if (!n->args().empty()) in.default_value = n->args()[0].to_ivalue();
      if (const ShapeGuard* guard = shape_guard_of(*n)) in.guard = *guard;
      if (last_user[n->id()]) {
        in.slot = take_slot();
        node_values_[n->id()] = {ValueSource::Kind::Slot, *in.slot};
      } else {
        node_values_[n->id()] = {ValueSource::Kind::Constant, static_cast<uint32_t>(constants_.size())};
        constants_.emplace_back();  // nothing reads it
      }
      inputs_.push_back(std::move(in));
    } catch (const std::exception&) {
      throw Error(current_exception_message() + "\n\nWhile compiling " + n->format_node());
    }
  }

  for (Node* n : order) {
    try {
      switch (n->op()) {
        case Opcode::Placeholder:
          continue;
        case Opcode::GetAttr:
          node_values_[n->id()] = {ValueSource::Kind::Constant, static_cast<uint32_t>(constants_.size())};
          constants_.emplace_back(module.fetch_attr(n->target()));
          continue;
        default:
          break;
      }
      Step step;
      StepData data;
      data.node = n;
      step.args_begin = static_cast<uint32_t>(sources_.size());
      size_t aggregates_before = aggregates_.size();
      for (const Argument& a : n->args()) sources_.push_back(source_of(a));
      for (const auto& kv : n->kwargs()) sources_.push_back(source_of(kv.second));
      step.num_args = static_cast<uint32_t>(n->args().size());
      step.num_kwargs = static_cast<uint32_t>(n->kwargs().size());
      max_aggregates_ = std::max(max_aggregates_, aggregates_.size() - aggregates_before);
      max_call_args_ = std::max<size_t>(max_call_args_, step.num_args + step.num_kwargs);
      switch (n->op()) {
        case Opcode::CallFunction:
          data.function = std::make_unique<FunctionCall>(n->target(), kwarg_names_of(*n));
          step.op = data.function->operator_call();
          step.kind = step.op ? Step::Kind::Operator : Step::Kind::Function;
          break;
        case Opcode::CallMethod:
          data.method = std::make_unique<MethodCall>(n->target(), kwarg_names_of(*n));
          step.op = data.method->operator_call();
          step.kind = step.op ? Step::Kind::MethodOperator : Step::Kind::Method;
          break;
        case Opcode::CallModule: {
          step.kind = Step::Kind::Module;
          data.module = module.get_submodule(n->target());
          data.forward = find_module_forward(*data.module);
          if (!data.forward) {
            const torch::nn::Module& m = *data.module;  // typeid of a plain reference: nothing evaluated twice
            throw Error("no forward is registered for module '" + n->target() + "' of type " +
                        c10::demangle(typeid(m).name()) +
                        "; register it with fx::register_module_type<ItsImplClass>() or fx::register_module_forward()");
          }
          if (!n->kwargs().empty())
            throw Error("call_module '" + n->target() +
                        "' has keyword arguments, but a C++ module's forward takes positional arguments only");
          break;
        }
        default:
          step.kind = Step::Kind::Output;
          break;
      }
      step.frees_begin = static_cast<uint32_t>(frees_.size());
      if (step.kind != Step::Kind::Output) {
        // The result's slot is taken before this step's dead inputs give theirs back.
        step.out = take_slot();
        node_values_[n->id()] = {ValueSource::Kind::Slot, step.out};
        for (Node* dead : dies_at[n->id()]) {
          const ValueSource& s = node_values_[dead->id()];
          if (s.kind != ValueSource::Kind::Slot) continue;
          frees_.push_back(s.index);
          free_slots.push_back(s.index);
        }
        if (!last_user[n->id()]) {  // nobody reads this value: drop it at once
          frees_.push_back(step.out);
          free_slots.push_back(step.out);
        }
      }
      step.num_frees = static_cast<uint32_t>(frees_.size()) - step.frees_begin;
      step.cold = static_cast<uint32_t>(step_data_.size());
      steps_.push_back(step);
      step_data_.push_back(std::move(data));
    } catch (const std::exception& e) {
      std::string msg = current_exception_message();
      msg += "\n\nWhile compiling " + n->format_node();
      if (dynamic_cast<const TargetError*>(&e)) throw TargetError(msg);
      throw Error(msg);
    }
  }
  direct_entries_ = std::make_unique<std::atomic<const OperatorCall::Entry*>[]>(steps_.size());
  for (size_t i = 0; i < steps_.size(); ++i) direct_entries_[i].store(nullptr, std::memory_order_relaxed);
}

ValueSource CompiledPlan::source_of(const Argument& arg) {
  auto check_defined = [&](Node* n) {
    if (n->id() >= node_values_.size() || node_values_[n->id()].index == kUndefined)
      throw Error("node %" + n->name() + " is used before it is defined (run Graph::lint() to diagnose)");
  };
  if (arg.is_node()) {
    check_defined(arg.to_node());
    return node_values_[arg.to_node()->id()];
  }
  if (contains_node(arg)) {
    for_each_node(arg, check_defined);
    aggregates_.push_back(arg);
    return {ValueSource::Kind::Aggregate, static_cast<uint32_t>(aggregates_.size() - 1)};
  }
  constants_.push_back(arg.to_ivalue());
  return {ValueSource::Kind::Constant, static_cast<uint32_t>(constants_.size() - 1)};
}

const c10::IValue& CompiledPlan::build_aggregate(const ValueSource& s, const c10::IValue* frame,
                                                 std::vector<c10::IValue>& built) const {
  built.push_back(aggregates_[s.index].to_ivalue([&](Node* n) -> c10::IValue {
    const ValueSource& v = node_values_[n->id()];
    return v.kind == ValueSource::Kind::Slot ? frame[v.index] : constants_[v.index];
  }));
  return built.back();
}

void CompiledPlan::rethrow_in_step(size_t step) const {
  rethrow_while_executing(*step_data_[steps_[step].cold].node);
}

c10::IValue CompiledPlan::run(std::vector<c10::IValue>& inputs) const {
  if (inputs.size() > inputs_.size()) {
    // CPython's text, which counts `self`: "forward() takes 2 positional
    // arguments but 3 were given", "takes from 2 to 3 ..." with defaults.
    size_t required = 1;
    for (const PlanInput& in : inputs_)
      if (!in.default_value) ++required;
    const size_t total = inputs_.size() + 1, given = inputs.size() + 1;
    const std::string takes = required == total ? std::to_string(total) + " positional argument" + (total == 1 ? "" : "s")
                                                : "from " + std::to_string(required) + " to " + std::to_string(total) +
                                                      " positional arguments";
    throw Error("forward() takes " + takes + " but " + std::to_string(given) + " were given");
  }
  std::vector<c10::IValue> frame_storage(num_slots_);
  c10::IValue* frame = frame_storage.data();
  std::vector<std::string> missing;
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const PlanInput& in = inputs_[i];
    if (i < inputs.size()) {
      if (in.guard) check_shape_guard(*in.guard, inputs[i], "forward()", in.name);
      if (in.slot) frame[*in.slot] = std::move(inputs[i]);
    } else if (in.default_value) {
      if (in.slot) frame[*in.slot] = *in.default_value;
    } else {
      missing.push_back(in.name);
    }
  }
  if (!missing.empty()) throw Error(missing_arguments_message(missing));
  inputs.clear();

  std::vector<c10::IValue> built;
  built.reserve(max_aggregates_);
  const c10::IValue* inline_argv[kInlineArgs];
  std::vector<const c10::IValue*> heap_argv(max_call_args_ > kInlineArgs ? max_call_args_ : 0);
  const c10::IValue** argv = max_call_args_ > kInlineArgs ? heap_argv.data() : inline_argv;
  const ValueSource* sources = sources_.data();
  const uint32_t* frees = frees_.data();
  const c10::IValue* constants = constants_.data();

  const size_t num_steps = steps_.size();
  size_t pc = 0;
  try {
    for (; pc < num_steps; ++pc) {
      const Step& st = steps_[pc];
      const ValueSource* src = sources + st.args_begin;
      if (st.op) {
        const Entry* e = direct_entries_[pc].load(std::memory_order_acquire);
        if (e && try_direct(*e, st, src, frame, constants, frame[st.out])) {
          const uint32_t* fr = frees + st.frees_begin;
          for (uint32_t k = 0; k < st.num_frees; ++k) frame[fr[k]] = c10::IValue();
          continue;
        }
      }
      if (!built.empty()) built.clear();
      const uint32_t n = st.num_args + st.num_kwargs;
      for (uint32_t j = 0; j < n; ++j) {
        const ValueSource& s = src[j];
        argv[j] = s.kind == ValueSource::Kind::Slot       ? frame + s.index
                  : s.kind == ValueSource::Kind::Constant ? constants + s.index
                                                          : &build_aggregate(s, frame, built);
      }
      const ValueRefs args(argv, st.num_args), kwargs(argv + st.num_args, st.num_kwargs);
      switch (st.kind) {
        case Step::Kind::MethodOperator:
          if (st.num_args == 0 || !args[0]->isTensor()) {  // MethodCall reports the bad self
            frame[st.out] = step_data_[st.cold].method->call_refs(args, kwargs);
            break;
          }
          [[fallthrough]];
        case Step::Kind::Operator: {
          const Entry& e = st.op->entry_for(args, kwargs);
          if (e.direct_sig != Direct::None) direct_entries_[pc].store(&e, std::memory_order_release);
          frame[st.out] = e.invoke(e, args, kwargs);
          break;
        }
        case Step::Kind::Method:
          frame[st.out] = step_data_[st.cold].method->call_refs(args, kwargs);
          break;
        case Step::Kind::Function:
          frame[st.out] = step_data_[st.cold].function->call_refs(args, kwargs);
          break;
        case Step::Kind::Module: {
          const StepData& d = step_data_[st.cold];
          std::vector<c10::IValue> values;
          values.reserve(args.size());
          for (const c10::IValue* v : args) values.push_back(*v);
          frame[st.out] = (*d.forward)(*d.module, values);
          break;
        }
        case Step::Kind::Output: {
          if (st.num_args == 0) return c10::IValue();
          const ValueSource& s = src[0];
          if (s.kind == ValueSource::Kind::Slot) return std::move(frame[s.index]);
          if (s.kind == ValueSource::Kind::Aggregate) return std::move(built[0]);
          return *args[0];
        }
      }
      const uint32_t* fr = frees + st.frees_begin;
      for (uint32_t k = 0; k < st.num_frees; ++k) frame[fr[k]] = c10::IValue();
    }
  } catch (...) {
    rethrow_in_step(pc);
  }
  return c10::IValue();  // a graph without output returns None
}

}  // namespace fx::detail
