#pragma once
/// \file
/// ProxyTensorImpl: the tensor that symbolic tracing hands to user code.
///
/// A proxy looks like an ordinary strided tensor of its example value's
/// shape, stride, dtype and device (so `x.size(0)`, `x.dim()`, `x.options()`
/// work), but it has no storage and carries the dispatch keys PrivateUse1 and
/// AutogradPrivateUse1, which fxcpp owns. Every operator called on a proxy
/// therefore reaches fxcpp's tracing kernel (dispatch_hook.h) before any
/// composite decomposition. The kernel finds the graph value the proxy stands
/// for through `ref()` and computes results on `example()`.

#include <ATen/core/Tensor.h>
#include <c10/core/TensorImpl.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace fx {
class Node;
}

namespace fx::trace_impl {

/// Which graph value a proxy stands for: the value of `node`, or, when `path`
/// is not empty, `node[path[0]][path[1]]...` (getitem nodes are created on
/// first use, so unused tuple elements leave no trace in the graph).
struct ValueRef {
  Node* node = nullptr;
  std::vector<int64_t> path;
};

/// The TensorImpl of a proxy tensor.
class ProxyTensorImpl final : public c10::TensorImpl {
 public:
  /// A proxy for `ref` in trace `session`, with metadata taken from
  /// `example` (which must be a defined, strided tensor). The proxy reports
  /// `device` (default: the example's), so that a meta example can stand for
  /// a CPU value.
  ProxyTensorImpl(at::Tensor example, uint64_t session, ValueRef ref,
                  c10::optional<c10::Device> device = c10::nullopt);

  /// The real value the traced program would have computed here.
  const at::Tensor& example() const { return example_; }
  /// Replaces the example value (after an in-place op changed its metadata
  /// or a copy-on-write made a private copy) and refreshes sizes and strides.
  void set_example(at::Tensor example);
  /// Copies sizes, strides and offset from the example value again.
  void refresh_metadata();
  /// The trace this proxy belongs to.
  uint64_t session() const { return session_; }
  /// The graph value this proxy stands for.
  const ValueRef& ref() const { return ref_; }
  /// Points the proxy at another graph value (after an in-place op).
  void set_ref(ValueRef ref) { ref_ = std::move(ref); }
  /// Whether autograd would track the traced value (for tensor_meta; the
  /// proxy itself never requires grad).
  bool traced_requires_grad() const { return traced_requires_grad_; }
  void set_traced_requires_grad(bool v) { traced_requires_grad_ = v; }

  const char* tensorimpl_type_name() const override { return "fx::ProxyTensorImpl"; }
  c10::intrusive_ptr<c10::TensorImpl> shallow_copy_and_detach(const c10::VariableVersion& version_counter,
                                                              bool allow_tensor_metadata_change) const override;
  c10::intrusive_ptr<c10::TensorImpl> shallow_copy_and_detach(c10::VariableVersion&& version_counter,
                                                              bool allow_tensor_metadata_change) const override;
  void shallow_copy_from(const c10::intrusive_ptr<c10::TensorImpl>& impl) override;
  void release_resources() override;

 private:
  at::Tensor example_;
  uint64_t session_;
  ValueRef ref_;
  bool traced_requires_grad_ = false;
};

/// The dispatch keys every proxy carries (PrivateUse1 and its autograd key).
c10::DispatchKeySet proxy_key_set();

/// The proxy behind `t`, or nullptr if `t` is undefined or not a proxy.
ProxyTensorImpl* as_proxy(const at::TensorBase& t);

/// A new proxy tensor wrapping `example`, reporting `device` (default: the
/// example's).
at::Tensor make_proxy(at::Tensor example, uint64_t session, ValueRef ref,
                      c10::optional<c10::Device> device = c10::nullopt);

}  // namespace fx::trace_impl
