// optimize_for_inference: the inference pipeline (see the header).
// STUB: returns an unchanged copy until the passes land.
#include <fx/passes/optimize_for_inference.h>

#include <fx/graph.h>

#include <chrono>
#include <unordered_map>

namespace fx {

std::shared_ptr<GraphModule> optimize_for_inference(const std::shared_ptr<GraphModule>& gm,
                                                    const OptimizeOptions& options, OptimizeReport* report) {
  auto start = std::chrono::steady_clock::now();
  if (!gm) throw Error("optimize_for_inference: no module given");
  if (options.dtype != c10::ScalarType::Float && options.dtype != c10::ScalarType::BFloat16)
    throw Error("optimize_for_inference: dtype must be torch.float32 or torch.bfloat16");
  auto copy = std::make_shared<Graph>();
  std::unordered_map<const Node*, Node*> val_map;
  std::optional<Argument> out = copy->graph_copy(gm->graph(), val_map);
  if (out) copy->output(*out);
  auto result = std::make_shared<GraphModule>(gm, copy, gm->class_name());
  if (report) {
    report->optimize_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  return result;
}

}  // namespace fx
