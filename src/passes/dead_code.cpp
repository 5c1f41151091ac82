// eliminate_dead_code as a pass (see include/fx/passes/dead_code.h).
#include <fx/passes/dead_code.h>

namespace fx {

PassResult eliminate_dead_code(std::shared_ptr<GraphModule> gm, bool delete_unused_submodules) {
  if (!gm) throw PassError("eliminate_dead_code: no module given");
  // Every graph lints before the first edit: a broken one is refused with all unchanged.
  for_each_graph_module(*gm, [](GraphModule& m) { m.graph().lint(); });
  bool changed = false;
  for_each_graph_module(*gm, [&](GraphModule& m) {
    changed = m.graph().eliminate_dead_code() || changed;
    if (delete_unused_submodules) m.delete_all_unused_submodules();
  });
  return PassResult{gm, changed};
}

}  // namespace fx
