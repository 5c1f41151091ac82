// BackwardStepper: an optimizer's updates inside one compiled backward.
#include "aot/optimizer_in_backward.h"

#include <fx/error.h>

#include <ATen/core/grad_mode.h>

#include <unordered_set>

namespace fx::aot_impl {

namespace {

size_t storage_uses(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage()) return 0;
  return static_cast<size_t>(t.storage().use_count());
}

}  // namespace

BackwardStepper::BackwardStepper(OptimizerInBackward& optimizer, const std::vector<at::Tensor>& leaves,
                                 const std::vector<bool>& stepping, const std::vector<c10::IValue>& graph_inputs)
    : optimizer_(optimizer), leaves_(leaves), stepping_(stepping), outside_uses_(stepping.size(), 0),
      done_(stepping.size(), false) {
  for (size_t k = 0; k < stepping_.size(); ++k) {
    if (!stepping_[k]) continue;
    const at::Tensor& leaf = leaves_.at(k);
    if (!leaf.has_storage()) {  // nothing to count: update at the end
      outside_uses_[k] = 0;
      continue;
    }
    // Each distinct tensor among the graph's inputs that shares the leaf's
    // storage holds one use of it (the leaf's own TensorImpl holds one too,
    // counted outside: it stays).
    std::unordered_set<const c10::TensorImpl*> graph_holders;
    for (const c10::IValue& v : graph_inputs) {
      if (!v.isTensor()) continue;
      const at::Tensor& t = v.toTensor();
      if (t.defined() && t.has_storage() && t.unsafeGetTensorImpl() != leaf.unsafeGetTensorImpl() &&
          t.storage().is_alias_of(leaf.storage()))
        graph_holders.insert(t.unsafeGetTensorImpl());
    }
    outside_uses_[k] = storage_uses(leaf) - graph_holders.size();
  }
}

bool BackwardStepper::shared_with_graph(size_t index) const {
  const at::Tensor& leaf = leaves_[index];
  return !leaf.has_storage() || storage_uses(leaf) > outside_uses_[index];
}

void BackwardStepper::update(size_t index, const at::Tensor& grad) {
  at::NoGradGuard no_grad;
  optimizer_.update(leaves_[index], grad);
  done_[index] = true;
}

void BackwardStepper::on_gradient(size_t index, const at::Tensor& grad) {
  if (index >= stepping_.size() || !stepping_[index] || done_[index] || !grad.defined()) return;
  if (shared_with_graph(index)) {
    // A copy: the gradient is the graph's temporary now (the hooks take it
    // over), and the memory plan may give its memory to a later node.
    waiting_.emplace_back(index, grad.clone());
  } else {
    update(index, grad);
    ++stats_.updates_at_gradient;
  }
  // The values that kept earlier gradients waiting may be gone now.
  for (size_t i = 0; i < waiting_.size();) {
    if (waiting_[i].first != index && !shared_with_graph(waiting_[i].first)) {
      update(waiting_[i].first, waiting_[i].second);
      ++stats_.updates_after_reads;
      waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

void BackwardStepper::finish(std::vector<c10::IValue>& outputs) {
  for (auto& [index, grad] : waiting_) {
    update(index, grad);
    ++stats_.updates_at_end;
  }
  waiting_.clear();
  for (size_t k = 0; k < stepping_.size() && k < outputs.size(); ++k) {
    if (!stepping_[k]) continue;
    if (!done_[k] && outputs[k].isTensor() && outputs[k].toTensor().defined()) {
      update(k, outputs[k].toTensor());
      ++stats_.updates_at_end;
    }
    outputs[k] = c10::IValue();  // stepped: nothing for autograd to store
  }
  ++stats_.steps;
}

}  // namespace fx::aot_impl
