// ProxyTensorImpl: storage-less tensor that routes every operator to the
// tracing kernel and carries a real example value.
#include "trace/proxy_tensor.h"

#include <c10/core/InferenceMode.h>

namespace fx::trace_impl {

c10::DispatchKeySet proxy_key_set() {
  static const c10::DispatchKeySet ks =
      c10::DispatchKeySet(c10::DispatchKey::PrivateUse1) | c10::DispatchKeySet(c10::DispatchKey::AutogradPrivateUse1);
  return ks;
}

ProxyTensorImpl::ProxyTensorImpl(at::Tensor example, uint64_t session, ValueRef ref,
                                 c10::optional<c10::Device> device)
    : c10::TensorImpl(proxy_key_set(), example.dtype(), device.value_or(example.device())),
      example_(std::move(example)),
      session_(session),
      ref_(std::move(ref)) {
  // Storage is never touched: data_ptr() on a proxy fails loudly instead of
  // silently reading the example value.
  set_storage_access_should_throw();
  refresh_metadata();
}

void ProxyTensorImpl::refresh_metadata() {
  set_sizes_and_strides(example_.sizes(), example_.strides(), example_.storage_offset());
}

void ProxyTensorImpl::set_example(at::Tensor example) {
  example_ = std::move(example);
  refresh_metadata();
}

c10::intrusive_ptr<c10::TensorImpl> ProxyTensorImpl::shallow_copy_and_detach(
    const c10::VariableVersion& version_counter, bool allow_tensor_metadata_change) const {
  auto impl = c10::make_intrusive<ProxyTensorImpl>(example_, session_, ref_, device());
  impl->traced_requires_grad_ = traced_requires_grad_;
  impl->set_version_counter(version_counter);
  impl->set_allow_tensor_metadata_change(allow_tensor_metadata_change);
  return impl;
}

c10::intrusive_ptr<c10::TensorImpl> ProxyTensorImpl::shallow_copy_and_detach(
    c10::VariableVersion&& version_counter, bool allow_tensor_metadata_change) const {
  auto impl = c10::make_intrusive<ProxyTensorImpl>(example_, session_, ref_, device());
  impl->traced_requires_grad_ = traced_requires_grad_;
  impl->set_version_counter(std::move(version_counter));
  impl->set_allow_tensor_metadata_change(allow_tensor_metadata_change);
  return impl;
}

void ProxyTensorImpl::shallow_copy_from(const c10::intrusive_ptr<c10::TensorImpl>& impl) {
  auto* other = dynamic_cast<ProxyTensorImpl*>(impl.get());
  TORCH_CHECK(other != nullptr, "fxcpp: cannot shallow-copy an ordinary tensor into a proxy tensor (Tensor::set_data on a traced value is not supported)");
  example_ = other->example_;
  session_ = other->session_;
  ref_ = other->ref_;
  traced_requires_grad_ = other->traced_requires_grad_;
  refresh_metadata();
}

void ProxyTensorImpl::release_resources() {
  example_.reset();
  c10::TensorImpl::release_resources();
}

ProxyTensorImpl* as_proxy(const at::TensorBase& t) {
  if (!t.defined()) return nullptr;
  c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (!impl->key_set().has(c10::DispatchKey::PrivateUse1)) return nullptr;
  return dynamic_cast<ProxyTensorImpl*>(impl);
}

at::Tensor make_proxy(at::Tensor example, uint64_t session, ValueRef ref, c10::optional<c10::Device> device) {
  // Inference mode would strip the autograd key from a new TensorImpl, and
  // the proxy needs it to reach the tracing kernel first.
  if (c10::InferenceMode::is_enabled()) {
    c10::InferenceMode autograd_keys_on(false);
    return at::Tensor(c10::make_intrusive<ProxyTensorImpl>(std::move(example), session, std::move(ref), device));
  }
  return at::Tensor(c10::make_intrusive<ProxyTensorImpl>(std::move(example), session, std::move(ref), device));
}

}  // namespace fx::trace_impl
