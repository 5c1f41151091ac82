// Cleaning up a traced model with a PassManager: remove_dropout, CSE and
// dead code elimination, run to a fixed point with the graph checked after
// every pass.
//
//   build/examples/pass_manager
#include <fx/passes.h>
#include <fx/trace.h>

#include <ATen/ATen.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include <iostream>

// A model with a dropout and a computation written twice.
struct Net : torch::nn::Module {
  Net() {
    fc = register_module("fc", torch::nn::Linear(8, 8));
    drop = register_module("drop", torch::nn::Dropout(0.1));
  }
  at::Tensor forward(at::Tensor x) {
    at::Tensor h = drop(fc(x));
    at::Tensor a = torch::sigmoid(h) * 2;
    at::Tensor b = torch::sigmoid(h) * 2;  // the same value again: CSE merges it
    return torch::relu(a + b);
  }
  torch::nn::Linear fc{nullptr};
  torch::nn::Dropout drop{nullptr};
};

int main() {
  torch::manual_seed(0);
  auto net = std::make_shared<Net>();
  net->eval();
  at::Tensor x = at::randn({4, 8});
  auto gm = fx::symbolic_trace(net, {x});
  std::cout << "before:\n" << gm->code() << "\n";

  fx::PassManager pm({fx::make_pass("remove_dropout", fx::remove_dropout),
                      fx::make_pass(std::make_shared<fx::CSEPass>()),
                      fx::make_pass(std::make_shared<fx::DeadCodeEliminationPass>())},
                     {fx::this_before_that_pass_constraint("CSEPass", "eliminate_dead_code")},
                     /*steps=*/4, /*run_checks_after_each_pass=*/true);
  fx::PassResult r = pm(gm);
  std::cout << "after:\n" << r.graph_module->code() << "\n";

  at::Tensor expected = net->forward(x);
  at::Tensor got = r.graph_module->forward(x);
  size_t sigmoids = r.graph_module->graph().find_nodes(fx::Opcode::CallFunction, "aten::sigmoid").size();
  bool ok = r.modified && sigmoids == 1 && at::allclose(got, expected) &&
            r.graph_module->named_children().size() == 1;  // fc stays, drop is gone
  std::cout << "sigmoid nodes: " << sigmoids << ", outputs " << (at::allclose(got, expected) ? "match" : "DIFFER")
            << " eager\n";
  return ok ? 0 : 1;
}
