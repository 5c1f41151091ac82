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

#include <fx/error.h>

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
void unfused_update(const at::Tensor& p, const at::Tensor& grad, const torch::optim::SGDOptions& o, StateMap& states,
                    const std::string& key) {
  at::Tensor d_p = grad.data();
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
    const auto& o = static_cast<const torch::optim::SGDOptions&>(group.options());
    for (auto& p : group.params())
      if (p.grad().defined()) update_one(p, p.grad(), o);
  }
  return loss;
}

void FusedSGD::update_one(const at::Tensor& p, const at::Tensor& g, const torch::optim::SGDOptions& o) {
  const std::string key = c10::guts::to_string(p.unsafeGetTensorImpl());  // SGD's key
  const bool momentum = o.momentum() != 0;
  auto state = momentum ? state_.find(key) : state_.end();
  at::Tensor buf = state != state_.end()
                       ? static_cast<torch::optim::SGDParamState&>(*state->second).momentum_buffer()
                       : at::Tensor();
  at::Tensor allocated;
  if (momentum && !buf.defined()) {
    auto it = allocated_buffers_.find(key);
    if (it != allocated_buffers_.end()) {
      allocated = std::move(it->second);
      allocated_buffers_.erase(it);
    }
  }
  if (!fusable(p, g, buf)) {
    unfused_update(p, g, o, state_, key);
    ++unfused_updates_;
    return;
  }
  const Mode mode{o.weight_decay() != 0, momentum, momentum && !buf.defined(), o.nesterov()};
  if (mode.first) {
    // p's strides, which the gradient has too; allocate_state()'s buffer where it has them still.
    buf = allocated.defined() && allocated.sizes() == p.sizes() && allocated.strides() == p.strides() &&
                  allocated.scalar_type() == p.scalar_type()
              ? allocated
              : at::empty_like(p);
    auto s = std::make_unique<torch::optim::SGDParamState>();
    s->momentum_buffer(buf);
    state_[key] = std::move(s);
  }
  AT_DISPATCH_FLOATING_TYPES(p.scalar_type(), "fx::FusedSGD", [&] { fused_update<scalar_t>(p, g, buf, o, mode); });
  ++fused_updates_;
}

const torch::optim::SGDOptions* FusedSGD::options_of(const at::Tensor& param) const {
  for (const auto& group : param_groups_)
    for (const auto& p : group.params())
      if (p.unsafeGetTensorImpl() == param.unsafeGetTensorImpl())
        return &static_cast<const torch::optim::SGDOptions&>(group.options());
  return nullptr;
}

void FusedSGD::allocate_state() {
  // Once every parameter with momentum has its state (after the first step), nothing to do: no key is made.
  size_t with_momentum = 0;
  for (const auto& group : param_groups_)
    if (static_cast<const torch::optim::SGDOptions&>(group.options()).momentum() != 0)
      with_momentum += group.params().size();
  if (state_.size() >= with_momentum) return;
  for (const auto& group : param_groups_) {
    if (static_cast<const torch::optim::SGDOptions&>(group.options()).momentum() == 0) continue;
    for (const auto& p : group.params()) {
      const std::string key = c10::guts::to_string(p.unsafeGetTensorImpl());
      if (state_.count(key)) continue;
      auto it = allocated_buffers_.find(key);
      // Again where the parameter's layout changed since (AotOptions::memory_format converts it at forward).
      if (it != allocated_buffers_.end() && it->second.strides() == p.strides() &&
          it->second.scalar_type() == p.scalar_type())
        continue;
      allocated_buffers_[key] = at::empty_like(p);
    }
  }
}

bool FusedSGD::updates(const at::Tensor& param) const { return param.defined() && options_of(param) != nullptr; }

void FusedSGD::update(const at::Tensor& param, const at::Tensor& grad) {
  const torch::optim::SGDOptions* o = options_of(param);
  if (o == nullptr) throw Error("fx::FusedSGD::update: the tensor is not one of this optimizer's parameters");
  if (!grad.defined()) return;
  torch::NoGradGuard no_grad;
  update_one(param, grad, *o);
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
