// A dispatcher operator called repeatedly (see operator_call.h).
#include "targets/operator_call.h"

#include "targets/direct_ops.h"
#include "targets/registry.h"

#include <fx/error.h>

#include <ATen/core/jit_type.h>
#include <ATen/core/stack.h>

#include <algorithm>
#include <cstring>
#include <sstream>
#include <unordered_map>

namespace fx::detail {

namespace {

using Unary = at::Tensor(const at::Tensor&);
using Binary = at::Tensor(const at::Tensor&, const at::Tensor&);
using BinaryAlpha = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Scalar&);
using WithScalar = at::Tensor(const at::Tensor&, const at::Scalar&);
using WithTwoScalars = at::Tensor(const at::Tensor&, const at::Scalar&, const at::Scalar&);

/// Signatures called through a typed handle: the result is one Tensor, the
/// arguments are Tensors (T) and Scalars (S), none written to.
enum class Fast : uint8_t { None, T, TT, TTS, TS, TSS };

Fast classify(const c10::FunctionSchema& schema) {
  if (schema.is_mutable() || schema.is_vararg() || schema.returns().size() != 1) return Fast::None;
  if (schema.returns()[0].type()->kind() != c10::TypeKind::TensorType) return Fast::None;
  std::string sig;
  for (const auto& a : schema.arguments()) {
    switch (a.type()->kind()) {
      case c10::TypeKind::TensorType:
        sig += 'T';
        break;
      case c10::TypeKind::NumberType:
        sig += 'S';
        break;
      default:
        return Fast::None;
    }
  }
  if (sig == "T") return Fast::T;
  if (sig == "TT") return Fast::TT;
  if (sig == "TTS") return Fast::TTS;
  if (sig == "TS") return Fast::TS;
  if (sig == "TSS") return Fast::TSS;
  return Fast::None;
}

/// Kind codes of the values of a call, compared against cached entries.
class Key {
 public:
  Key(c10::ArrayRef<const c10::IValue*> args, c10::ArrayRef<const c10::IValue*> kwargs)
      : size_(args.size() + kwargs.size() + 1) {
    char* out = size_ <= sizeof(inline_) ? inline_ : (heap_.resize(size_), &heap_[0]);
    size_t i = 0;
    for (const c10::IValue* v : args) out[i++] = static_cast<char>(value_kind(*v));
    out[i++] = '|';
    for (const c10::IValue* v : kwargs) out[i++] = static_cast<char>(value_kind(*v));
    data_ = out;
  }
  bool operator==(const std::string& s) const {
    if (s.size() != size_) return false;
    for (size_t i = 0; i < size_; ++i)
      if (s[i] != data_[i]) return false;
    return true;
  }
  std::string str() const { return std::string(data_, size_); }

 private:
  size_t size_;
  char inline_[24];
  std::string heap_;
  const char* data_ = nullptr;
};

using Entry = OperatorCall::Entry;

template <class Fn>
Fn direct_of(const Entry& e) {
  return reinterpret_cast<Fn>(e.direct);
}

c10::IValue invoke_t_direct(const Entry& e, Refs a, Refs k) {
  return direct_of<UnaryFn>(e)(e.source(0, a, k).toTensor());
}
c10::IValue invoke_t_typed(const Entry& e, Refs a, Refs k) { return e.typed_t->call(e.source(0, a, k).toTensor()); }
c10::IValue invoke_tt_direct(const Entry& e, Refs a, Refs k) {
  return direct_of<BinaryFn>(e)(e.source(0, a, k).toTensor(), e.source(1, a, k).toTensor());
}
c10::IValue invoke_tt_typed(const Entry& e, Refs a, Refs k) {
  return e.typed_tt->call(e.source(0, a, k).toTensor(), e.source(1, a, k).toTensor());
}
c10::IValue invoke_tts_direct(const Entry& e, Refs a, Refs k) {
  at::Scalar t;
  return direct_of<BinaryAlphaFn>(e)(e.source(0, a, k).toTensor(), e.source(1, a, k).toTensor(),
                                     e.scalar(2, a, k, t));
}
c10::IValue invoke_tts_typed(const Entry& e, Refs a, Refs k) {
  at::Scalar t;
  return e.typed_tts->call(e.source(0, a, k).toTensor(), e.source(1, a, k).toTensor(), e.scalar(2, a, k, t));
}
c10::IValue invoke_ts_direct(const Entry& e, Refs a, Refs k) {
  at::Scalar t;
  return direct_of<ScalarFn>(e)(e.source(0, a, k).toTensor(), e.scalar(1, a, k, t));
}
c10::IValue invoke_ts_typed(const Entry& e, Refs a, Refs k) {
  at::Scalar t;
  return e.typed_ts->call(e.source(0, a, k).toTensor(), e.scalar(1, a, k, t));
}
c10::IValue invoke_tss_direct(const Entry& e, Refs a, Refs k) {
  at::Scalar t1, t2;
  return direct_of<TwoScalarsFn>(e)(e.source(0, a, k).toTensor(), e.scalar(1, a, k, t1), e.scalar(2, a, k, t2));
}
c10::IValue invoke_tss_typed(const Entry& e, Refs a, Refs k) {
  at::Scalar t1, t2;
  return e.typed_tss->call(e.source(0, a, k).toTensor(), e.scalar(1, a, k, t1), e.scalar(2, a, k, t2));
}

/// The general path: the schema's argument stack through callBoxed.
c10::IValue invoke_boxed(const Entry& e, Refs args, Refs kwargs) {
  const auto& schema = e.op.schema();
  const auto& formals = schema.arguments();
  torch::jit::Stack stack;
  stack.reserve(std::max(formals.size(), schema.returns().size()));
  for (size_t p = 0; p < formals.size(); ++p) {
    const ArgSource& s = e.match.sources[p];
    if (s.kind == ArgSource::Kind::Default) {
      stack.push_back(e.defaults[p]);
    } else {
      stack.push_back(materialize(s, formals[p], args, kwargs));
    }
  }
  e.op.callBoxed(&stack);
  switch (schema.returns().size()) {
    case 0:
      return c10::IValue();
    case 1:
      return std::move(stack[0]);
    default:
      return c10::ivalue::Tuple::create(std::move(stack));
  }
}

}  // namespace

