// KernelRegistry and the thread-local dispatch-key helpers both tracers share.
#include "trace/kernel_registry.h"

#include <c10/core/impl/LocalDispatchKeySet.h>

namespace fx::trace_impl {
namespace {

// Bumped whenever an operator is registered; a registry whose installed
// generation differs scans again.
std::atomic<uint64_t> op_generation{1};

class NewOpListener final : public c10::OpRegistrationListener {
 public:
  void onOperatorRegistered(const c10::OperatorHandle&) override { op_generation.fetch_add(1); }
  void onOperatorDeregistered(const c10::OperatorHandle&) override {}
};

void listen_once() {
  static c10::RegistrationHandleRAII* listener =
      new c10::RegistrationHandleRAII(c10::Dispatcher::singleton().addRegistrationListener(std::make_unique<NewOpListener>()));
  (void)listener;
}

void force_tls(uint64_t included, uint64_t excluded) {
  c10::impl::PODLocalDispatchKeySet pod{};
  pod.set_included(c10::DispatchKeySet(c10::DispatchKeySet::RAW, included));
  pod.set_excluded(c10::DispatchKeySet(c10::DispatchKeySet::RAW, excluded));
  c10::impl::_force_tls_local_dispatch_key_set(pod);
}

uint64_t tls_included() { return c10::impl::tls_local_dispatch_key_set().included_.raw_repr(); }
uint64_t tls_excluded() { return c10::impl::tls_local_dispatch_key_set().excluded_.raw_repr(); }

}  // namespace

std::string full_operator_name(const c10::OperatorName& n) {
  return n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
}

KernelRegistry::KernelRegistry(c10::KernelFunction kernel, std::vector<c10::DispatchKey> keys,
                               c10::DispatchKey fallback_key, std::string debug,
                               std::function<bool(const c10::OperatorHandle&)> wanted)
    : kernel_(std::move(kernel)),
      keys_(std::move(keys)),
      fallback_key_(fallback_key),
      debug_(std::move(debug)),
      wanted_(std::move(wanted)) {
  listen_once();
}

void KernelRegistry::install() {
  if (installed_generation_.load() == op_generation.load()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto& d = c10::Dispatcher::singleton();
  if (!fallback_done_) {
    handles_.push_back(d.registerFallback(fallback_key_, kernel_, debug_ + " fallback"));
    fallback_done_ = true;
  }
  // Operators registered while we scan bump the generation again, so the
  // next install scans once more.
  const uint64_t generation = op_generation.load();
  if (installed_generation_.load() == generation) return;
  for (const c10::OperatorName& name : d.getAllOpNames()) {
    std::string key = full_operator_name(name);
    if (covered_.count(key)) continue;
    auto handle = d.findOp(name);
    if (handle && (!wanted_ || wanted_(*handle)))
      for (c10::DispatchKey k : keys_) handles_.push_back(d.registerImpl(name, k, kernel_, c10::nullopt, nullptr, debug_));
    covered_.insert(std::move(key));
  }
  installed_generation_.store(generation);
}

size_t KernelRegistry::covered() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return covered_.size();
}

TlsKeyBits add_tls_keys(TlsKeyBits keys) {
  const uint64_t included = tls_included(), excluded = tls_excluded();
  TlsKeyBits added{keys.included & ~included, keys.excluded & ~excluded};
  force_tls(included | keys.included, excluded | keys.excluded);
  return added;
}

void remove_tls_keys(TlsKeyBits bits) { force_tls(tls_included() & ~bits.included, tls_excluded() & ~bits.excluded); }

}  // namespace fx::trace_impl
