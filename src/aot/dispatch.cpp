// make_fx's kernel on PrivateUse2 and the per-thread recording state.
#include "aot/dispatch.h"

#include "aot/tracer_tensor.h"
#include "trace/kernel_registry.h"

#include <fx/error.h>



namespace fx::aot_impl {
namespace {

using trace_impl::TlsKeyBits;

thread_local OpRecorder* tls_recorder = nullptr;
// The bits the active scope added to the thread's key sets.
thread_local TlsKeyBits tls_added;

bool has_tracer(const c10::IValue& v) {
  if (v.isTensor()) return as_tracer(v.toTensor()) != nullptr;
  if (v.isList()) {
    for (const c10::IValue& e : v.toListRef())
      if (has_tracer(e)) return true;
  }
  return false;
}

void make_fx_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  if (OpRecorder* r = tls_recorder) {
    r->handle(op, stack);
    return;
  }
  const size_t n = op.schema().arguments().size();
  for (size_t i = stack->size() - n; i < stack->size(); ++i) {
    if (has_tracer((*stack)[i]))
      throw fx::TraceError("make_fx: a traced tensor was used outside of its trace (in " +
                           trace_impl::full_operator_name(op.operator_name()) +
                           "): it escaped the traced function or was used from another thread");
  }
  PauseRecording untraced;
  op.callBoxed(stack);
}

// A direct PrivateUse2 kernel would also stop CompositeImplicitAutograd from
// decomposing on AutogradPrivateUse2: only the explicit composites get one.
bool needs_direct_kernel(const c10::OperatorHandle& op) {
  return !op.hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd) &&
         (op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) ||
          op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional));
}

trace_impl::KernelRegistry& registry() {
  static auto* r = new trace_impl::KernelRegistry(c10::KernelFunction::makeFromBoxedFunction<&make_fx_kernel>(),
                                                  {c10::DispatchKey::PrivateUse2}, c10::DispatchKey::PrivateUse2,
                                                  "fxcpp make_fx", needs_direct_kernel);
  return *r;
}

}  // namespace

void install_make_fx_kernel() { registry().install(); }

RecordingScope::RecordingScope(OpRecorder* recorder)
    : previous_(tls_recorder), previous_added_(tls_added) {
  c10::DispatchKeySet included(c10::DispatchKey::PrivateUse2), excluded(c10::DispatchKey::BackendSelect);
  tls_added = trace_impl::add_tls_keys({included.raw_repr(), excluded.raw_repr()});
  tls_recorder = recorder;
}

RecordingScope::~RecordingScope() {
  trace_impl::remove_tls_keys(tls_added);
  tls_added = previous_added_;
  tls_recorder = previous_;
}

PauseRecording::PauseRecording()
    : previous_(tls_recorder),
      previous_added_(tls_added),
      no_autograd_(c10::autograd_dispatch_keyset_with_ADInplaceOrView) {
  trace_impl::remove_tls_keys(tls_added);
  tls_added = {};
  tls_recorder = nullptr;
}

PauseRecording::~PauseRecording() {
  trace_impl::add_tls_keys(previous_added_);
  tls_added = previous_added_;
  tls_recorder = previous_;
}

}  // namespace fx::aot_impl