OperatorCall::OperatorCall(std::string what, const std::string& op_name, std::optional<std::string> overload,
                           std::vector<std::string> kwarg_names)
    : what_(std::move(what)), op_name_(op_name), kwarg_names_(std::move(kwarg_names)) {
  auto& dispatcher = c10::Dispatcher::singleton();
  std::vector<std::string> overloads;
  if (overload) {
    overloads.push_back(*overload);
  } else {
    overloads = dispatcher_overloads(op_name);
    // The default overload first, then the dispatcher's order: ties go to it.
    std::stable_sort(overloads.begin(), overloads.end(),
                     [](const std::string& a, const std::string& b) { return a.empty() && !b.empty(); });
  }
  for (const auto& o : overloads) {
    auto h = dispatcher.findSchema({op_name, o});
    if (h && h->hasSchema()) candidates_.push_back(*h);
  }
  if (candidates_.empty()) {
    std::string full = op_name + (overload && !overload->empty() ? "." + *overload : "");
    throw TargetError("unknown operator '" + full + "' for " + what_ + ": the dispatcher has no schema for it");
  }
}

OperatorCall::~OperatorCall() = default;

void OperatorCall::bad_kwarg_count(size_t n) const {
  throw Error(what_ + ": called with " + std::to_string(n) + " keyword values but " +
              std::to_string(kwarg_names_.size()) + " keyword names");
}

