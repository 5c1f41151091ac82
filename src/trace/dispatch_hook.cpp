// The tracing kernel: registration on AutogradPrivateUse1 for every operator,
// the PrivateUse1 fallback, and the per-thread tracing state.
#include "trace/dispatch_hook.h"

#include "trace/proxy_tensor.h"

#include <fx/error.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <atomic>
#include <mutex>
#include <string>
#include <unordered_set>
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

std::string full_name(const c10::OperatorName& n) {
  return n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
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
      throw fx::TraceError("proxy tensor used outside of symbolic_trace (in " + full_name(op.operator_name()) +
                           "): a traced value escaped the traced function or was used from another thread");
    }
  }
  // No proxy: an ordinary call that reached the kernel through a stale
  // dispatch state; run it normally.
  SuspendTracing untraced;
  op.callBoxed(stack);
}

// Bumped whenever operators are registered; `installed` is the generation the
// kernels were last installed for. A thread that sees them differ waits on the
// registry's lock until the installing thread is done: tracing must never
// start while only part of the operators have the kernel.
std::atomic<uint64_t> op_generation{1};
std::atomic<uint64_t> installed_generation{0};

class NewOpListener final : public c10::OpRegistrationListener {
 public:
  void onOperatorRegistered(const c10::OperatorHandle&) override { op_generation.fetch_add(1); }
  void onOperatorDeregistered(const c10::OperatorHandle&) override {}
};

struct Registry {
  std::mutex mutex;
  std::unordered_set<std::string> covered;
  // Leaked on purpose: the registrations must outlive static destruction.
  std::vector<c10::RegistrationHandleRAII>* handles = new std::vector<c10::RegistrationHandleRAII>();
  bool fallback_done = false;
};

Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

c10::DispatchKeySet trace_tls_keys(bool below_autograd) {
  static const c10::DispatchKeySet autograd(c10::DispatchKey::AutogradPrivateUse1);
  static const c10::DispatchKeySet both = autograd | c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
  return below_autograd ? both : autograd;
}

}  // namespace

void install_trace_kernel() {
  if (installed_generation.load() == op_generation.load()) return;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto& d = c10::Dispatcher::singleton();
  if (!r.fallback_done) {
    r.handles->push_back(d.registerFallback(c10::DispatchKey::PrivateUse1,
                                            c10::KernelFunction::makeFromBoxedFunction<&trace_kernel>(),
                                            "fxcpp symbolic_trace fallback"));
    r.handles->push_back(d.addRegistrationListener(std::make_unique<NewOpListener>()));
    r.fallback_done = true;
  }
  // Operators registered while we scan bump the generation again, so the
  // next trace scans once more.
  const uint64_t generation = op_generation.load();
  if (installed_generation.load() == generation) return;
  for (const c10::OperatorName& name : d.getAllOpNames()) {
    std::string key = full_name(name);
    if (r.covered.count(key)) continue;
    // Direct registrations beat CompositeImplicitAutograd (on the autograd
    // key) and CompositeExplicitAutograd[NonFunctional] (on the backend key),
    // which would otherwise run before the fallback and touch proxy storage.
    for (c10::DispatchKey k : {c10::DispatchKey::AutogradPrivateUse1, c10::DispatchKey::PrivateUse1}) {
      r.handles->push_back(d.registerImpl(name, k, c10::KernelFunction::makeFromBoxedFunction<&trace_kernel>(),
                                          c10::nullopt, nullptr, "fxcpp symbolic_trace"));
    }
    r.covered.insert(std::move(key));
  }
  installed_generation.store(generation);
}

size_t traced_operator_count() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.covered.size();
}

OpHandler* current_handler() { return tls_handler; }

// Dispatch key sets cannot remove a backend bit with operator- or remove()
// (they only drop functionality bits), so the guards below save and restore
// the raw thread-local sets. `tls_added` holds the bits the active trace added
// to the included set, `tls_excluded_added` those it added to the excluded
// set (BackendSelect, whose factory kernels redispatch without the thread's
// included keys); SuspendTracing takes both away again.
namespace {
thread_local uint64_t tls_added = 0;
thread_local uint64_t tls_excluded_added = 0;

uint64_t raw(c10::DispatchKeySet ks) { return ks.raw_repr(); }

void force_tls(uint64_t included, uint64_t excluded) {
  c10::impl::PODLocalDispatchKeySet pod{};
  pod.set_included(c10::DispatchKeySet(c10::DispatchKeySet::RAW, included));
  pod.set_excluded(c10::DispatchKeySet(c10::DispatchKeySet::RAW, excluded));
  c10::impl::_force_tls_local_dispatch_key_set(pod);
}

uint64_t tls_included() { return raw(c10::impl::tls_local_dispatch_key_set().included_); }
uint64_t tls_excluded() { return raw(c10::impl::tls_local_dispatch_key_set().excluded_); }
}  // namespace

ActiveTrace::ActiveTrace(OpHandler* handler, bool below_autograd)
    : previous_(tls_handler), previous_added_(tls_added), previous_excluded_added_(tls_excluded_added) {
  const uint64_t included = tls_included(), excluded = tls_excluded();
  const uint64_t wanted = raw(trace_tls_keys(below_autograd));
  const uint64_t wanted_excluded =
      below_autograd ? raw(c10::DispatchKeySet(c10::DispatchKey::BackendSelect)) : uint64_t{0};
  tls_added = wanted & ~included;
  tls_excluded_added = wanted_excluded & ~excluded;
  force_tls(included | wanted, excluded | wanted_excluded);
  tls_handler = handler;
}

ActiveTrace::~ActiveTrace() {
  force_tls(tls_included() & ~tls_added, tls_excluded() & ~tls_excluded_added);
  tls_added = previous_added_;
  tls_excluded_added = previous_excluded_added_;
  tls_handler = previous_;
}

SuspendTracing::SuspendTracing()
    : previous_(tls_handler), previous_added_(tls_added), previous_excluded_added_(tls_excluded_added) {
  force_tls(tls_included() & ~tls_added, tls_excluded() & ~tls_excluded_added);
  tls_added = 0;
  tls_excluded_added = 0;
  tls_handler = nullptr;
}

SuspendTracing::~SuspendTracing() {
  force_tls(tls_included() | previous_added_, tls_excluded() | previous_excluded_added_);
  tls_added = previous_added_;
  tls_excluded_added = previous_excluded_added_;
  tls_handler = previous_;
}

}  // namespace fx::trace_impl
