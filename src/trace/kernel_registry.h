#pragma once
/// \file
/// What both tracers (symbolic_trace's proxies on PrivateUse1, make_fx's
/// tracer tensors on PrivateUse2) need from the c10 dispatcher: one boxed
/// kernel registered for every operator, kept up to date as libraries
/// register more, and dispatch keys added to and removed from this thread's
/// local key sets.

#include <ATen/core/dispatch/Dispatcher.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

namespace fx::trace_impl {

/// Registers one kernel for every operator of the dispatcher.
class KernelRegistry {
 public:
  /// `kernel` goes on each of `keys` for the operators `wanted` accepts (all
  /// when null), and as `fallback_key`'s backend fallback.
  KernelRegistry(c10::KernelFunction kernel, std::vector<c10::DispatchKey> keys, c10::DispatchKey fallback_key,
                 std::string debug, std::function<bool(const c10::OperatorHandle&)> wanted = nullptr);
  /// Registers the kernel for the operators not covered yet. Thread-safe and
  /// cheap when no operator was registered since the last call; a thread
  /// that sees an install in progress waits for it (tracing must never
  /// start with only part of the operators covered).
  void install();
  /// How many operators were looked at (for diagnostics and tests).
  size_t covered() const;

 private:
  c10::KernelFunction kernel_;
  std::vector<c10::DispatchKey> keys_;
  c10::DispatchKey fallback_key_;
  std::string debug_;
  std::function<bool(const c10::OperatorHandle&)> wanted_;
  mutable std::mutex mutex_;
  std::unordered_set<std::string> covered_;
  // Leaked on purpose by the owners (function-local `new`): the
  // registrations must outlive static destruction.
  std::vector<c10::RegistrationHandleRAII> handles_;
  bool fallback_done_ = false;
  std::atomic<uint64_t> installed_generation_{0};
};

/// Dispatch-key bits (DispatchKeySet::raw_repr) added to this thread's
/// included and excluded sets.
struct TlsKeyBits {
  uint64_t included = 0;
  uint64_t excluded = 0;
};

/// Adds `keys` to this thread's local key sets; returns the bits that were
/// not there before (what remove_tls_keys must take away again).
TlsKeyBits add_tls_keys(TlsKeyBits keys);
/// Removes `bits` from this thread's local key sets. Raw bits: a backend
/// bit cannot be removed from a DispatchKeySet with operator- or remove().
void remove_tls_keys(TlsKeyBits bits);

/// "aten::add.Tensor", or "aten::relu" for the default overload.
std::string full_operator_name(const c10::OperatorName& name);

}  // namespace fx::trace_impl
