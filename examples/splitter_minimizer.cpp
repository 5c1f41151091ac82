// Splitting a model for a backend, and finding the node a backend gets wrong
// (torch.fx _SplitterBase and _MinimizerBase).
//
// 1. SplitterBase: say which operators a "backend" runs; the model becomes
//    _run_on_acc_N submodules (the backend's) and _run_on_cpu_N submodules,
//    with torch.fx's reports: which targets were supported, and the bytes
//    crossing each boundary.
// 2. MinimizerBase: run pieces of the model two ways (here: plain fp32, and
//    a "backend" with a bug in its sigmoid) and compare; the minimizer
//    narrows the difference down to the node that causes it.
#include <fx/fx.h>
#include <fx/passes/net_min_base.h>
#include <fx/passes/splitter_base.h>

#include <torch/nn/modules/linear.h>

#include <iostream>

int main() {
  torch::manual_seed(0);
  auto root = std::make_shared<torch::nn::Module>("MLP");
  root->register_module("fc1", torch::nn::Linear(8, 8).ptr());
  root->register_module("fc2", torch::nn::Linear(8, 8).ptr());
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* h = g->call_module("fc1", {x});
  fx::Node* r = g->call_function("aten::relu", {h});
  fx::Node* h2 = g->call_module("fc2", {r});
  fx::Node* s = g->call_function("aten::sigmoid", {h2});
  fx::Node* out = g->call_function("aten::add", {s, x});
  g->output(out);
  auto gm = std::make_shared<fx::GraphModule>(root, g);
  at::Tensor input = torch::randn({4, 8});
  at::Tensor expected = gm->forward(input);

  // 1. A backend that runs element-wise ops but no Linear layers.
  auto support = fx::create_op_support([](const fx::SubmoduleMap&, const fx::Node* n) {
    return n->op() == fx::Opcode::CallFunction;
  });
  fx::SplitterBase splitter(gm, {input}, support);
  std::cout << splitter.node_support_preview();
  std::shared_ptr<fx::GraphModule> split = splitter();
  std::cout << "\nsplit module:\n" << split->code() << "\n";
  for (const auto& [node, submodule] : splitter.get_node_submodule_map())
    std::cout << node << " -> " << submodule << "\n";
  if (!at::allclose(split->forward(input), expected, 0, 1e-6)) {
    std::cerr << "the split module changed the result\n";
    return 1;
  }
  if (splitter.get_node_submodule_map().at("sigmoid") != "_run_on_acc_3") {
    std::cerr << "sigmoid is not in the second acc submodule\n";
    return 1;
  }

  // 2. The backend's sigmoid is off by 1e-2 everywhere.
  struct BuggySigmoid : fx::Interpreter {
    using Interpreter::Interpreter;
    c10::IValue call_function(const std::string& target, std::vector<c10::IValue>& args,
                              fx::ValueKwargs& kwargs) override {
      c10::IValue v = Interpreter::call_function(target, args, kwargs);
      return target == "aten::sigmoid" ? c10::IValue(v.toTensor() + 1e-2) : v;
    }
  };
  auto run_a = [](const std::shared_ptr<fx::GraphModule>& m, const std::vector<c10::IValue>& in) {
    return m->forward(in);
  };
  auto run_b = [](const std::shared_ptr<fx::GraphModule>& m, const std::vector<c10::IValue>& in) {
    return BuggySigmoid(m).run(in);
  };
  auto compare = [](const c10::IValue& a, const c10::IValue& b, const std::vector<std::string>&) {
    double diff = (a.toTensor() - b.toTensor()).abs().max().item<double>();
    return std::make_pair(diff, diff < 1e-4);
  };
  fx::MinimizerSettings settings;
  settings.traverse_method = "binary";
  fx::MinimizerBase minimizer(gm, {input}, compare, settings, run_a, run_b);
  fx::NodeList culprits = minimizer.minimize();
  std::cout << "\nminimizer reports:\n";
  minimizer.print_reports(std::cout);
  if (culprits.size() != 1 || culprits[0]->name() != "sigmoid") {
    std::cerr << "the minimizer did not find sigmoid\n";
    return 1;
  }
  std::cout << "culprit: " << culprits[0]->name() << "\n";
  return 0;
}
