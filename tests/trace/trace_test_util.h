#pragma once
// Helpers shared by the symbolic_trace tests: graph queries and eager-vs-
// traced comparisons of outputs and gradients.

#include <fx/graph.h>
#include <fx/graph_module.h>
#include <fx/interpreter.h>
#include <fx/tensor_meta.h>

#include <gtest/gtest.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

namespace fx::trace_test {

/// Targets of the nodes with opcode `op`, in program order.
inline std::vector<std::string> targets(const Graph& g, Opcode op) {
  std::vector<std::string> out;
  for (Node* n : g.find_nodes(op)) out.push_back(n->target());
  return out;
}

/// How many call_function nodes call `target`.
inline size_t count_calls(const Graph& g, const std::string& target) {
  return g.find_nodes(Opcode::CallFunction, target).size();
}

/// `v` sorted (for order-independent comparisons).
inline std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

/// Every tensor inside an IValue, depth first.
inline void flatten(const c10::IValue& v, std::vector<at::Tensor>& out) {
  if (v.isTensor()) {
    out.push_back(v.toTensor());
  } else if (v.isTuple()) {
    for (const auto& e : v.toTupleRef().elements()) flatten(e, out);
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) flatten(e, out);
  } else if (v.isGenericDict()) {
    for (const auto& kv : v.toGenericDict()) flatten(kv.value(), out);
  }
}

inline std::vector<at::Tensor> flatten(const c10::IValue& v) {
  std::vector<at::Tensor> out;
  flatten(v, out);
  return out;
}

/// Largest absolute difference between corresponding tensors.
inline double max_abs_diff(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    EXPECT_EQ(a[i].sizes(), b[i].sizes()) << "output " << i;
    if (a[i].sizes() != b[i].sizes()) return 1e9;
    if (a[i].numel() == 0) continue;
    d = std::max(d, (a[i].detach().to(at::kDouble) - b[i].detach().to(at::kDouble)).abs().max().item<double>());
  }
  return d;
}

/// Runs `run` on clones of `inputs` that require grad, backpropagates a fixed
/// random projection of every floating output, and returns the outputs
/// followed by the gradients of the inputs and of `params`.
inline std::vector<at::Tensor> outputs_and_grads(const std::function<c10::IValue(std::vector<c10::IValue>)>& run,
                                                 const std::vector<at::Tensor>& inputs,
                                                 const std::vector<at::Tensor>& params) {
  for (const at::Tensor& p : params) {
    if (p.grad().defined()) p.mutable_grad().zero_();
  }
  std::vector<c10::IValue> args;
  std::vector<at::Tensor> leaves;
  for (const at::Tensor& x : inputs) {
    at::Tensor l = x.detach().clone();
    if (l.is_floating_point()) l.requires_grad_(true);
    leaves.push_back(l);
    args.emplace_back(l);
  }
  std::vector<at::Tensor> outs = flatten(run(args));
  at::Tensor loss = at::zeros({}, at::kDouble);
  at::Generator gen = at::detail::createCPUGenerator(1234);
  for (const at::Tensor& o : outs) {
    if (!o.is_floating_point() || !o.requires_grad()) continue;
    loss = loss + (o.to(at::kDouble) * at::randn(o.sizes(), gen, at::kDouble)).sum();
  }
  std::vector<at::Tensor> result;
  for (const at::Tensor& o : outs) result.push_back(o.detach().clone());
  if (loss.requires_grad()) loss.backward();
  for (const at::Tensor& l : leaves) {
    result.push_back(l.grad().defined() ? l.grad().clone() : at::zeros_like(l));
  }
  for (const at::Tensor& p : params) {
    result.push_back(p.grad().defined() ? p.grad().clone() : at::zeros_like(p));
  }
  return result;
}

/// Expects the traced module to compute what `eager` computes on `inputs`,
/// outputs and gradients (of inputs and of the root's parameters) alike,
/// both through GraphModule::forward and through the Interpreter.
inline void expect_same_as_eager(const std::function<c10::IValue(std::vector<c10::IValue>)>& eager,
                                 const std::shared_ptr<GraphModule>& gm, const std::vector<at::Tensor>& inputs,
                                 const std::vector<at::Tensor>& params, double tol = 1e-5) {
  std::vector<at::Tensor> want = outputs_and_grads(eager, inputs, params);
  std::vector<at::Tensor> by_interpreter =
      outputs_and_grads([&](std::vector<c10::IValue> a) { return Interpreter(gm).run(std::move(a)); }, inputs, params);
  EXPECT_LE(max_abs_diff(want, by_interpreter), tol) << "Interpreter";
  std::vector<at::Tensor> by_forward =
      outputs_and_grads([&](std::vector<c10::IValue> a) { return gm->forward(std::move(a)); }, inputs, params);
  EXPECT_LE(max_abs_diff(want, by_forward), tol) << "GraphModule::forward";
}

}  // namespace fx::trace_test
