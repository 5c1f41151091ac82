#pragma once
/// \file
/// CSEPass: common subexpression elimination (torch.fx
/// `passes/dialect/common/cse_pass.CSEPass`).
///
/// Two nodes with the same opcode, target, args and kwargs compute the same
/// value when the operation is pure, so the later one is replaced by the
/// earlier one and erased. The pass edits the module in place and reports
/// whether it merged anything.
///
/// Where it differs from torch.fx, on purpose:
///  - torch.fx bans nothing by default (two `rand` calls are merged unless
///    the caller lists them); fxcpp never merges random ops (the
///    get_CSE_banned_ops() list, any op tagged nondeterministic_seeded or
///    taking a Generator), in-place ops (`*_`), ops whose schema writes to
///    an input, impure registered functions, or call_module nodes (a module
///    may keep state, e.g. BatchNorm in training). `banned_ops` adds to that.
///  - torch.fx is documented as unsafe on graphs with mutation. fxcpp keeps
///    it sound: a node whose value may be mutated later (an input of an
///    in-place op, directly or through views) is never merged, so
///    `a = x.clone(); a.add_(1); b = x.clone()` keeps both clones.
///  - Control flow (fx/control_flow.h): each branch and loop body is a
///    graph of its own, merged on its own (inner graphs first); nothing is
///    merged across a graph boundary (a node inside a branch with one
///    outside it), and two cond / loop calls are never merged (call_module).
///  - Literals compare by kind and value: `aten::mul(x, 2)` and
///    `aten::mul(x, 2.0)` stay apart (torch.fx 1.13 merges them, as
///    Python's 2 == 2.0; for an integer x the first stays int64, the
///    second is float).
///  - Floats compare bitwise (`x * 0.0` and `x * -0.0` differ); duplicate
///    get_attr nodes of one target are merged too, which lets the calls
///    that use them merge.

#include <fx/passes/pass_manager.h>

#include <string>
#include <unordered_set>

namespace fx {

/// torch.fx's get_CSE_banned_ops(): the random and in-place ATen ops it
/// lists ("aten::dropout", "aten::rand", "aten::add_" ...), by name without overload.
const std::unordered_set<std::string>& get_CSE_banned_ops();

/// Whether a call_function target is random: listed in get_CSE_banned_ops(),
/// tagged nondeterministic_seeded, or taking a Generator in some overload.
bool is_random_function(const std::string& target);

/// Merges identical pure nodes (see the file comment).
class CSEPass : public PassBase {
 public:
  /// `banned_ops`: more call_function targets (with or without overload) never merged.
  explicit CSEPass(std::unordered_set<std::string> banned_ops = {});
  /// "CSEPass".
  std::string name() const override { return "CSEPass"; }
  /// Merges duplicates in `gm`'s graph and in every graph below it, in place.
  PassResult call(std::shared_ptr<GraphModule> gm) override;
  /// True: call() merges inside branches and loop bodies itself.
  bool handles_subgraphs() const override { return true; }
  /// How many nodes the last call() removed (all graphs).
  size_t merged() const { return merged_; }

 private:
  size_t merge_duplicates(Graph& g) const;
  std::unordered_set<std::string> banned_ops_;
  size_t merged_ = 0;
};

}  // namespace fx
