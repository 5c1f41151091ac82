// eliminate_dead_code as a pass (see include/fx/passes/dead_code.h).
#include <fx/passes/dead_code.h>

namespace fx {

PassResult eliminate_dead_code(std::shared_ptr<GraphModule> gm, bool delete_unused_submodules) {
  if (!gm) throw PassError("eliminate_dead_code: no module given");
  bool changed = gm->graph().eliminate_dead_code();  // lints first: a broken graph is refused unchanged
  if (delete_unused_submodules) gm->delete_all_unused_submodules();
  return PassResult{gm, changed};
}

}  // namespace fx
