// make_fx's kernel on PrivateUse2 and the per-thread recording state.
#include "aot/dispatch.h"

#include "aot/tracer_tensor.h"

#include <fx/error.h>

#include <c10/core/impl/LocalDispatchKeySet.h>

#include <atomic>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

namespace fx::aot_impl {
namespace {

thread_local OpRecorder* tls_recorder = nullptr;
// The bits the active scope added to the thread's included / excluded sets
// (raw: a backend bit cannot be removed from a DispatchKeySet otherwise).
thread_local uint64_t tls_added = 0;
thread_local uint64_t tls_excluded_added = 0;

std::string full_name(const c10::OperatorName& n) {
  return n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
}

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
                           full_name(op.operator_name()) +
                           "): it escaped the traced function or was used from another thread");
  }
  PauseRecording untraced;
  op.callBoxed(stack);
}

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

void install_make_fx_kernel() {
  if (installed_generation.load() == op_generation.load()) return;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto& d = c10::Dispatcher::singleton();
  if (!r.fallback_done) {
    r.handles->push_back(d.registerFallback(c10::DispatchKey::PrivateUse2,
                                            c10::KernelFunction::makeFromBoxedFunction<&make_fx_kernel>(),
                                            "fxcpp make_fx fallback"));
    r.handles->push_back(d.addRegistrationListener(std::make_unique<NewOpListener>()));
    r.fallback_done = true;
  }
  const uint64_t generation = op_generation.load();
  if (installed_generation.load() == generation) return;
  for (const c10::OperatorName& name : d.getAllOpNames()) {
    std::string key = full_name(name);
    if (r.covered.count(key)) continue;
    auto handle = d.findOp(name);
    if (!handle) continue;
    // A direct PrivateUse2 kernel would also stop CompositeImplicitAutograd
    // from decomposing on AutogradPrivateUse2: only the explicit composites.
    if (!handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd) &&
        (handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) ||
         handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional))) {
      r.handles->push_back(d.registerImpl(name, c10::DispatchKey::PrivateUse2,
                                          c10::KernelFunction::makeFromBoxedFunction<&make_fx_kernel>(),
                                          c10::nullopt, nullptr, "fxcpp make_fx"));
    }
    r.covered.insert(std::move(key));
  }
  installed_generation.store(generation);
}

RecordingScope::RecordingScope(OpRecorder* recorder)
    : previous_(tls_recorder), previous_added_(tls_added), previous_excluded_added_(tls_excluded_added) {
  const uint64_t included = tls_included(), excluded = tls_excluded();
  const uint64_t wanted = raw(c10::DispatchKeySet(c10::DispatchKey::PrivateUse2));
  const uint64_t wanted_excluded = raw(c10::DispatchKeySet(c10::DispatchKey::BackendSelect));
  tls_added = wanted & ~included;
  tls_excluded_added = wanted_excluded & ~excluded;
  force_tls(included | wanted, excluded | wanted_excluded);
  tls_recorder = recorder;
}

RecordingScope::~RecordingScope() {
  force_tls(tls_included() & ~tls_added, tls_excluded() & ~tls_excluded_added);
  tls_added = previous_added_;
  tls_excluded_added = previous_excluded_added_;
  tls_recorder = previous_;
}

PauseRecording::PauseRecording()
    : previous_(tls_recorder),
      previous_added_(tls_added),
      previous_excluded_added_(tls_excluded_added),
      no_autograd_(c10::autograd_dispatch_keyset_with_ADInplaceOrView) {
  force_tls(tls_included() & ~tls_added, tls_excluded() & ~tls_excluded_added);
  tls_added = 0;
  tls_excluded_added = 0;
  tls_recorder = nullptr;
}

PauseRecording::~PauseRecording() {
  force_tls(tls_included() | previous_added_, tls_excluded() | previous_excluded_added_);
  tls_added = previous_added_;
  tls_excluded_added = previous_excluded_added_;
  tls_recorder = previous_;
}

}  // namespace fx::aot_impl
