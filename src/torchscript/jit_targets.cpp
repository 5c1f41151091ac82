// call_function targets for TorchScript operators.
#include "torchscript/jit_targets.h"

#include "targets/registry.h"

#include <fx/target.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>

namespace fx::import_detail {

bool mentions_tensor(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::TensorType) return true;
  for (const auto& t : type->containedTypes())
    if (mentions_tensor(t)) return true;
  return false;
}

namespace {

// TorchScript's Python arithmetic and comparison operators → torch.fx builtins.
const std::unordered_map<std::string, std::string>& builtin_map() {
  static const std::unordered_map<std::string, std::string> map = {
      {"aten::add", "operator.add"},         {"aten::sub", "operator.sub"},
      {"aten::mul", "operator.mul"},         {"aten::div", "operator.truediv"},
      {"aten::floordiv", "operator.floordiv"}, {"aten::remainder", "operator.mod"},
      {"aten::pow", "operator.pow"},         {"aten::neg", "operator.neg"},
      {"aten::eq", "operator.eq"},           {"aten::ne", "operator.ne"},
      {"aten::lt", "operator.lt"},           {"aten::le", "operator.le"},
      {"aten::gt", "operator.gt"},           {"aten::ge", "operator.ge"},
      {"aten::__and__", "operator.and_"},    {"aten::__or__", "operator.or_"},
      {"aten::__xor__", "operator.xor"},     {"aten::__not__", "operator.not_"},
      {"aten::__getitem__", "operator.getitem"}, {"aten::__contains__", "operator.contains"},
      {"aten::__lshift__", "operator.lshift"}, {"aten::__rshift__", "operator.rshift"},
      {"aten::abs", "operator.abs"},
  };
  return map;
}

bool has_tensor_argument(const c10::FunctionSchema& schema) {
  for (const auto& a : schema.arguments())
    if (mentions_tensor(a.type())) return true;
  return false;
}

// TorchScript operators registered as fx functions, by target name. The
// Operation of a vararg operator depends on the number of inputs, which is
// part of its target name.
struct FallbackTable {
  std::mutex mutex;
  std::unordered_set<std::string> registered;
};

FallbackTable& fallback_table() {
  static FallbackTable table;
  return table;
}

// A list built from a node's arguments has no element type when its items
// are not plain ints, floats, bools or tensors ([('0', x), ('1', y)]); the
// TorchScript operations expect the one TorchScript would give it
// (Tuple[str, Tensor]): unify the items' types (recursively), as the
// interpreter's prim::ListConstruct does. Lists that already have a type
// (run-time lists the graph changes in place) are never copied.
c10::IValue with_element_types(c10::IValue v) {
  if (v.isList()) {
    c10::List<c10::IValue> list = v.toList();
    if (list.elementType()->kind() != c10::TypeKind::AnyType || list.empty()) return v;
    std::vector<c10::IValue> items;
    c10::TypePtr element;
    for (const c10::IValue& i : list) {
      items.push_back(with_element_types(i));
      c10::TypePtr t = items.back().type();
      if (!element) {
        element = t;
      } else if (auto u = c10::unifyTypes(element, t)) {
        element = *u;
      } else {
        return v;
      }
    }
    c10::impl::GenericList typed(element);
    for (auto& i : items) typed.push_back(std::move(i));
    return typed;
  }
  if (v.isTuple()) {  // rebuilt only when an item was (this runs on every call of the operator)
    std::vector<c10::IValue> items;
    bool changed = false;
    for (const c10::IValue& i : v.toTupleRef().elements()) {
      items.push_back(with_element_types(i));
      changed = changed || !items.back().isSameIdentity(i);
    }
    return changed ? c10::ivalue::Tuple::create(std::move(items)) : v;
  }
  return v;
}

void register_fallback(const std::string& target, const torch::jit::Node* node) {
  FallbackTable& table = fallback_table();
  std::lock_guard<std::mutex> lock(table.mutex);
  if (!table.registered.insert(target).second) return;
  torch::jit::Operation op = node->getOperation();
  const size_t num_outputs = node->outputs().size();
  const bool impure = node->hasSideEffects() || node->schema().is_mutable();
  // A vararg Operation (aten::format, prim::Print, aten::percentFormat ...)
  // pops its number of inputs first: TorchScript's interpreter pushes it
  // (its OPN instruction). Without it the operation reads past its inputs.
  const bool push_num_inputs = pushes_num_inputs(*node);
  register_function(
      target,
      [op, num_outputs, push_num_inputs, target](std::vector<c10::IValue>& args,
                                                  ValueKwargs& /*kwargs*/) mutable -> c10::IValue {
        const size_t num_inputs = args.size();
        torch::jit::Stack stack;
        stack.reserve(num_inputs + 1);
        for (auto& a : args) stack.push_back(with_element_types(std::move(a)));
        if (push_num_inputs) stack.emplace_back(static_cast<int64_t>(num_inputs));
        op(stack);
        if (stack.size() < num_outputs)
          throw Error(target + ": the TorchScript operation returned " + std::to_string(stack.size()) +
                      " values, expected " + std::to_string(num_outputs));
        if (num_outputs == 1) return std::move(stack.back());
        if (num_outputs == 0) return c10::IValue();
        std::vector<c10::IValue> outs(std::make_move_iterator(stack.end() - num_outputs),
                                      std::make_move_iterator(stack.end()));
        return c10::ivalue::Tuple::create(std::move(outs));
      },
      impure);
}

// `type` with every type variable (the t of aten::append.t) made Any, so a
// node with inputs of these types matches the schema.
c10::TypePtr without_type_variables(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::VarType) return c10::AnyType::get();
  auto contained = type->containedTypes();
  if (contained.empty()) return type;
  std::vector<c10::TypePtr> made;
  made.reserve(contained.size());
  for (const auto& t : contained) made.push_back(without_type_variables(t));
  return type->withContained(std::move(made));
}

