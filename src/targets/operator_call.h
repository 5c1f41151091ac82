#pragma once
// Internal: one dispatcher operator called repeatedly with run-time values.
//
// The overload is chosen from the kinds of the values on the first call (or
// given explicitly) and cached per kind signature, so a node whose argument
// kinds never change resolves once. Lookups are lock-free; resolution takes
// a mutex, so concurrent first calls are safe. Common signatures (a Tensor
// result from Tensor / Scalar arguments: add, mul, relu ...) are called
// through a typed operator handle, which costs what at::add costs; the rest
// go through callBoxed with the schema's defaults filled in.

#include "targets/schema_match.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <c10/macros/Macros.h>

#include <atomic>
#include <memory>
#include <c10/util/SmallVector.h>

#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace fx::detail {

/// Argument values of one call, read in place.
using Refs = c10::ArrayRef<const c10::IValue*>;

/// Pointers to `values` (on the stack for the usual few), for a Refs view.
inline c10::SmallVector<const c10::IValue*, 8> refs_of(const std::vector<c10::IValue>& values) {
  c10::SmallVector<const c10::IValue*, 8> out;
  out.reserve(values.size());
  for (const auto& v : values) out.push_back(&v);
  return out;
}

/// A dispatcher operator ("aten::add", optionally with a fixed overload).
class OperatorCall {
 public:
  /// `what` names the call in errors ("aten::add", "call_method view").
  /// Throws fx::TargetError if the dispatcher knows no such operator/overload.
  OperatorCall(std::string what, const std::string& op_name, std::optional<std::string> overload,
               std::vector<std::string> kwarg_names);
  ~OperatorCall();
  OperatorCall(const OperatorCall&) = delete;
  OperatorCall& operator=(const OperatorCall&) = delete;

  /// Calls the operator; the values are read, not consumed.
  C10_ALWAYS_INLINE c10::IValue call(Refs args, Refs kwargs) const {
    if (kwargs.size() != kwarg_names_.size()) bad_kwarg_count(kwargs.size());
    for (const Entry* e = head_.load(std::memory_order_acquire); e; e = e->next)
      if (e->matches(args, kwargs)) return e->invoke(*e, args, kwargs);
    const Entry& e = resolve(args, kwargs);
    return e.invoke(e, args, kwargs);
  }

  /// The keyword names every call passes.
  const std::vector<std::string>& kwarg_names() const { return kwarg_names_; }

  struct Entry;
  /// The resolved overload for values of these kinds (resolving it if new).
  const Entry& entry_for(Refs args, Refs kwargs) const {
    if (kwargs.size() != kwarg_names_.size()) bad_kwarg_count(kwargs.size());
    for (const Entry* e = head_.load(std::memory_order_acquire); e; e = e->next)
      if (e->matches(args, kwargs)) return *e;
    return resolve(args, kwargs);
  }

  /// Signatures with an ATen entry point whose arguments are exactly the
  /// positional values in schema order (trailing Scalars may be defaults):
  /// the compiled plan calls these without gathering the values first.
  enum class Direct : uint8_t { None, T, TT, TTS, TS, TSS };

  /// One resolved overload: how the values of calls with these kinds map to
  /// the schema, and the cheapest way to call it.
  struct Entry {
    explicit Entry(c10::OperatorHandle h) : op(std::move(h)) {}
    /// The kind codes (value_kind) of the args, '|', those of the kwargs.
    std::string key;
    c10::OperatorHandle op;
    SchemaMatch match;
    /// Calls the operator (a typed or the boxed path, chosen at resolution).
    c10::IValue (*invoke)(const Entry& e, Refs args, Refs kwargs) = nullptr;
    /// The typed path's entry point: ATen's generated at::_ops::<op>::call if
    /// known, else a TypedOperatorHandle's.
    void (*direct)() = nullptr;
    /// Set when the plan may call `direct` with the positional values as they are.
    Direct direct_sig = Direct::None;
    /// How many positional values the calls of this entry pass.
    uint8_t num_args = 0;
    std::optional<c10::TypedOperatorHandle<at::Tensor(const at::Tensor&)>> typed_t;
    std::optional<c10::TypedOperatorHandle<at::Tensor(const at::Tensor&, const at::Tensor&)>> typed_tt;
    std::optional<c10::TypedOperatorHandle<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Scalar&)>>
        typed_tts;
    std::optional<c10::TypedOperatorHandle<at::Tensor(const at::Tensor&, const at::Scalar&)>> typed_ts;
    std::optional<c10::TypedOperatorHandle<at::Tensor(const at::Tensor&, const at::Scalar&, const at::Scalar&)>>
        typed_tss;
    /// Per schema argument: its default value (None where it has none), and as a Scalar.
    std::vector<c10::IValue> defaults;
    std::vector<at::Scalar> scalar_defaults;
    const Entry* next = nullptr;

    /// Whether the values have the kinds this entry was resolved for.
    bool matches(Refs args, Refs kwargs) const {
      if (key.size() != args.size() + kwargs.size() + 1) return false;
      const char* k = key.data();
      for (const c10::IValue* v : args)
        if (*k++ != static_cast<char>(v->isTensor() ? 1 : value_kind(*v))) return false;
      ++k;  // '|'
      for (const c10::IValue* v : kwargs)
        if (*k++ != static_cast<char>(v->isTensor() ? 1 : value_kind(*v))) return false;
      return true;
    }
    /// The value for schema argument p.
    const c10::IValue& source(size_t p, Refs args, Refs kwargs) const {
      const ArgSource& s = match.sources[p];
      if (s.kind == ArgSource::Kind::Positional) return *args[s.index];
      if (s.kind == ArgSource::Kind::Keyword) return *kwargs[s.index];
      return defaults[p];
    }
    /// The Scalar for schema argument p: the precomputed default, or `tmp`
    /// set from the value.
    const at::Scalar& scalar(size_t p, Refs args, Refs kwargs, at::Scalar& tmp) const {
      if (match.sources[p].kind == ArgSource::Kind::Default) return scalar_defaults[p];
      tmp = source(p, args, kwargs).toScalar();
      return tmp;
    }
  };

 private:
  [[noreturn]] void bad_kwarg_count(size_t n) const;
  const Entry& resolve(Refs args, Refs kwargs) const;

  std::string what_;
  std::string op_name_;
  std::vector<c10::OperatorHandle> candidates_;
  std::vector<std::string> kwarg_names_;
  mutable std::atomic<const Entry*> head_{nullptr};
  mutable std::mutex mutex_;
  mutable std::vector<std::unique_ptr<Entry>> owned_;
};

/// An OperatorCall shared by every caller with the same arguments (all the
/// nodes calling aten::add with the same keyword names share one, so the
/// overload is resolved once per argument-kind signature, not once per node).
std::shared_ptr<const OperatorCall> shared_operator_call(const std::string& what, const std::string& op_name,
                                                         const std::optional<std::string>& overload,
                                                         const std::vector<std::string>& kwarg_names);

}  // namespace fx::detail