const OperatorCall::Entry& OperatorCall::resolve(Refs args, Refs kwargs) const {
  Key key(args, kwargs);
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Entry* e = head_.load(std::memory_order_acquire); e; e = e->next)
    if (key == e->key) return *e;

  const c10::OperatorHandle* best = nullptr;
  std::optional<SchemaMatch> best_match;
  for (const auto& h : candidates_) {
    auto m = match_schema(h.schema(), args, kwarg_names_, kwargs);
    if (!m) continue;
    if (!best_match || m->penalty < best_match->penalty ||
        (m->penalty == best_match->penalty && m->defaults < best_match->defaults)) {
      best = &h;
      best_match = std::move(m);
    }
  }
  if (!best) {
    std::ostringstream msg;
    msg << what_ << ": no overload of " << op_name_ << " matches the arguments "
        << describe_call(args, kwarg_names_, kwargs) << "; candidates:";
    bool out_given = std::find(kwarg_names_.begin(), kwarg_names_.end(), "out") != kwarg_names_.end();
    for (const auto& h : candidates_)
      if (out_given || !is_out_schema(h.schema())) msg << "\n  " << h.schema();
    throw TargetError(msg.str());
  }

  auto entry = std::make_unique<Entry>(*best);
  entry->key = key.str();
  entry->match = std::move(*best_match);
  const auto& formals = best->schema().arguments();
  entry->defaults.resize(formals.size());
  entry->scalar_defaults.resize(formals.size());
  for (size_t p = 0; p < formals.size(); ++p) {
    if (!formals[p].default_value()) continue;
    entry->defaults[p] = *formals[p].default_value();
    if (entry->defaults[p].isScalar()) entry->scalar_defaults[p] = entry->defaults[p].toScalar();
  }
  const auto& op_name = best->schema().operator_name();
  const std::string full_name = op_name.name + (op_name.overload_name.empty() ? "" : "." + op_name.overload_name);

  bool plain = true;
  for (size_t p = 0; p < formals.size(); ++p) {
    const ArgSource& s = entry->match.sources[p];
    if (s.conversion != Conversion::None || s.kind == ArgSource::Kind::PackRest) plain = false;
    if (s.kind == ArgSource::Kind::Default && !entry->defaults[p].isScalar() && !entry->defaults[p].isTensor())
      plain = false;
  }
  entry->invoke = invoke_boxed;
  if (plain) {
    try {
      Entry& e = *entry;
      switch (classify(best->schema())) {
        case Fast::T:
          if (auto f = direct_unary(full_name)) {
            e.direct = reinterpret_cast<void (*)()>(f);
            e.invoke = invoke_t_direct;
          } else {
            e.typed_t = best->typed<Unary>();
            e.invoke = invoke_t_typed;
          }
          break;
        case Fast::TT:
          if (auto f = direct_binary(full_name)) {
            e.direct = reinterpret_cast<void (*)()>(f);
            e.invoke = invoke_tt_direct;
          } else {
            e.typed_tt = best->typed<Binary>();
            e.invoke = invoke_tt_typed;
          }
          break;
        case Fast::TTS:
          if (auto f = direct_binary_alpha(full_name)) {
            e.direct = reinterpret_cast<void (*)()>(f);
            e.invoke = invoke_tts_direct;
          } else {
            e.typed_tts = best->typed<BinaryAlpha>();
            e.invoke = invoke_tts_typed;
          }
          break;
        case Fast::TS:
          if (auto f = direct_scalar(full_name)) {
            e.direct = reinterpret_cast<void (*)()>(f);
            e.invoke = invoke_ts_direct;
          } else {
            e.typed_ts = best->typed<WithScalar>();
            e.invoke = invoke_ts_typed;
          }
          break;
        case Fast::TSS:
          if (auto f = direct_two_scalars(full_name)) {
            e.direct = reinterpret_cast<void (*)()>(f);
            e.invoke = invoke_tss_direct;
          } else {
            e.typed_tss = best->typed<WithTwoScalars>();
            e.invoke = invoke_tss_typed;
          }
          break;
        case Fast::None:
          break;
      }
    } catch (const std::exception&) {
      entry->invoke = invoke_boxed;  // the kernel's C++ signature differs: stay boxed
    }
  }
  // Positional values in schema order, no kwargs, trailing defaults: the plan
  // may skip gathering and matching.
  entry->num_args = static_cast<uint8_t>(std::min<size_t>(args.size(), 255));
  bool in_order = kwargs.empty() && entry->direct;
  for (size_t p = 0; in_order && p < formals.size(); ++p) {
    const ArgSource& src = entry->match.sources[p];
    if (src.kind == ArgSource::Kind::Positional) {
      in_order = src.index == p && p < args.size();
    } else {
      in_order = src.kind == ArgSource::Kind::Default && p >= args.size();
    }
  }
  if (in_order) {
    if (entry->invoke == invoke_t_direct) entry->direct_sig = Direct::T;
    if (entry->invoke == invoke_tt_direct) entry->direct_sig = Direct::TT;
    if (entry->invoke == invoke_tts_direct) entry->direct_sig = Direct::TTS;
    if (entry->invoke == invoke_ts_direct) entry->direct_sig = Direct::TS;
    if (entry->invoke == invoke_tss_direct) entry->direct_sig = Direct::TSS;
  }
  entry->next = head_.load(std::memory_order_relaxed);
  const Entry* published = entry.get();
  owned_.push_back(std::move(entry));
  head_.store(published, std::memory_order_release);
  return *published;
}

std::shared_ptr<const OperatorCall> shared_operator_call(const std::string& what, const std::string& op_name,
                                                         const std::optional<std::string>& overload,
                                                         const std::vector<std::string>& kwarg_names) {
  static std::mutex mutex;
  static std::unordered_map<std::string, std::shared_ptr<const OperatorCall>> calls;
  std::string key = what + '\n' + op_name + '\n' + (overload ? "." + *overload : std::string("*"));
  for (const auto& k : kwarg_names) key += '\n' + k;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = calls.find(key);
  if (it != calls.end()) return it->second;
  auto call = std::make_shared<const OperatorCall>(what, op_name, overload, kwarg_names);
  calls.emplace(std::move(key), call);
  return call;
}

}  // namespace fx::detail
