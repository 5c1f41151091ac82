// fx::FusedSGD: libtorch SGD's update in one pass per parameter.
//
// torch::optim::SGD::step (libtorch 1.13) per parameter p with gradient g:
//     d = g + wd * p                      (weight_decay != 0)
//     b = clone(d)                        (momentum != 0, first step)
//     b = b * m + (1 - dampening) * d     (momentum != 0, later steps)
//     d = nesterov ? d + m * b : b        (momentum != 0)
//     p = p + (-lr) * d
// Each line is an ATen operation, a pass over memory; sgd_element below is
// the same arithmetic for one element (or one vector of them), so a
// parameter is read and written once.
#include <fx/fused_sgd.h>

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/vec.h>
#include <c10/util/string_utils.h>
#include <torch/utils.h>

#include <string>

namespace fx {
namespace {

/// One group's coefficients, as the element type.
template <typename X>
struct Coefficients {
  X weight_decay, momentum, dampening_complement, neg_lr;
};

/// What the update does, constant over a parameter.
struct Mode {
  bool weight_decay, momentum, first, nesterov;
};

/// SGD::step's arithmetic on one element or one vector (X: T or Vectorized<T>):
/// returns the new parameter and updates the momentum buffer `b`.
template <typename X>
X sgd_element(const X& p, const X& g, X& b, const Coefficients<X>& c, Mode mode) {
  X d = mode.weight_decay ? g + p * c.weight_decay : g;
  if (mode.momentum) {
    b = mode.first ? d : b * c.momentum + d * c.dampening_complement;
    d = mode.nesterov ? d + b * c.momentum : b;
  }
  return p + d * c.neg_lr;
}

template <typename T>
void fused_update(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& buf,
                  const torch::optim::SGDOptions& o, Mode mode) {
  using V = at::vec::Vectorized<T>;
  T* p = param.data_ptr<T>();
  const T* g = grad.data_ptr<T>();
  T* b = mode.momentum ? buf.data_ptr<T>() : nullptr;
  const Coefficients<T> s{static_cast<T>(o.weight_decay()), static_cast<T>(o.momentum()),
                          static_cast<T>(1 - o.dampening()), static_cast<T>(-1 * o.lr())};
  const Coefficients<V> v{V(s.weight_decay), V(s.momentum), V(s.dampening_complement), V(s.neg_lr)};
  at::parallel_for(0, param.numel(), 1 << 15, [&](int64_t begin, int64_t end) {
    int64_t i = begin;
    for (; i + V::size() <= end; i += V::size()) {
      V bv = b ? V::loadu(b + i) : V(T(0));
      V pv = sgd_element(V::loadu(p + i), V::loadu(g + i), bv, v, mode);
      pv.store(p + i);
      if (b) bv.store(b + i);
    }
    for (; i < end; ++i) {
      T bs = b ? b[i] : T(0);
      p[i] = sgd_element(p[i], g[i], bs, s, mode);
      if (b) b[i] = bs;
    }
  });
}

/// Whether p, its gradient and its buffer (when defined) can be walked as one
/// flat array each, element i of one matching element i of the others.
bool fusable(const at::Tensor& p, const at::Tensor& g, const at::Tensor& buf) {
  if (g.is_sparse() || p.layout() != c10::kStrided || g.layout() != c10::kStrided || !p.device().is_cpu() ||
      !g.device().is_cpu())
    return false;
  if (p.scalar_type() != g.scalar_type() ||
      (p.scalar_type() != c10::ScalarType::Float && p.scalar_type() != c10::ScalarType::Double))
    return false;
  if (!p.is_non_overlapping_and_dense() || p.sizes() != g.sizes() || p.strides() != g.strides()) return false;
  if (buf.defined() && (buf.scalar_type() != p.scalar_type() || buf.layout() != c10::kStrided ||
                        !buf.device().is_cpu() || buf.sizes() != p.sizes() || buf.strides() != p.strides()))
    return false;
  return true;
}

/// SGD::step's operations for one parameter (libtorch 1.13's code).
template <typename StateMap>
void unfused_update(const at::Tensor& p, const torch::optim::SGDOptions& o, StateMap& states, const std::string& key) {
  at::Tensor d_p = p.grad().data();
  if (o.weight_decay() != 0) d_p = d_p.add(p.data(), o.weight_decay());
  if (o.momentum() != 0) {
    at::Tensor buf;
    auto state = states.find(key);
    if (state == states.end()) {
      buf = torch::clone(d_p).detach();
      auto s = std::make_unique<torch::optim::SGDParamState>();
      s->momentum_buffer(buf);
      states[key] = std::move(s);
    } else {
      buf = static_cast<torch::optim::SGDParamState&>(*state->second).momentum_buffer();
      buf.mul_(o.momentum()).add_(d_p, 1 - o.dampening());
    }
    d_p = o.nesterov() ? d_p.add(buf, o.momentum()) : buf;
  }
  p.data().add_(d_p, -1 * o.lr());
}

}  // namespace

at::Tensor FusedSGD::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  at::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  fused_updates_ = unfused_updates_ = 0;
  for (auto& group : param_groups_) {
    auto& o = static_cast<torch::optim::SGDOptions&>(group.options());
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const std::string key = c10::guts::to_string(p.unsafeGetTensorImpl());  // SGD's key
      const at::Tensor& g = p.grad();
      const bool momentum = o.momentum() != 0;
      auto state = momentum ? state_.find(key) : state_.end();
      at::Tensor buf = state != state_.end()
                           ? static_cast<torch::optim::SGDParamState&>(*state->second).momentum_buffer()
                           : at::Tensor();
      if (!fusable(p, g, buf)) {
        unfused_update(p, o, state_, key);
        ++unfused_updates_;
        continue;
      }
      const Mode mode{o.weight_decay() != 0, momentum, momentum && !buf.defined(), o.nesterov()};
      if (mode.first) {
        buf = at::empty_like(p);  // p's strides, which the gradient has too
        auto s = std::make_unique<torch::optim::SGDParamState>();
        s->momentum_buffer(buf);
        state_[key] = std::move(s);
      }
      AT_DISPATCH_FLOATING_TYPES(p.scalar_type(), "fx::FusedSGD", [&] { fused_update<scalar_t>(p, g, buf, o, mode); });
      ++fused_updates_;
    }
  }
  return loss;
}

void FusedSGD::zero_grad(bool set_to_none) {
  for (auto& group : param_groups_)
    for (auto& p : group.params()) {
      at::Tensor& grad = p.mutable_grad();
      if (!grad.defined()) continue;
      if (set_to_none) {
        grad.reset();
      } else {
        grad.detach_();
        grad.zero_();
      }
    }
}

}  // namespace fx
