// Imports a TorchScript model, rewrites its graph, runs it: fxcpp used from
// another CMake project (see CMakeLists.txt beside this file).
#include <fx/fx.h>

#include <iostream>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: consumer MODEL.pt INPUTS.pt\n";
    return 2;
  }
  auto gm = fx::import_torchscript(argv[1]);
  std::vector<c10::IValue> inputs = fx::load_inputs(argv[2]);
  const at::Tensor before = gm->forward(inputs).toTensor();
  // The rewrite: every ReLU module call becomes a call of aten::relu.
  int rewritten = 0;
  for (fx::Node* n : gm->graph().find_nodes(fx::Opcode::CallModule)) {
    if (gm->get_submodule(n->target())->name() != "ReLU") continue;
    auto guard = gm->graph().inserting_before(n);
    n->replace_all_uses_with(gm->graph().call_function("aten::relu", n->args()));
    gm->graph().erase_node(n);
    ++rewritten;
  }
  gm->delete_all_unused_submodules();
  const bool same = at::equal(before, gm->forward(inputs).toTensor());
  std::cout << "rewrote " << rewritten << " ReLU calls; outputs " << (same ? "equal" : "DIFFER") << "\n";
  return same && rewritten > 0 ? 0 : 1;
}
