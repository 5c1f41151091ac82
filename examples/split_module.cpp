// Splitting a model into submodules, and fusing what a backend supports.
//
// 1. split_module: a callback gives every node a partition number; the
//    result calls submod_0, submod_1 ... (GraphModule children) and computes
//    the same values.
// 2. CapabilityBasedPartitioner: say which operators a "backend" supports;
//    maximal groups of supported nodes become call_module fused_N nodes,
//    never across an unsupported node in a way that would make a cycle.
#include <fx/fx.h>
#include <fx/passes/partitioner.h>
#include <fx/passes/split_module.h>

#include <torch/nn/modules/linear.h>

#include <iostream>

int main() {
  // A small MLP with a residual connection, built as a graph.
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

  // 1. Everything up to fc2 in partition 0, the rest in partition 1.
  bool second = false;
  auto split = fx::split_module(gm, root, [&](fx::Node* n) -> int64_t {
    if (n->name() == "sigmoid") second = true;
    return second ? 1 : 0;
  });
  std::cout << "split module:\n" << split->code() << "\n";
  auto sub0 = std::dynamic_pointer_cast<fx::GraphModule>(split->get_submodule("submod_0"));
  std::cout << "submod_0:\n" << sub0->code() << "\n";
  at::Tensor got = split->forward(input);
  if (!at::allclose(got, expected, 0, 1e-6)) {
    std::cerr << "split_module changed the result\n";
    return 1;
  }

  // 2. A backend that runs relu, sigmoid and add but no Linear layers.
  auto support = fx::create_op_support([](const fx::SubmoduleMap&, const fx::Node* n) {
    return n->op() == fx::Opcode::CallFunction &&
           (n->target() == "aten::relu" || n->target() == "aten::sigmoid" || n->target() == "aten::add");
  });
  fx::CapabilityBasedPartitioner partitioner(gm, support, /*allows_single_node_partition=*/true);
  for (const fx::Partition& p : partitioner.propose_partitions()) {
    std::cout << "partition " << p.id << ":";
    for (fx::Node* n : p.nodes) std::cout << " " << n->name();
    std::cout << "\n";
  }
  partitioner.partition_and_fuse();
  std::cout << "\nfused:\n" << gm->code();
  gm->graph().lint();
  at::Tensor fused = gm->forward(input);
  if (!at::allclose(fused, expected, 0, 1e-6)) {
    std::cerr << "fusion changed the result\n";
    return 1;
  }
  if (gm->graph().find_nodes(fx::Opcode::CallModule, std::string("fused_0")).size() != 1) {
    std::cerr << "expected one fused_0 call\n";
    return 1;
  }
  std::cout << "\nsplit and fused modules match the original\n";
  return 0;
}
