// Layers built only to receive saved tensors, without drawing their random
// initial weights (the idea of torch.nn.utils.skip_init): fx::load and
// fx::from_document build each registered torch::nn layer from its options
// (its constructor fills the weights with kaiming_uniform_ / uniform_ /
// normal_) and then replace every parameter and buffer with the saved one,
// so the random numbers — about 4.5 ns a weight on one core, 100 ms for
// resnet50's 25 M — were drawn for nothing.
//
// While a SkipInitGuard lives, PrivateUse3 is in the thread's included
// dispatch keys: aten::uniform_ and aten::normal_ leave the tensor as
// torch::empty made it, and every other operator reaches PrivateUse3's
// fallback, which calls it again with the thread's dispatch keys as they
// were outside the guard (a fallthrough cannot be used: PrivateUse3 shares
// the Dense functionality with CPU, and masking it would hide the CPU
// kernels). Nothing else ever has PrivateUse3, so no other call is affected.
#include "serialize/document.h"

#include <torch/library.h>

namespace fx::serialize_detail {

namespace {

/// The dispatch keys the thread's SkipInitGuards added to its included set.
thread_local c10::DispatchKeySet added_by_guards;

/// `a` without the bits of `b`, backend bits too (DispatchKeySet's operator- keeps those).
c10::DispatchKeySet without(c10::DispatchKeySet a, c10::DispatchKeySet b) {
  return c10::DispatchKeySet(c10::DispatchKeySet::RAW, a.raw_repr() & ~b.raw_repr());
}

/// The thread's dispatch keys with `included` as its included set.
c10::impl::LocalDispatchKeySet with_included(const c10::impl::LocalDispatchKeySet& keys, c10::DispatchKeySet included) {
  c10::impl::PODLocalDispatchKeySet pod;
  pod.set_included(included);
  pod.set_excluded(keys.excluded_);
  return c10::impl::LocalDispatchKeySet(pod);
}

/// Any operator but the two below: called again without the guards' key
/// (what the kernels on the way excluded stays excluded).
void call_outside_guard(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::impl::LocalDispatchKeySet inside = c10::impl::tls_local_dispatch_key_set();
  struct Restore {
    c10::impl::LocalDispatchKeySet keys;
    ~Restore() { c10::impl::_force_tls_local_dispatch_key_set(keys); }
  } restore{inside};
  c10::impl::_force_tls_local_dispatch_key_set(with_included(inside, without(inside.included_, added_by_guards)));
  op.callBoxed(stack);
}

at::Tensor& keep_uniform(at::Tensor& self, double, double, c10::optional<at::Generator>) { return self; }
at::Tensor& keep_normal(at::Tensor& self, double, double, c10::optional<at::Generator>) { return self; }

}  // namespace

TORCH_LIBRARY_IMPL(_, PrivateUse3, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&call_outside_guard>()); }

TORCH_LIBRARY_IMPL(aten, PrivateUse3, m) {
  m.impl("uniform_", keep_uniform);
  m.impl("normal_", keep_normal);
}

SkipInitGuard::SkipInitGuard() : added_before_(added_by_guards) {
  const c10::impl::LocalDispatchKeySet keys = c10::impl::tls_local_dispatch_key_set();
  const c10::DispatchKeySet key(c10::DispatchKey::PrivateUse3);
  added_by_guards = added_by_guards | without(key, keys.included_);
  c10::impl::_force_tls_local_dispatch_key_set(with_included(keys, keys.included_ | key));
}

SkipInitGuard::~SkipInitGuard() {
  const c10::impl::LocalDispatchKeySet keys = c10::impl::tls_local_dispatch_key_set();
  c10::impl::_force_tls_local_dispatch_key_set(with_included(keys, without(keys.included_, without(added_by_guards, added_before_))));
  added_by_guards = added_before_;
}

}  // namespace fx::serialize_detail
