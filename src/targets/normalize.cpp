// Argument normalization (torch.fx operator_schemas.normalize_function /
// normalize_module): bind a call's args and kwargs to a signature the way
// Python's inspect.Signature.bind does, fill in the defaults, and split the
// result into positional arguments and keywords.
#include <fx/error.h>
#include <fx/normalize.h>

#include "targets/module_signatures.h"
#include "targets/registry.h"

#include <ATen/core/function_schema.h>
#include <torch/csrc/jit/frontend/function_schema_parser.h>
#include <torch/nn/module.h>

#include <sstream>

namespace fx {
namespace {

/// One parameter of a signature; `type` is null for module forwards.
struct Param {
  std::string name;
  std::optional<Argument> default_value;
  bool kwarg_only = false;
  c10::TypePtr type;
};
using Signature = std::vector<Param>;

/// torch.fx _torchscript_schema_to_signature: `self` is called `input`.
Signature schema_signature(const c10::FunctionSchema& schema) {
  Signature sig;
  for (const c10::Argument& a : schema.arguments()) {
    Param p;
    p.name = a.name() == "self" ? "input" : a.name();
    if (a.default_value()) p.default_value = Argument::from_ivalue(*a.default_value());
    p.kwarg_only = a.kwarg_only();
    p.type = a.type();
    sig.push_back(std::move(p));
  }
  return sig;
}

Signature forward_signature(const std::vector<ForwardParameter>& params) {
  Signature sig;
  for (const ForwardParameter& f : params) sig.push_back(Param{f.name, f.default_value, f.kwarg_only, nullptr});
  return sig;
}

/// inspect.Signature.bind(*args, **kwargs): for each parameter, the index of
/// the value bound to it (positional i → i, keyword j → n_args + j, unbound →
/// -1 when it has a default); nullopt where Python raises TypeError (too many
/// positional arguments, an unknown or repeated keyword, a missing argument).
template <class K>
std::optional<std::vector<int>> bind_call(const Signature& sig, size_t n_args, const std::vector<std::pair<std::string, K>>& kwargs) {
  std::vector<int> bound(sig.size(), -1);
  size_t positional = 0;
  while (positional < sig.size() && !sig[positional].kwarg_only) ++positional;
  if (n_args > positional) return std::nullopt;
  for (size_t i = 0; i < n_args; ++i) bound[i] = static_cast<int>(i);
  for (size_t j = 0; j < kwargs.size(); ++j) {
    size_t p = 0;
    while (p < sig.size() && sig[p].name != kwargs[j].first) ++p;
    if (p == sig.size() || bound[p] >= 0) return std::nullopt;
    bound[p] = static_cast<int>(n_args + j);
  }
  for (size_t p = 0; p < sig.size(); ++p)
    if (bound[p] < 0 && !sig[p].default_value) return std::nullopt;
  return bound;
}

/// _args_kwargs_to_normalized_args_kwargs: bound values (defaults applied),
/// the first args.size() positionally unless only keywords are wanted.
ArgsKwargsPair normalized(const Signature& sig, const std::vector<int>& bound, const ArgList& args,
                          const Kwargs& kwargs, bool only_kwargs) {
  ArgsKwargsPair out;
  for (size_t p = 0; p < sig.size(); ++p) {
    const int b = bound[p];
    Argument value = b < 0 ? *sig[p].default_value
                           : (static_cast<size_t>(b) < args.size() ? args[b] : kwargs[b - args.size()].second);
    if (!only_kwargs && p < args.size())
      out.args.push_back(std::move(value));
    else
      out.kwargs.emplace_back(sig[p].name, std::move(value));
  }
  return out;
}

/// A schema type string ("Tensor", "int[]", "float?") as a type.
c10::TypePtr parse_type(const std::string& text) {
  try {
    const c10::FunctionSchema s = torch::jit::parseSchema("f(" + text + " a) -> ()");
    return s.arguments().at(0).type();
  } catch (const std::exception&) {
    throw Error("normalize: '" + text + "' is not a schema type (such as Tensor, int, float[], Tensor?)");
  }
}

/// torch.fx type_matches: a subtype, or an int for an int list.
bool type_matches(const c10::TypePtr& param, const c10::TypePtr& given) {
  if (given->isSubtypeOf(*param)) return true;
  if (auto list = param->cast<c10::ListType>())
    return list->getElementType()->kind() == c10::TypeKind::IntType && given->kind() == c10::TypeKind::IntType;
  return false;
}

/// Whether the argument types bind to `sig` and each matches its parameter.
bool types_match(const Signature& sig, const NormalizeOptions& options) {
  std::vector<c10::TypePtr> arg_types;
  for (const std::string& t : options.arg_types.value_or(std::vector<std::string>{})) arg_types.push_back(parse_type(t));
  std::vector<std::pair<std::string, c10::TypePtr>> kwarg_types;
  for (const auto& kv : options.kwarg_types.value_or(std::vector<std::pair<std::string, std::string>>{}))
    kwarg_types.emplace_back(kv.first, parse_type(kv.second));
  auto bound = bind_call(sig, arg_types.size(), kwarg_types);
  if (!bound) return false;
  for (size_t p = 0; p < sig.size(); ++p) {
    const int b = (*bound)[p];
    if (b < 0) continue;
    const c10::TypePtr& given =
        static_cast<size_t>(b) < arg_types.size() ? arg_types[b] : kwarg_types[b - arg_types.size()].second;
    if (!type_matches(sig[p].type, given)) return false;
  }
  return true;
}

}  // namespace

std::optional<ArgsKwargsPair> normalize_function(const std::string& target, const ArgList& args,
                                                 const Kwargs& kwargs, const NormalizeOptions& options) {
  const std::vector<c10::OperatorHandle> overloads = detail::operator_overloads(target);
  std::vector<Signature> candidates;
  std::vector<const c10::FunctionSchema*> schemas;
  std::vector<std::vector<int>> bindings;
  for (const c10::OperatorHandle& op : overloads) {
    Signature sig = schema_signature(op.schema());
    if (auto bound = bind_call(sig, args.size(), kwargs)) {
      candidates.push_back(std::move(sig));
      schemas.push_back(&op.schema());
      bindings.push_back(std::move(*bound));
    }
  }
  const bool only_kwargs = options.normalize_to_only_use_kwargs;
  if (candidates.empty()) return std::nullopt;
  if (candidates.size() == 1) return normalized(candidates[0], bindings[0], args, kwargs, only_kwargs);
  if (!options.arg_types && !options.kwarg_types) {
    // "aten::conv2d" is also how fxcpp names the default overload (torch.fx's
    // aten.conv2d.default, what traced and imported graphs call): it wins.
    for (size_t i = 0; i < candidates.size(); ++i)
      if (schemas[i]->overload_name().empty()) return normalized(candidates[i], bindings[i], args, kwargs, only_kwargs);
  } else {
    // torch.fx tries every overload of the target here, not only the candidates.
    for (const c10::OperatorHandle& op : overloads) {
      Signature sig = schema_signature(op.schema());
      if (!types_match(sig, options)) continue;
      auto bound = bind_call(sig, args.size(), kwargs);
      if (!bound) return std::nullopt;
      return normalized(sig, *bound, args, kwargs, only_kwargs);
    }
    return std::nullopt;
  }
  std::string printouts;
  for (const c10::FunctionSchema* s : schemas) {
    std::ostringstream os;
    os << *s;
    printouts += "\n" + os.str();
  }
  throw Error("Tried to normalize arguments to " + target +
              " but the schema match was ambiguous! Please provide argument types to the normalize_arguments() "
              "call. Available schemas:" +
              printouts);
}

std::optional<ArgsKwargsPair> normalize_module(const torch::nn::Module& root, const std::string& target,
                                               const ArgList& args, const Kwargs& kwargs,
                                               const NormalizeOptions& options) {
  // root.get_submodule(target), one dotted part at a time.
  const torch::nn::Module* module = &root;
  size_t pos = 0;
  while (!target.empty() && pos <= target.size()) {
    size_t dot = target.find('.', pos);
    if (dot == std::string::npos) dot = target.size();
    const std::string part = target.substr(pos, dot - pos);
    const torch::nn::Module* child = nullptr;
    for (const auto& item : module->named_children())
      if (item.key() == part) child = item.value().get();
    if (!child)
      throw Error("Tried to normalize node with target " + target + " but root did not have that target!");
    module = child;
    pos = dot + 1;
  }
  const auto params = detail::module_forward_signature(*module);
  if (!params) return std::nullopt;
  const Signature sig = forward_signature(*params);
  auto bound = bind_call(sig, args.size(), kwargs);
  // Python's sig.bind raises TypeError here; torch.fx lets it escape.
  if (!bound)
    throw Error("Tried to normalize node with target " + target + ": its arguments do not bind to forward(" +
                [&] {
                  std::string s;
                  for (const Param& p : sig) s += (s.empty() ? "" : ", ") + p.name;
                  return s;
                }() +
                ")");
  return normalized(sig, *bound, args, kwargs, options.normalize_to_only_use_kwargs);
}

}  // namespace fx
