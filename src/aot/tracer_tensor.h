#pragma once
/// \file
/// TracerTensorImpl: the tensor make_fx hands to the traced function.
///
/// A tracer tensor looks like an ordinary strided CPU tensor of its example
/// value's metadata but has no storage and carries the dispatch key
/// PrivateUse2 (and, as every tensor of a backend, AutogradPrivateUse2 and
/// ADInplaceOrView). Unlike symbolic_trace's proxies (PrivateUse1, hooked
/// above autograd), nothing of fxcpp sits on the autograd key: autograd's own
/// kernels run on tracer tensors, composite operators decompose as they do
/// for any tensor, and only what reaches the backend, the ATen operators
/// autograd and the decompositions call (forward and backward alike), comes
/// to make_fx's kernel (aot/dispatch.h), as Python make_fx's ProxyTensor does
/// with the Python key.

#include <ATen/core/Tensor.h>
#include <c10/core/TensorImpl.h>

#include <cstdint>

namespace fx {
class Node;
}

namespace fx::aot_impl {

/// The TensorImpl of a make_fx tracer tensor.
class TracerTensorImpl final : public c10::TensorImpl {
 public:
  /// A tracer tensor of trace `session` standing for the value of `node`,
  /// with metadata taken from `example` (a defined, strided tensor).
  TracerTensorImpl(at::Tensor example, uint64_t session, Node* node);

  /// The real value the traced program computes here.
  const at::Tensor& example() const { return example_; }
  /// Copies sizes, strides and offset from the example again (after resize_).
  void refresh_metadata();
  /// The trace this tensor belongs to.
  uint64_t session() const { return session_; }
  /// The graph value this tensor stands for now.
  Node* node() const { return node_; }
  /// Points the tensor at another graph value (after a functionalised write).
  void set_node(Node* node) { node_ = node; }

  const char* tensorimpl_type_name() const override { return "fx::TracerTensorImpl"; }
  c10::intrusive_ptr<c10::TensorImpl> shallow_copy_and_detach(const c10::VariableVersion& version_counter,
                                                              bool allow_tensor_metadata_change) const override;
  c10::intrusive_ptr<c10::TensorImpl> shallow_copy_and_detach(c10::VariableVersion&& version_counter,
                                                              bool allow_tensor_metadata_change) const override;
  void shallow_copy_from(const c10::intrusive_ptr<c10::TensorImpl>& impl) override;
  void release_resources() override;

 private:
  at::Tensor example_;
  uint64_t session_;
  Node* node_;
};

/// The tracer behind `t`, or nullptr if `t` is undefined or not a tracer.
TracerTensorImpl* as_tracer(const at::TensorBase& t);

/// A new tracer tensor for `node` computing with `example`.
at::Tensor make_tracer(at::Tensor example, uint64_t session, Node* node);

}  // namespace fx::aot_impl