// The number of inputs N when `overload_part` is "OVERLOAD_N" (a vararg target).
std::optional<size_t> vararg_count(const std::string& overload_part, const std::string& overload) {
  if (overload_part.size() <= overload.size() + 1 || overload_part.compare(0, overload.size(), overload) != 0 ||
      overload_part[overload.size()] != '_')
    return std::nullopt;
  size_t n = 0;
  for (size_t i = overload.size() + 1; i < overload_part.size(); ++i) {
    const char c = overload_part[i];
    if (c < '0' || c > '9' || n > 100000) return std::nullopt;
    n = n * 10 + static_cast<size_t>(c - '0');
  }
  return n;
}

}  // namespace

bool register_jit_target(const std::string& target) {
  const size_t ns = target.find("::");
  const size_t dot = ns == std::string::npos ? std::string::npos : target.find('.', ns + 2);
  if (dot == std::string::npos) return false;
  const std::string name = target.substr(0, dot);
  const std::string overload_part = target.substr(dot + 1);
  for (const auto& op : torch::jit::getAllOperatorsFor(c10::Symbol::fromQualString(name))) {
    const c10::FunctionSchema& schema = op->schema();
    const std::string overload = schema.overload_name().empty() ? "default" : schema.overload_name();
    size_t num_inputs = schema.arguments().size();
    if (schema.is_vararg()) {
      std::optional<size_t> n = vararg_count(overload_part, overload);
      if (!n || *n < num_inputs) continue;
      num_inputs = *n;
    } else if (overload_part != overload) {
      continue;
    }
    // A node of the operator, as import met it: its Operation, outputs and effects.
    torch::jit::Graph graph;
    torch::jit::Node* node = graph.create(c10::Symbol::fromQualString(name), schema.returns().size());
    for (size_t i = 0; i < num_inputs; ++i) {
      c10::TypePtr type = i < schema.arguments().size() ? without_type_variables(schema.arguments()[i].type())
                                                         : c10::AnyType::get();
      node->addInput(graph.addInput()->setType(type));
    }
    for (size_t i = 0; i < schema.returns().size(); ++i)
      node->output(i)->setType(without_type_variables(schema.returns()[i].type()));
    graph.insertNode(node);
    const torch::jit::Operator* found = node->maybeOperator();
    if (!found || !(found->schema() == schema)) continue;
    register_fallback(target, node);
    return true;
  }
  return false;
}

bool pushes_num_inputs(const torch::jit::Node& node) {
  const torch::jit::Operator& op = node.getOperator();
  return op.hasOperation() && op.schema().is_vararg();
}

JitTarget resolve_jit_target(const torch::jit::Node* node, bool overload_names) {
  const c10::FunctionSchema& schema = node->schema();
  const std::string& name = schema.name();
  const std::string& overload = schema.overload_name();
  // Operators TorchScript's interpreter runs itself (aten::warn,
  // prim::RaiseException, aten::format, aten::__is__ ...): fxcpp's builtins of
  // the same name, whose arguments are the node's inputs.
  if (detail::is_builtin(name)) return {JitTarget::Kind::Builtin, name};
  if (c10::Dispatcher::singleton().findSchema({name, overload})) {
    return {JitTarget::Kind::Dispatcher, overload_names && !overload.empty() ? name + "." + overload : name};
  }
  if (!has_tensor_argument(schema)) {
    auto it = builtin_map().find(name);
    if (it != builtin_map().end()) return {JitTarget::Kind::Builtin, it->second};
  }
  std::string target = name + "." + (overload.empty() ? "default" : overload);
  if (schema.is_vararg()) target += "_" + std::to_string(node->inputs().size());
  register_fallback(target, node);
  return {JitTarget::Kind::Registered, target};
}

}  // namespace fx::import_detail
