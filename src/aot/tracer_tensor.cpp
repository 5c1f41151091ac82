// TracerTensorImpl: storage-less tensor whose operators reach make_fx's
// kernel below autograd.
#include "aot/tracer_tensor.h"

#include <c10/core/InferenceMode.h>

namespace fx::aot_impl {

TracerTensorImpl::TracerTensorImpl(at::Tensor example, uint64_t session, Node* node)
    : c10::TensorImpl(c10::DispatchKeySet(c10::DispatchKey::PrivateUse2), example.dtype(), example.device()),
      example_(std::move(example)),
      session_(session),
      node_(node) {
  // data_ptr() on a tracer fails loudly instead of reading a stale example.
  set_storage_access_should_throw();
  refresh_metadata();
}

void TracerTensorImpl::refresh_metadata() {
  set_sizes_and_strides(example_.sizes(), example_.strides(), example_.storage_offset());
}

c10::intrusive_ptr<c10::TensorImpl> TracerTensorImpl::shallow_copy_and_detach(
    const c10::VariableVersion& version_counter, bool allow_tensor_metadata_change) const {
  auto impl = c10::make_intrusive<TracerTensorImpl>(example_, session_, node_);
  impl->set_version_counter(version_counter);
  impl->set_allow_tensor_metadata_change(allow_tensor_metadata_change);
  return impl;
}

c10::intrusive_ptr<c10::TensorImpl> TracerTensorImpl::shallow_copy_and_detach(
    c10::VariableVersion&& version_counter, bool allow_tensor_metadata_change) const {
  auto impl = c10::make_intrusive<TracerTensorImpl>(example_, session_, node_);
  impl->set_version_counter(std::move(version_counter));
  impl->set_allow_tensor_metadata_change(allow_tensor_metadata_change);
  return impl;
}

void TracerTensorImpl::shallow_copy_from(const c10::intrusive_ptr<c10::TensorImpl>& impl) {
  auto* other = dynamic_cast<TracerTensorImpl*>(impl.get());
  TORCH_CHECK(other != nullptr, "fxcpp make_fx: Tensor::set_data of an ordinary tensor into a traced value is not supported");
  example_ = other->example_;
  session_ = other->session_;
  node_ = other->node_;
  refresh_metadata();
}

void TracerTensorImpl::release_resources() {
  example_.reset();
  c10::TensorImpl::release_resources();
}

TracerTensorImpl* as_tracer(const at::TensorBase& t) {
  if (!t.defined()) return nullptr;
  c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (!impl->key_set().has_backend(c10::BackendComponent::PrivateUse2Bit)) return nullptr;
  return dynamic_cast<TracerTensorImpl*>(impl);
}

at::Tensor make_tracer(at::Tensor example, uint64_t session, Node* node) {
  // Inference mode would strip the autograd keys, and autograd must see tracers.
  c10::InferenceMode autograd_keys_on(false);
  return at::Tensor(c10::make_intrusive<TracerTensorImpl>(std::move(example), session, node));
}

}  // namespace fx::aot_impl
