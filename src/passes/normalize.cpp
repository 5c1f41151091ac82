// Argument normalization: normalize_function and normalize_args (see fx/passes/normalize.h).
#include <fx/passes/normalize.h>

#include <fx/error.h>
#include <fx/interpreter.h>

#include "targets/operator_call.h"
#include "targets/registry.h"

#include <ATen/ATen.h>

#include <unordered_map>

namespace fx {
namespace {

constexpr const char* kNormalizePass = "NormalizeArgs";

const c10::IValue& tensor_proxy() {
  static const c10::IValue t(at::empty({0}));
  return t;
}

/// A value of the same kind as `v`, holding no tensor data.
c10::IValue to_proxy(const c10::IValue& v) {
  if (v.isTensor()) return tensor_proxy();
  if (v.isTensorList()) {
    c10::List<at::Tensor> l;
    for (size_t i = 0; i < v.toTensorList().size(); ++i) l.push_back(tensor_proxy().toTensor());
    return l;
  }
  if (v.isTuple()) {
    std::vector<c10::IValue> e;
    for (const auto& x : v.toTupleRef().elements()) e.push_back(to_proxy(x));
    return c10::ivalue::Tuple::create(std::move(e));
  }
  return v;
}

/// A value of schema type `t`, or nullopt when the kind cannot be told.
std::optional<c10::IValue> proxy_of_type(const c10::TypePtr& t) {
  switch (t->kind()) {
    case c10::TypeKind::TensorType: return tensor_proxy();
    case c10::TypeKind::IntType: return c10::IValue(int64_t(0));
    case c10::TypeKind::FloatType: return c10::IValue(0.0);
    case c10::TypeKind::BoolType: return c10::IValue(false);
    case c10::TypeKind::ListType: {
      auto elem = t->castRaw<c10::ListType>()->getElementType();
      if (elem->kind() == c10::TypeKind::TensorType) return c10::IValue(c10::List<at::Tensor>());
      if (elem->kind() == c10::TypeKind::IntType) return c10::IValue(c10::List<int64_t>());
      return std::nullopt;
    }
    default: return std::nullopt;
  }
}

std::optional<c10::IValue> proxy_of_returns(const std::vector<c10::TypePtr>& returns) {
  if (returns.size() == 1) return proxy_of_type(returns[0]);
  std::vector<c10::IValue> e;
  for (const auto& r : returns) {
    auto p = proxy_of_type(r);
    if (!p) return std::nullopt;
    e.push_back(*p);
  }
  return c10::IValue(c10::ivalue::Tuple::create(std::move(e)));
}

struct Unknown {};

/// The values of a call's arguments from value_of (throws Unknown).
std::vector<c10::IValue> values_of(const std::vector<Argument>& args,
                                   const std::function<std::optional<c10::IValue>(Node*)>& value_of) {
  std::vector<c10::IValue> out;
  out.reserve(args.size());
  for (const auto& a : args)
    out.push_back(a.to_ivalue([&](Node* n) -> c10::IValue {
      auto v = value_of(n);
      if (!v) throw Unknown{};
      return *v;
    }));
  return out;
}

/// The dispatcher operator behind call_method `m` resolved for these values.
std::optional<c10::IValue> method_result(const Node& n, const std::function<std::optional<c10::IValue>(Node*)>& value_of) {
  const std::string& m = n.target();
  if (m == "size" || m == "stride") {
    if (n.args().size() == 1 && n.kwargs().empty()) return c10::IValue(c10::List<int64_t>());
    return c10::IValue(int64_t(0));
  }
  if (m == "dim" || m == "numel") return c10::IValue(int64_t(0));
  try {
    std::vector<std::string> names;
    std::vector<Argument> kw;
    for (const auto& kv : n.kwargs()) {
      names.push_back(kv.first);
      kw.push_back(kv.second);
    }
    auto args = values_of(n.args(), value_of);
    auto kwargs = values_of(kw, value_of);
    auto call = detail::shared_operator_call("call_method " + m, "aten::" + m, std::nullopt, names);
    const auto& e = call->entry_for(detail::refs_of(args), detail::refs_of(kwargs));
    std::vector<c10::TypePtr> rt;
    for (const auto& r : e.op.schema().returns()) rt.push_back(r.type());
    return proxy_of_returns(rt);
  } catch (...) {
    return std::nullopt;
  }
}

}  // namespace

std::optional<NormalizedCall> normalize_function(const Node& node,
                                                 const std::function<std::optional<c10::IValue>(Node*)>& value_of,
                                                 bool only_kwargs) {
  if (node.op() != Opcode::CallFunction) return std::nullopt;
  const std::string& target = node.target();
  if (detail::find_registered_function(target) || detail::is_builtin(target)) return std::nullopt;
  auto ref = detail::parse_operator_name(target);
  if (!ref) return std::nullopt;

  std::vector<std::string> names;
  std::vector<Argument> kw;
  for (const auto& kv : node.kwargs()) {
    names.push_back(kv.first);
    kw.push_back(kv.second);
  }
  const detail::OperatorCall::Entry* entry = nullptr;
  try {
    auto args = values_of(node.args(), value_of);
    auto kwargs = values_of(kw, value_of);
    auto call = detail::shared_operator_call(target, ref->name,
                                             ref->has_overload ? std::optional<std::string>(ref->overload) : std::nullopt,
                                             names);
    entry = &call->entry_for(detail::refs_of(args), detail::refs_of(kwargs));
  } catch (...) {
    return std::nullopt;  // unknown kinds, or no schema fits: left as it is
  }
  const c10::FunctionSchema& schema = entry->op.schema();
  const auto& formals = schema.arguments();
  const auto& sources = entry->match.sources;
  if (sources.size() != formals.size()) return std::nullopt;

  NormalizedCall out;
  out.target = schema.overload_name().empty() ? ref->name : ref->name + "." + schema.overload_name();
  for (const auto& r : schema.returns()) out.returns.push_back(r.type());
  const size_t num_args = node.args().size();
  bool positional = !only_kwargs;
  for (size_t p = 0; p < formals.size(); ++p) {
    const detail::ArgSource& s = sources[p];
    Argument value;
    switch (s.kind) {
      case detail::ArgSource::Kind::Positional: value = node.args()[s.index]; break;
      case detail::ArgSource::Kind::Keyword: value = kw[s.index]; break;
      case detail::ArgSource::Kind::PackRest:
        value = Argument::list(std::vector<Argument>(node.args().begin() + s.index, node.args().end()));
        break;
      case detail::ArgSource::Kind::Default:
        if (!formals[p].default_value()) return std::nullopt;
        value = Argument::from_ivalue(*formals[p].default_value());
        break;
    }
    // Python: the first len(args) parameters stay positional.
    positional = positional && p < num_args && !formals[p].kwarg_only() &&
                 (s.kind == detail::ArgSource::Kind::Positional || s.kind == detail::ArgSource::Kind::PackRest);
    if (positional)
      out.args.push_back(std::move(value));
    else
      out.kwargs.emplace_back(formals[p].name(), std::move(value));
  }
  return out;
}

PassResult normalize_args(std::shared_ptr<GraphModule> gm, const NormalizeArgsOptions& options) {
  if (!gm) throw Error(std::string(kNormalizePass) + ": the GraphModule is null");
  Graph& g = gm->graph();
  const size_t num_ids = g.max_node_id();
  std::vector<std::optional<c10::IValue>> kinds(num_ids);

  if (options.example_inputs) {
    struct Recorder : Interpreter {
      Recorder(std::shared_ptr<GraphModule> m, std::vector<std::optional<c10::IValue>>& k)
          : Interpreter(std::move(m)), kinds(k) {}
      c10::IValue run_node(Node* n) override {
        c10::IValue v = Interpreter::run_node(n);
        kinds[n->id()] = to_proxy(v);
        return v;
      }
      std::vector<std::optional<c10::IValue>>& kinds;
    } rec(gm, kinds);
    try {
      rec.run(*options.example_inputs);
    } catch (const std::exception& e) {
      throw Error(std::string(kNormalizePass) + ": running the example inputs failed: " + e.what());
    }
  }
  const bool recorded = options.example_inputs.has_value();
  auto value_of = [&](Node* n) { return kinds[n->id()]; };

  // Phase 1: every node's normalized form, nothing edited.
  std::vector<std::optional<NormalizedCall>> calls(num_ids);
  bool changed = false;
  for (Node* n : g.nodes()) {
    std::optional<c10::IValue> kind;
    switch (n->op()) {
      case Opcode::Placeholder:
      case Opcode::CallModule: kind = tensor_proxy(); break;
      case Opcode::GetAttr:
        try {
          kind = to_proxy(gm->fetch_attr(n->target()));
        } catch (...) {
        }
        break;
      case Opcode::CallFunction: {
        auto c = normalize_function(*n, value_of, options.normalize_to_only_use_kwargs);
        if (c) {
          kind = proxy_of_returns(c->returns);
          if (c->target != n->target() || c->args != n->args() || c->kwargs != n->kwargs()) {
            calls[n->id()] = std::move(c);
            changed = true;
          }
        } else if (n->target() == "operator.getitem" && !n->args().empty() && n->args()[0].is_node()) {
          auto in = kinds[n->args()[0].to_node()->id()];
          if (in && (in->isTensor() || in->isTensorList())) kind = tensor_proxy();
          if (in && in->isTuple() && n->args().size() > 1 && n->args()[1].kind() == Argument::Kind::Int) {
            const auto& e = in->toTupleRef().elements();
            int64_t i = n->args()[1].to_int();
            if (i < 0) i += static_cast<int64_t>(e.size());
            if (i >= 0 && i < static_cast<int64_t>(e.size())) kind = e[i];
          }
        }
        break;
      }
      case Opcode::CallMethod: kind = method_result(*n, value_of); break;
      case Opcode::Output: break;
    }
    if (!recorded) kinds[n->id()] = kind;
  }
  if (!changed) return {gm, false};

  // Phase 2: the new graph, node for node, swapped in when complete.
  auto ng = std::make_shared<Graph>();
  std::vector<Node*> map(num_ids, nullptr);
  auto m = [&](Node* in) -> Argument { return map[in->id()]; };
  for (Node* n : g.nodes()) {
    const auto& c = calls[n->id()];
    if (!c) {
      map[n->id()] = ng->node_copy(n, m);
      continue;
    }
    Node* nn = ng->create_node(Opcode::CallFunction, c->target, map_arg(c->args, m), map_arg(c->kwargs, m), n->name());
    const Meta& meta = static_cast<const Node*>(n)->meta();
    if (!meta.empty()) nn->meta() = meta;
    map[n->id()] = nn;
  }
  ng->lint();
  gm->set_graph(ng);
  return {gm, true};
}

}  // namespace fx
