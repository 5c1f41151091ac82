// ShapeProp: the shape of every value in a graph, with or without data.
//
// Traces the demo ResidualNet, records each node's shape with real data
// (torch.fx's ShapeProp), then again on the meta device, which computes no
// data: a batch of 256 images of 224x224 costs no more than one image. The
// printout is torch.fx's docstring example: name, dtype, shape per node.
//
//   build/examples/shape_prop
#include <fx/examples/residual_net.h>
#include <fx/passes/shape_prop.h>
#include <fx/trace.h>

#include <ATen/ATen.h>

#include <iomanip>
#include <iostream>

namespace {

std::string shape_of(const fx::Node* n) {
  auto it = n->meta().find("tensor_meta");
  if (it == n->meta().end()) return "-";
  const auto& m = std::any_cast<const fx::TensorMetadata&>(it->second);
  std::string s = "[";
  for (size_t i = 0; i < m.shape.size(); ++i) s += (i ? ", " : "") + std::to_string(m.shape[i]);
  return s + "]";
}

}  // namespace

int main() {
  torch::manual_seed(0);
  auto model = fx::examples::ResidualNet();
  model->eval();
  fx::TraceOptions trace_options;
  trace_options.dynamic_dims = {{0, 0}, {0, 2}, {0, 3}};  // shapes are propagated for other sizes below
  auto gm = fx::symbolic_trace(model, {at::randn({1, 3, 32, 32})}, {}, trace_options);

  // 1. With data, as torch.fx: ShapeProp(gm).propagate(sample_input).
  fx::ShapeProp(gm).propagate({at::randn({8, 3, 32, 32})});
  std::cout << "real data, batch 8:\n";
  for (fx::Node* n : gm->graph().nodes()) {
    const auto& m = std::any_cast<const fx::TensorMetadata&>(n->meta().at("tensor_meta"));
    std::cout << "  " << std::left << std::setw(20) << n->name() << std::setw(16) << fx::python_dtype_repr(m.dtype)
              << shape_of(n) << "\n";
  }
  std::vector<std::string> real;
  for (fx::Node* n : gm->graph().nodes()) real.push_back(shape_of(n));

  // 2. Without data: the same shapes, nothing computed.
  fx::ShapeProp meta(gm);
  c10::IValue out = meta.propagate_meta({at::randn({8, 3, 32, 32})});
  size_t i = 0, wrong = 0;
  for (fx::Node* n : gm->graph().nodes()) wrong += shape_of(n) != real[i++];
  std::cout << "meta device, batch 8: " << (wrong ? "DIFFERENT shapes" : "the same shapes") << ", "
            << meta.fallback_nodes().size() << " nodes ran on real data\n";

  // 3. A batch far too large to run for real on a laptop, described for free:
  // an uninitialised meta tensor stands for the input.
  at::Tensor big = at::empty({256, 3, 224, 224}, at::TensorOptions().device(at::kMeta));
  out = meta.propagate_meta({big});
  const std::string result = shape_of(gm->graph().output_node());
  std::cout << "meta device, batch 256 at 224x224: output " << result << " (" << (out.toTensor().is_meta() ? "meta" : "real")
            << " tensor)\n";

  const bool ok = wrong == 0 && meta.fallback_nodes().empty() && result == "[256, 10]" && out.toTensor().is_meta() &&
                  real.back() == "[8, 10]";
  std::cout << (ok ? "all shapes as expected" : "WRONG shapes") << "\n";
  return ok ? 0 : 1;
}
