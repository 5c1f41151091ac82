// optimize_for_inference: the same model, faster, in one call.
//
// Traces the demo ResidualNet (conv, batch norm, ReLU, a residual block),
// asks fxcpp for an inference version of it and checks that it computes the
// same numbers, also for a batch size it was not prepared for. Then prints
// what changed: batch norms folded into the convolutions, each convolution
// with its ReLU and residual sum one oneDNN kernel with packed weights, and
// the memory plan: after the first forward of a shape, the forward's buffers
// come from one arena and only the output from the system allocator.
//
//   build/examples/optimize_for_inference
#include <fx/examples/residual_net.h>
#include <fx/onednn.h>
#include <fx/optimize/optimize_for_inference.h>
#include <fx/trace.h>

#include <ATen/ATen.h>

#include <iostream>

int main() {
  torch::manual_seed(0);
  auto model = fx::examples::ResidualNet();
  model->eval();  // inference: batch norm uses its running statistics
  fx::TraceOptions trace_options;
  trace_options.dynamic_dims = {{0, 0}};  // the graph runs at other batch sizes below
  auto gm = fx::symbolic_trace(model, {at::randn({1, 3, 32, 32})}, {}, trace_options);

  fx::OptimizeOptions options;
  options.example_inputs = {at::randn({4, 3, 32, 32})};  // shapes to prepare the kernels for
  fx::OptimizeReport report;
  auto fast = fx::optimize_for_inference(gm, options, &report);

  at::NoGradGuard no_grad;
  bool ok = true;
  for (int64_t batch : {4, 7}) {
    at::Tensor x = at::randn({batch, 3, 32, 32});
    at::Tensor want = model->forward(x), got = fast->forward(x);
    const double err = (got - want).abs().max().item<double>() / want.abs().max().item<double>();
    std::cout << "batch " << batch << ": max difference to eager " << err << " of the largest output\n";
    ok &= err <= 1e-4;
  }

  std::cout << "\n" << report.nodes_before << " nodes -> " << report.nodes_after << " nodes; "
            << report.folded_batch_norms << " batch norms folded; " << report.onednn_convs << " convolutions and "
            << report.onednn_linears << " linear layers on oneDNN with " << report.fused_post_ops
            << " fused activations/sums; optimised in " << report.optimize_ms << " ms\n\n";
  for (const fx::Node* n : fast->graph().nodes())
    if (n->target().rfind("fxcpp::onednn_", 0) == 0 && n->args().size() > 1 && !n->args()[1].is_node())
      std::cout << "  " << n->name() << ": " << fx::onednn::describe(n->args()[1].to_constant()) << "\n";
  fast->forward(at::randn({4, 3, 32, 32}));
  const fx::MemoryPlanStats mem = fast->memory_plan_stats();
  std::cout << "\nmemory plan: " << mem.plans << " input shapes planned; the last forward took "
            << mem.last_arena_allocations << " buffers from its " << mem.arena_bytes / 1024 << " KiB arena and "
            << mem.last_system_allocations << " (the output) from the system allocator\n";
  std::cout << "\n" << fast->code();

  ok &= report.folded_batch_norms > 0 && report.onednn_convs > 0;
  ok &= mem.fallbacks == 0 && mem.last_system_allocations == 1;
  std::cout << (ok ? "OK" : "WRONG") << "\n";
  return ok ? 0 : 1;
}
