#pragma once
/// \file
/// make_fx's kernel and how it is hooked into the c10 dispatcher.
///
/// One boxed kernel is registered on PrivateUse2, the backend key of tracer
/// tensors (aot/tracer_tensor.h):
///  - as PrivateUse2's backend fallback, for every operator with a backend
///    kernel (aten::mm, aten::native_batch_norm, aten::threshold_backward ...);
///  - directly on PrivateUse2 for the operators with a
///    CompositeExplicitAutograd[NonFunctional] kernel (aten::expand,
///    aten::ones_like ...), which would otherwise run their composite body on
///    the tracer and record what it calls, not the operator.
/// Operators with a CompositeImplicitAutograd kernel (aten::linear,
/// aten::batch_norm, aten::matmul ...) get nothing: they decompose above
/// autograd exactly as they do in eager mode, which is what make_fx records.
/// While a trace is active on a thread, PrivateUse2 is in that thread's
/// included keys (and BackendSelect in its excluded ones), so factories
/// (aten::zeros, aten::arange) reach the kernel as well.

#include "trace/kernel_registry.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>


namespace fx::aot_impl {

/// Receives every operator call that reaches PrivateUse2 on this thread.
class OpRecorder {
 public:
  virtual ~OpRecorder() = default;
  /// Handles `op` with its boxed arguments on `stack`, leaving the results.
  virtual void handle(const c10::OperatorHandle& op, torch::jit::Stack* stack) = 0;
};

/// Registers the kernel for every operator not yet covered (thread-safe).
void install_make_fx_kernel();

/// While alive, `recorder` receives the calls reaching PrivateUse2 on this
/// thread, and PrivateUse2 is among the thread's included dispatch keys.
class RecordingScope {
 public:
  explicit RecordingScope(OpRecorder* recorder);
  ~RecordingScope();
  RecordingScope(const RecordingScope&) = delete;
  RecordingScope& operator=(const RecordingScope&) = delete;

 private:
  OpRecorder* previous_;
  trace_impl::TlsKeyBits previous_added_;
};

/// While alive, calls on this thread run as if no trace were active, below
/// autograd (the values are the examples, which nothing differentiates).
class PauseRecording {
 public:
  PauseRecording();
  ~PauseRecording();
  PauseRecording(const PauseRecording&) = delete;
  PauseRecording& operator=(const PauseRecording&) = delete;

 private:
  OpRecorder* previous_;
  trace_impl::TlsKeyBits previous_added_;
  c10::impl::ExcludeDispatchKeyGuard no_autograd_;
};

}  // namespace fx::aot_impl
