// The tracing kernel: registration on AutogradPrivateUse1 for every operator,
// the PrivateUse1 fallback, and the per-thread tracing state.
#include "trace/dispatch_hook.h"

#include "trace/kernel_registry.h"
#include "trace/proxy_tensor.h"

#include <fx/error.h>

#include <ATen/core/dispatch/Dispatcher.h>

#include <string>
#include <vector>

namespace fx::trace_impl {
namespace {

thread_local OpHandler* tls_handler = nullptr;

bool ivalue_has_proxy(const c10::IValue& v) {
  if (v.isTensor()) return as_proxy(v.toTensor()) != nullptr;
  if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) {
      if (ivalue_has_proxy(e)) return true;
    }
    return false;
  }
  if (v.isTuple()) {
    for (const c10::IValue& e : v.toTupleRef().elements()) {
      if (ivalue_has_proxy(e)) return true;
    }
  }
  return false;
}

// The one boxed kernel behind every traced operator.
void trace_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  if (OpHandler* h = tls_handler) {
    h->handle(op, stack);
    return;
  }
  const size_t n = op.schema().arguments().size();
  for (size_t i = stack->size() - n; i < stack->size(); ++i) {
    if (ivalue_has_proxy((*stack)[i])) {
      throw fx::TraceError("proxy tensor used outside of symbolic_trace (in " + full_operator_name(op.operator_name()) +
                           "): a traced value escaped the traced function or was used from another thread");
    }
  }
  // No proxy: an ordinary call that reached the kernel through a stale
  // dispatch state; run it normally.
  SuspendTracing untraced;
  op.callBoxed(stack);
}

KernelRegistry& registry() {
  // Direct registrations beat CompositeImplicitAutograd (on the autograd
  // key) and CompositeExplicitAutograd[NonFunctional] (on the backend key),
  // which would otherwise run before the fallback and touch proxy storage.
  static KernelRegistry* r = new KernelRegistry(c10::KernelFunction::makeFromBoxedFunction<&trace_kernel>(),
                                                {c10::DispatchKey::AutogradPrivateUse1, c10::DispatchKey::PrivateUse1},
                                                c10::DispatchKey::PrivateUse1, "fxcpp symbolic_trace");
  return *r;
}

// (DispatchKeySet::raw_repr is not const in libtorch 1.13: the sets are locals.)
TlsKeyBits trace_tls_keys(bool below_autograd) {
  c10::DispatchKeySet autograd(c10::DispatchKey::AutogradPrivateUse1);
  if (!below_autograd) return {autograd.raw_repr(), 0};
  c10::DispatchKeySet both = autograd | c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
  c10::DispatchKeySet backend_select(c10::DispatchKey::BackendSelect);
  return {both.raw_repr(), backend_select.raw_repr()};
}

}  // namespace

void install_trace_kernel() { registry().install(); }

size_t traced_operator_count() { return registry().covered(); }

OpHandler* current_handler() { return tls_handler; }

// `tls_added` holds the bits the active trace added to the thread's key sets
// (BackendSelect among the excluded: its factory kernels redispatch without
// the thread's included keys); SuspendTracing takes them away again.
namespace {
thread_local TlsKeyBits tls_added;
}  // namespace

ActiveTrace::ActiveTrace(OpHandler* handler, bool below_autograd)
    : previous_(tls_handler), previous_added_(tls_added) {
  tls_added = add_tls_keys(trace_tls_keys(below_autograd));
  tls_handler = handler;
}

ActiveTrace::~ActiveTrace() {
  remove_tls_keys(tls_added);
  tls_added = previous_added_;
  tls_handler = previous_;
}

SuspendTracing::SuspendTracing()
    : previous_(tls_handler), previous_added_(tls_added) {
  remove_tls_keys(tls_added);
  tls_added = {};
  tls_handler = nullptr;
}

SuspendTracing::~SuspendTracing() {
  add_tls_keys(previous_added_);
  tls_added = previous_added_;
  tls_handler = previous_;
}

}  // namespace fx::trace_impl
