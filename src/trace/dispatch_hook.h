#pragma once
/// \file
/// The tracing kernel and how it is hooked into the c10 dispatcher.
///
/// One boxed kernel is registered
///  - directly on AutogradPrivateUse1 for every operator the dispatcher knows
///    (a direct registration beats CompositeImplicitAutograd, so aten::linear,
///    aten::conv2d, aten::batch_norm ... reach it before decomposing), and for
///    operators registered later, at the start of the next trace;
///  - directly on PrivateUse1 for every operator too, for calls that reach a
///    proxy below autograd (user code running under InferenceMode): a direct
///    registration also beats CompositeExplicitAutograd[NonFunctional]
///    kernels, which the backend fallback does not (aten::add.Tensor's would
///    run TensorIterator on the storage-less proxy);
///  - as the PrivateUse1 backend fallback, for operators registered after the
///    last trace started.
/// Registration happens once per process and is harmless outside tracing:
/// only proxies carry these keys. While a trace is active on a thread,
/// AutogradPrivateUse1 is also in that thread's included dispatch keys, so
/// operators on ordinary tensors (parameters, factories) reach the kernel too;
/// the handler decides what to record and runs everything else untraced.

#include "trace/kernel_registry.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>


namespace fx::trace_impl {

/// Receives every operator call on the tracing thread while a trace is active.
class OpHandler {
 public:
  virtual ~OpHandler() = default;
  /// Handles `op` with its boxed arguments on `stack`; must leave the results
  /// there, as a boxed kernel does.
  virtual void handle(const c10::OperatorHandle& op, torch::jit::Stack* stack) = 0;
};

/// Registers the tracing kernel for every operator not yet covered.
/// Thread-safe; cheap when nothing new was registered since the last call.
void install_trace_kernel();

/// While alive, `handler` receives every operator call on this thread.
/// Restores the previous dispatch state on destruction (also when unwinding).
/// With `below_autograd`, PrivateUse1 is added to the thread's included keys
/// and BackendSelect to its excluded keys, so calls made below autograd
/// (torch::arange and the other torch:: factories call at:: under
/// AutoDispatchBelowADInplaceOrView) reach the handler as well.
class ActiveTrace {
 public:
  explicit ActiveTrace(OpHandler* handler, bool below_autograd = false);
  ~ActiveTrace();
  ActiveTrace(const ActiveTrace&) = delete;
  ActiveTrace& operator=(const ActiveTrace&) = delete;

 private:
  OpHandler* previous_;
  TlsKeyBits previous_added_;
};

/// While alive, operator calls on this thread bypass the tracing kernel.
class SuspendTracing {
 public:
  SuspendTracing();
  ~SuspendTracing();
  SuspendTracing(const SuspendTracing&) = delete;
  SuspendTracing& operator=(const SuspendTracing&) = delete;

 private:
  OpHandler* previous_;
  TlsKeyBits previous_added_;
};

/// The handler active on this thread, or nullptr.
OpHandler* current_handler();

/// How many operators carry the tracing kernel (for diagnostics and tests).
size_t traced_operator_count();

}  // namespace fx::trace_impl
