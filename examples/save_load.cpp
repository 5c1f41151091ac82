// fx::save / fx::load: trace a model, rewrite its graph, save it, load it
// back (as another process would) and check that it computes the same.
//
//   build/examples/save_load [DIR]
//
// With DIR, also leaves DIR/save_load.fx, DIR/save_load.input.pt and
// DIR/save_load.output.pt behind (the Python bridge's test reads them).
#include <fx/examples/residual_net.h>
#include <fx/fx.h>
#include <fx/serialize.h>
#include <fx/tensor_file.h>
#include <fx/trace.h>

#include <ATen/ATen.h>

#include <cstdio>
#include <iostream>

int main(int argc, char** argv) {
  torch::manual_seed(0);
  fx::examples::ResidualNet net(3, 8, 10);
  net->eval();
  at::Tensor x = at::randn({2, 3, 16, 16});
  auto gm = fx::symbolic_trace(net, {x});

  // The rewrite: scores become softmax probabilities.
  fx::Graph& g = gm->graph();
  fx::Node* out = g.output_node();
  fx::Node* scores = out->args()[0].to_node();
  {
    auto guard = g.inserting_before(out);
    fx::Node* probs = g.call_function("aten::softmax.int", {scores, 1});
    out->replace_input_with(scores, probs);
  }

  const std::string dir = argc > 1 ? argv[1] : ".";
  const std::string path = dir + "/save_load.fx";
  fx::SaveReport report = fx::save(*gm, path);
  std::cout << "saved " << path << ": " << report.bytes << " bytes, " << report.storages << " storages, "
            << report.dropped_meta << " meta entries dropped\n";

  auto loaded = fx::load(path);
  std::cout << loaded->code() << "\n";
  torch::NoGradGuard no_grad;
  at::Tensor expected = gm->forward(x);
  at::Tensor actual = loaded->forward(x);
  const bool same = at::equal(expected, actual) && loaded->code() == gm->code();
  std::cout << "rows sum to " << actual.sum(1) << "\nsame code and bitwise-equal outputs: " << (same ? "yes" : "NO")
            << "\n";
  if (argc > 1) {
    fx::save_value(dir + "/save_load.input.pt", x);
    fx::save_value(dir + "/save_load.output.pt", expected);
  } else {
    std::remove(path.c_str());
  }
  return same ? 0 : 1;
}
