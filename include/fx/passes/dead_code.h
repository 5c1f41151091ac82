#pragma once
/// \file
/// Dead code elimination as a pass: Graph::eliminate_dead_code (torch.fx
/// `graph.eliminate_dead_code()`) wrapped so that PassManager can run it,
/// optionally followed by GraphModule::delete_all_unused_submodules().
///
/// A node is dead when nothing uses it and it is not impure (placeholders,
/// output, call_module, in-place / mutating ops and impure registered
/// functions stay). A graph that does not lint is refused before anything
/// is erased.
///
/// Differs from torch.fx 1.13 on purpose: an unused in-place call_method
/// (`x.add_(x)`) stays, where torch.fx checks only call_function targets
/// for side effects and drops it (and with it the write to x); so does an
/// operator that returns nothing (aten::_assert_async).
///
/// Control flow: the branches and loop bodies below the module
/// (fx/control_flow.h) are cleaned too, inner graphs first, each on its own:
/// a node is dead when nothing in its own graph uses it. Their placeholders
/// and results are the cond / loop interface and always stay, and a cond or
/// loop call is never dead (a call_module). Graph::eliminate_dead_code stays
/// one graph.

#include <fx/passes/pass_manager.h>

namespace fx {

/// Erases dead nodes, last first, of `gm`'s graph and of every branch and
/// loop body below it; with
/// delete_unused_submodules, also drops the submodules and attributes that
/// no node uses any more. Edits in place.
PassResult eliminate_dead_code(std::shared_ptr<GraphModule> gm, bool delete_unused_submodules = false);

/// eliminate_dead_code as a PassBase (name "eliminate_dead_code").
class DeadCodeEliminationPass : public PassBase {
 public:
  /// See eliminate_dead_code().
  explicit DeadCodeEliminationPass(bool delete_unused_submodules = false)
      : delete_unused_submodules_(delete_unused_submodules) {}
  /// "eliminate_dead_code".
  std::string name() const override { return "eliminate_dead_code"; }
  /// True: eliminate_dead_code() cleans the branches and bodies itself.
  bool handles_subgraphs() const override { return true; }
  /// Runs eliminate_dead_code().
  PassResult call(std::shared_ptr<GraphModule> gm) override {
    return eliminate_dead_code(std::move(gm), delete_unused_submodules_);
  }

 private:
  bool delete_unused_submodules_;
};

}  // namespace fx
