// Target names: registered functions, builtins and the dispatcher's operators.
#include "targets/registry.h"

#include "targets/builtins.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <mutex>
#include <shared_mutex>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace fx {
namespace detail {
namespace {

/// torch._assert(condition, message): throws the message when the condition
/// is false, as torch._assert does (a bool, an int or a one-element tensor).
c10::IValue torch_assert(std::vector<c10::IValue>& args, ValueKwargs& kwargs) {
  c10::IValue cond = args.empty() ? c10::IValue() : args[0];
  c10::IValue message = args.size() > 1 ? args[1] : c10::IValue();
  for (auto& kv : kwargs) {
    if (kv.first == "condition") cond = kv.second;
    if (kv.first == "message") message = kv.second;
  }
  const bool ok = cond.isBool()     ? cond.toBool()
                  : cond.isTensor() ? cond.toTensor().item<bool>()
                  : cond.isInt()    ? cond.toInt() != 0
                                    : true;
  if (!ok) throw std::runtime_error(message.isString() ? message.toStringRef() : "assertion failed");
  return c10::IValue();
}

struct FunctionTable {
  std::shared_mutex mutex;
  // unique_ptr so that pointers handed out stay put while the map grows.
  std::unordered_map<std::string, std::unique_ptr<RegisteredFunction>> functions;

  /// The functions every process has, whatever ran before (torch.fx's
  /// torch._assert: graphs built by hand, traced or imported use it alike).
  FunctionTable() {
    functions.emplace("torch._assert", std::make_unique<RegisteredFunction>(RegisteredFunction{torch_assert, true}));
  }
};

FunctionTable& function_table() {
  static FunctionTable table;
  return table;
}

/// name → overload names, built from the dispatcher once and rebuilt when a
/// lookup misses (operators may be registered after start-up).
class OperatorIndex {
 public:
  std::vector<std::string> overloads(const std::string& name) {
    {
      std::shared_lock<std::shared_mutex> lock(mutex_);
      if (built_) {
        auto it = index_.find(name);
        if (it != index_.end()) return it->second;
        if (size_ == current_size()) return {};
      }
    }
    std::unique_lock<std::shared_mutex> lock(mutex_);
    rebuild();
    auto it = index_.find(name);
    return it == index_.end() ? std::vector<std::string>{} : it->second;
  }

  std::vector<std::string> names() {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    if (!built_ || size_ != current_size()) rebuild();
    std::vector<std::string> out;
    out.reserve(index_.size());
    for (const auto& kv : index_) out.push_back(kv.first);
    return out;
  }

 private:
  static size_t current_size() { return c10::Dispatcher::singleton().getAllOpNames().size(); }

  void rebuild() {
    index_.clear();
    auto all = c10::Dispatcher::singleton().getAllOpNames();
    for (const c10::OperatorName& op : all) index_[op.name].push_back(op.overload_name);
    size_ = all.size();
    built_ = true;
  }

  std::shared_mutex mutex_;
  std::unordered_map<std::string, std::vector<std::string>> index_;
  size_t size_ = 0;
  bool built_ = false;
};

OperatorIndex& operator_index() {
  static OperatorIndex index;
  return index;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

const RegisteredFunction* find_registered_function(const std::string& name) {
  FunctionTable& t = function_table();
  std::shared_lock<std::shared_mutex> lock(t.mutex);
  auto it = t.functions.find(name);
  return it == t.functions.end() ? nullptr : it->second.get();
}

const std::vector<std::string>& builtin_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> ops = {
        "getitem", "setitem", "add",  "sub",    "mul",      "truediv", "floordiv", "mod",    "pow",
        "neg",     "pos",  "abs",    "eq",       "ne",      "lt",       "le",     "gt",
        "ge",      "and_", "or_",    "xor",      "not_",    "invert",   "matmul", "iadd",
        "isub",    "imul", "itruediv", "lshift", "rshift",  "contains", "truth"};
    std::vector<std::string> out;
    for (const auto& op : ops) out.push_back("operator." + op);
    out.push_back("getattr");
    for (const ScriptBuiltin& b : script_builtins()) out.push_back(b.name);
    return out;
  }();
  return names;
}

bool is_builtin(const std::string& name) {
  static const std::unordered_set<std::string> set(builtin_names().begin(), builtin_names().end());
  return set.count(name) != 0;
}

std::optional<OperatorRef> parse_operator_name(const std::string& target) {
  size_t ns = target.find("::");
  if (ns == std::string::npos || ns == 0) return std::nullopt;
  OperatorRef ref;
  size_t dot = target.find('.', ns + 2);
  if (dot == std::string::npos) {
    ref.name = target;
  } else {
    ref.name = target.substr(0, dot);
    ref.overload = target.substr(dot + 1);
    ref.has_overload = true;
  }
  if (ref.name.size() == ns + 2) return std::nullopt;
  return ref;
}

bool is_out_overload(const std::string& overload) {
  return overload == "out" || (overload.size() > 4 && overload.compare(overload.size() - 4, 4, "_out") == 0);
}

std::vector<std::string> dispatcher_overloads(const std::string& name) {
  return operator_index().overloads(name);
}

std::vector<c10::OperatorHandle> operator_overloads(const std::string& target) {
  std::vector<c10::OperatorHandle> out;
  auto ref = parse_operator_name(target);
  if (!ref) return out;
  std::vector<std::string> overloads;
  if (ref->has_overload) {
    overloads.push_back(ref->overload);
  } else {
    for (auto& o : dispatcher_overloads(ref->name))
      if (!is_out_overload(o)) overloads.push_back(o);
  }
  for (const auto& o : overloads) {
    auto op = c10::Dispatcher::singleton().findSchema(c10::OperatorName(ref->name, o));
    if (op && op->hasSchema()) out.push_back(*op);
  }
  return out;
}

}  // namespace detail

