// AotModule::register_gradient_ready_hook: each parameter's gradient is
// reported once, while the compiled backward graph still runs, in the order
// of the gradients' nodes in backward_graph(), with the values backward
// returns; None gradients before the graph; backward_graph() unchanged.
#include <fx/aot.h>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

/// fc1 - relu - fc2 - relu - fc3, and a layer the forward never uses.
struct MlpImpl : torch::nn::Module {
  MlpImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(6, 8));
    fc2 = register_module("fc2", torch::nn::Linear(8, 8));
    unused = register_module("unused", torch::nn::Linear(8, 8));
    fc3 = register_module("fc3", torch::nn::Linear(8, 3));
  }
  at::Tensor forward(const at::Tensor& x) { return fc3(torch::relu(fc2(torch::relu(fc1(x))))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, unused{nullptr}, fc3{nullptr};
};
TORCH_MODULE(Mlp);

struct Call {
  size_t index;
  at::Tensor grad;    // a copy
  bool during_graph;  // the compiled backward graph was running
};

/// The indices of backward's gradient outputs in the order their nodes appear in `backward`; None ones left out.
std::vector<size_t> gradient_node_order(const fx::GraphModule& backward) {
  std::unordered_map<const fx::Node*, size_t> position;
  for (const fx::Node* n : backward.graph().nodes()) position.emplace(n, position.size());
  const fx::Argument& out = backward.graph().output_node()->args()[0];
  std::vector<std::pair<size_t, size_t>> order;  // (node position, output index)
  for (size_t k = 0; k < out.items().size(); ++k)
    if (out.items()[k].is_node()) order.emplace_back(position.at(out.items()[k].to_node()), k);
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<size_t> indices;
  for (const auto& [pos, k] : order) indices.push_back(k);
  return indices;
}

TEST(AotGradientReadyHook, OncePerParameterInGraphOrderWhileTheGraphRuns) {
  torch::manual_seed(0);
  Mlp net;
  bool graph_running = false;
  std::vector<std::shared_ptr<fx::GraphModule>> compiled;  // what bw_compiler was given
  fx::AotOptions options;
  options.bw_compiler = [&](const std::shared_ptr<fx::GraphModule>& gm, const std::vector<c10::IValue>& examples) {
    compiled.push_back(gm);
    fx::CompiledGraph run = fx::graph_module_compiler(gm, examples);
    return [&graph_running, run](std::vector<c10::IValue>& inputs) {
      graph_running = true;
      std::vector<c10::IValue> out = run(inputs);
      graph_running = false;
      return out;
    };
  };
  auto aot = fx::aot_module(net.ptr(), options);
  const at::Tensor x = torch::randn({5, 6});
  aot->forward(x).pow(2).sum().backward();  // traced, plain backward compiled
  ASSERT_EQ(compiled.size(), 1u);
  const std::string plain = aot->backward_graph()->graph().str();
  EXPECT_EQ(plain.find("gradient_ready_hook"), std::string::npos);

  std::vector<Call> calls;
  fx::RemovableHandle handle = aot->register_gradient_ready_hook([&](size_t index, const at::Tensor& grad) {
    calls.push_back({index, grad.defined() ? grad.clone() : grad, graph_running});
  });
  int second = 0;
  fx::RemovableHandle second_handle = aot->register_gradient_ready_hook([&](size_t, const at::Tensor&) {
    EXPECT_EQ(second, static_cast<int>(calls.size()) - 1) << "hooks run in registration order";
    ++second;
  });
  for (auto& p : net->parameters()) p.mutable_grad() = at::Tensor();
  aot->forward(x).pow(2).sum().backward();

  // The hooked copy was compiled, backward_graph() is as it was.
  ASSERT_EQ(compiled.size(), 2u);
  EXPECT_EQ(aot->backward_graph()->graph().str(), plain);
  EXPECT_EQ(compiled[1]->graph().find_nodes(fx::Opcode::CallModule, "gradient_ready_hook").size(), 6u);

  // One call per parameter (named_parameters order: fc1, fc2, unused, fc3), the unused layer's two first, undefined
  // and before the graph ran; the rest during the graph, in the order of their nodes, with the gradients that
  // autograd then wrote into param.grad.
  const auto params = net->named_parameters();
  ASSERT_EQ(params.size(), 8u);
  ASSERT_EQ(calls.size(), 8u);
  EXPECT_EQ(second, 8);
  EXPECT_EQ(calls[0].index, 4u);  // unused.weight
  EXPECT_EQ(calls[1].index, 5u);  // unused.bias
  for (int k = 0; k < 2; ++k) {
    EXPECT_FALSE(calls[static_cast<size_t>(k)].grad.defined());
    EXPECT_FALSE(calls[static_cast<size_t>(k)].during_graph);
  }
  const std::vector<size_t> expected = gradient_node_order(*aot->backward_graph());
  ASSERT_EQ(expected.size(), 6u);
  std::vector<size_t> got;
  for (size_t k = 2; k < calls.size(); ++k) {
    got.push_back(calls[k].index);
    EXPECT_TRUE(calls[k].during_graph) << params[calls[k].index].key();
    const at::Tensor& grad = params[calls[k].index].value().grad();
    ASSERT_TRUE(grad.defined()) << params[calls[k].index].key();
    EXPECT_TRUE(calls[k].grad.equal(grad)) << params[calls[k].index].key();
  }
  EXPECT_EQ(got, expected);
  EXPECT_GE(got.front(), 6u) << "the last layer's gradient comes first, as backward goes";
  EXPECT_FALSE(net->unused->weight.grad().defined());

  // Removed: the plain graph runs again, nothing is called.
  handle.remove();
  handle.remove();
  second_handle.remove();
  calls.clear();
  aot->forward(x).pow(2).sum().backward();
  EXPECT_TRUE(calls.empty());
  EXPECT_EQ(compiled.size(), 2u) << "nothing compiled again";
}

TEST(AotGradientReadyHook, InputsOfAFunctionAndErrors) {
  // aot_function: the indices count the inputs that require grad (no parameters).
  auto f = fx::aot_function([](std::vector<c10::IValue> a) -> c10::IValue {
    return torch::tanh(torch::mm(a[0].toTensor(), a[1].toTensor())).sum();
  });
  torch::manual_seed(0);
  at::Tensor x = torch::randn({3, 4}), w = torch::randn({4, 2}, torch::requires_grad());
  std::map<size_t, at::Tensor> seen;
  fx::RemovableHandle h = f->register_gradient_ready_hook([&](size_t index, const at::Tensor& grad) {
    EXPECT_TRUE(seen.emplace(index, grad.clone()).second) << "twice: " << index;
  });
  f->forward({x, w}).toTensor().backward();
  ASSERT_EQ(seen.size(), 1u);
  ASSERT_EQ(seen.begin()->first, 1u);
  EXPECT_TRUE(seen.begin()->second.equal(w.grad()));

  h.remove();
  // An exception in a hook ends the backward with it.
  fx::RemovableHandle bad = f->register_gradient_ready_hook([](size_t, const at::Tensor&) { throw fx::Error("boom"); });
  try {
    f->forward({x, w}).toTensor().backward();
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("boom"), std::string::npos) << e.what();
  }
  bad.remove();
  try {
    f->register_gradient_ready_hook(nullptr);
    ADD_FAILURE() << "no error";
  } catch (const fx::Error& e) {
    EXPECT_EQ(std::string(e.what()), "AotModule::register_gradient_ready_hook: the hook is empty");
  }
}

}  // namespace