void register_function(const std::string& name, Function fn, bool impure) {
  if (name.empty()) throw Error("register_function: the name must not be empty");
  if (!fn) throw Error("register_function: no function given for '" + name + "'");
  auto& t = detail::function_table();
  std::unique_lock<std::shared_mutex> lock(t.mutex);
  t.functions[name] = std::make_unique<detail::RegisteredFunction>(detail::RegisteredFunction{std::move(fn), impure});
}

std::vector<std::string> closest_target_names(const std::string& target, size_t n) {
  std::vector<std::string> candidates = detail::operator_index().names();
  const auto& builtins = detail::builtin_names();
  candidates.insert(candidates.end(), builtins.begin(), builtins.end());
  {
    auto& t = detail::function_table();
    std::shared_lock<std::shared_mutex> lock(t.mutex);
    for (const auto& kv : t.functions) candidates.push_back(kv.first);
  }
  // Compare without the overload: "aten::addd.Tensor" is closest to "aten::add".
  auto ref = detail::parse_operator_name(target);
  const std::string key = ref ? ref->name : target;
  std::vector<std::pair<size_t, std::string>> scored;
  scored.reserve(candidates.size());
  for (auto& c : candidates) scored.emplace_back(detail::edit_distance(key, c), std::move(c));
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (size_t i = 0; i < scored.size() && out.size() < n; ++i) out.push_back(scored[i].second);
  return out;
}

void check_function_target(const std::string& target) {
  if (detail::find_registered_function(target) || detail::is_builtin(target)) return;
  if (auto ref = detail::parse_operator_name(target)) {
    auto overloads = detail::dispatcher_overloads(ref->name);
    if (!ref->has_overload && !overloads.empty()) return;
    if (ref->has_overload) {
      if (std::find(overloads.begin(), overloads.end(), ref->overload) != overloads.end()) return;
      if (!overloads.empty()) {
        std::ostringstream msg;
        msg << "unknown overload '" << ref->overload << "' of call_function target '" << ref->name
            << "'; it has:";
        for (const auto& o : overloads) msg << " " << ref->name << (o.empty() ? "" : ".") << o;
        throw TargetError(msg.str());
      }
    }
  }
  std::ostringstream msg;
  msg << "unknown call_function target '" << target << "'; did you mean ";
  auto close = closest_target_names(target, 3);
  for (size_t i = 0; i < close.size(); ++i) msg << (i ? ", " : "") << close[i];
  msg << "? (targets are dispatcher operators like aten::add, builtins like operator.getitem, "
         "or functions registered with fx::register_function)";
  throw TargetError(msg.str());
}

bool is_impure_function(const std::string& target) {
  // torch._assert is in torch.fx's _side_effectful_functions, however it was registered.
  if (const auto* f = detail::find_registered_function(target)) return f->impure || target == "torch._assert";
  if (detail::is_builtin(target)) {
    // TorchScript's aten::warn and prim::RaiseException run for their effect.
    for (const detail::ScriptBuiltin& b : detail::script_builtins())
      if (b.name == target) return b.impure;
    // x += y on a tensor writes to x (torch.fx counts these as pure, so its
    // DCE may drop an in-place update whose result is unused).
    return target == "operator.iadd" || target == "operator.isub" || target == "operator.imul" ||
           target == "operator.itruediv" || target == "operator.setitem";
  }
  static std::mutex mutex;
  static std::unordered_map<std::string, bool> cache;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(target);
    if (it != cache.end()) return it->second;
  }
  bool impure = false;
  const auto ref = detail::parse_operator_name(target);
  if (ref) {
    // torch.fx's _side_effectful_functions: the profiler's record_function
    // enter/exit ops (and the whole profiler:: namespace) are kept even
    // when nothing reads their result.
    const std::string& name = ref->name;
    const std::string base = name.substr(name.find("::") + 2);
    if (name.compare(0, 10, "profiler::") == 0 || base == "_record_function_enter" ||
        base == "_record_function_enter_new" || base == "_record_function_exit")
      impure = true;
  }
  const bool explicit_overload = detail::parse_operator_name(target).value_or(detail::OperatorRef{}).has_overload;
  for (const c10::OperatorHandle& op : detail::operator_overloads(target)) {
    // Without an explicit overload, out= variants do not count (div.out_mode
    // is one, whatever its overload name says); a named one writes its out.
    for (const auto& a : op.schema().arguments())
      if (a.alias_info() && a.alias_info()->isWrite() && (explicit_overload || !a.is_out())) impure = true;
    // An operator that returns nothing runs only for its effect
    // (aten::_assert_async, aten::_assert_tensor_metadata, the record_function
    // exits): torch.fx 1.13 lists only torch._assert and the profiler ops;
    // fxcpp keeps every such op.
    if (op.schema().returns().empty()) impure = true;
  }
  std::lock_guard<std::mutex> lock(mutex);
  cache[target] = impure;
  return impure;
}

}  // namespace fx
