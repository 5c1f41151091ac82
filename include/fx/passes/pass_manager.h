#pragma once
/// \file
/// PassResult, PassBase and PassManager (torch.fx `passes/infra/pass_base.py`
/// and `passes/infra/pass_manager.py`).
///
/// A pass takes a GraphModule and returns a PassResult: the module it
/// produced (the same one, edited in place, or a new one) and whether
/// anything changed. A PassManager runs an ordered list of passes, sorted
/// by ordering constraints, optionally checking the graph (lint plus user
/// checks) after each one, and repeats the whole list until nothing changes
/// or `steps` rounds have run.
///
/// Unlike torch.fx, a pass that fails (throws, or leaves a graph that does
/// not pass the checks) never leaves a half-edited module behind: the
/// manager restores the graph the pass started from and throws fx::PassError
/// naming the pass and the passes that ran before it.
///
/// Control flow (fx/control_flow.h): with recurse_into_subgraphs (the
/// default) every pass also runs on each GraphModule nested below the module
/// through CondModule / WhileLoopModule children (branches, loop bodies,
/// nested ones), inner graphs first and the module itself last, each with
/// the checks after it; the pass's `modified` is the OR over all of them. A
/// pass run on a subgraph must edit it in place (a branch cannot be swapped
/// for another module): returning a different module for a subgraph is an
/// fx::PassError. Passes that already visit subgraphs themselves (CSEPass,
/// DeadCodeEliminationPass: PassBase::handles_subgraphs()) are not repeated.
/// "Preserves" then means: a pass keeps the value every graph computes for
/// its inputs, branches and bodies included, and keeps each subgraph's
/// interface (its placeholders and the number and order of its results),
/// since the cond / loop node above it relies on that interface.

#include <fx/error.h>
#include <fx/graph_module.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fx {

/// What a pass returns (torch.fx PassResult).
struct PassResult {
  /// The module after the pass (the input module when edited in place).
  std::shared_ptr<GraphModule> graph_module;
  /// Whether the pass changed anything.
  bool modified = false;
};

/// A pass failed, or a check after it did (names the pass).
class PassError : public Error {
 public:
  using Error::Error;
};

/// A pass as a function.
using PassFn = std::function<PassResult(std::shared_ptr<GraphModule>)>;

/// Base class of passes with a name (torch.fx PassBase): requires() runs
/// before call(), ensures() after it; both may throw to reject the module.
class PassBase {
 public:
  virtual ~PassBase() = default;
  /// The name PassManager reports and sorts by (the class name by convention).
  virtual std::string name() const = 0;
  /// The transformation.
  virtual PassResult call(std::shared_ptr<GraphModule> gm) = 0;
  /// Precondition check; default: none.
  virtual void requires_(GraphModule& gm) { (void)gm; }
  /// Postcondition check; default: none.
  virtual void ensures(GraphModule& gm) { (void)gm; }
  /// Whether call() already runs on every subgraph (branches, loop bodies),
  /// so PassManager need not run it there again; default: false.
  virtual bool handles_subgraphs() const { return false; }
  /// requires_(), call(), ensures() (torch.fx PassBase.__call__).
  PassResult operator()(std::shared_ptr<GraphModule> gm);
};

/// A pass with a name, as PassManager holds it.
struct NamedPass {
  /// The pass's name (in errors and constraints).
  std::string name;
  /// The pass.
  PassFn fn;
  /// The pass visits subgraphs itself: PassManager does not run it on them.
  bool handles_subgraphs = false;
};

/// Wraps a PassBase as a NamedPass (the pass object is shared).
NamedPass make_pass(std::shared_ptr<PassBase> pass);
/// Wraps a function as a NamedPass called `name`.
NamedPass make_pass(std::string name, PassFn fn);

/// An ordering constraint: true when `a` may run before `b`
/// (torch.fx's constraint callables).
using PassConstraint = std::function<bool(const NamedPass& a, const NamedPass& b)>;
/// The constraint "the pass named `this_pass` runs before the one named
/// `that_pass`" (torch.fx this_before_that_pass_constraint).
PassConstraint this_before_that_pass_constraint(std::string this_pass, std::string that_pass);
/// The constraint "the passes named `these` run before those named `those`",
/// comparing the passes under any loop_pass wrappers (torch.fx
/// pass_manager.these_before_those_pass_constraint). A loop_pass keeps its
/// base pass's name (as functools.wraps keeps __name__) and fxcpp tells
/// passes apart by name, so this is this_before_that_pass_constraint under
/// torch.fx's other name: a loop_pass(pass_a, 5) also runs before pass_b.
PassConstraint these_before_those_pass_constraint(std::string these, std::string those);

/// Decides whether loop_pass runs its pass once more, on the module so far.
using LoopPredicate = std::function<bool(const std::shared_ptr<GraphModule>& gm)>;
/// `base_pass` applied `n_iter` times, or as long as `predicate` holds on
/// the module (checked before each run) (torch.fx pass_manager.loop_pass).
/// Each run takes the module the previous one returned; `modified` is true
/// when any run changed something; the name is base_pass's. Exactly one of
/// n_iter and predicate must be given ("Exactly one of `n_iter`or
/// `predicate` must be specified.") and n_iter must be positive ("loop_pass
/// must be given positive int n_iter (given 0) xor predicate (given None)"):
/// fx::PassError with torch.fx's texts, here when the loop is made (torch.fx
/// raises the second only when it runs).
NamedPass loop_pass(NamedPass base_pass, std::optional<int> n_iter, LoopPredicate predicate = nullptr);

/// Calls `fn` on every GraphModule nested below `gm` through control-flow
/// modules (fx::for_each_subgraph: inner graphs first) and then on `gm`
/// itself: how a pass that works graph by graph reaches branches and bodies.
void for_each_graph_module(GraphModule& gm, const std::function<void(GraphModule&)>& fn);

/// A check run on the module after each pass (throws to reject it).
using PassCheck = std::function<void(GraphModule& gm)>;

/// Runs passes in order (torch.fx PassManager).
class PassManager {
 public:
  /// An empty manager: one round, no checks.
  PassManager() = default;
  /// A manager over `passes`, sorted by `constraints`, running at most
  /// `steps` rounds (at least 1) and stopping early when a round changes
  /// nothing. With run_checks_after_each_pass, lint() and the added checks
  /// run after every pass; a failed check is an error unless
  /// suppress_check_failures, when it is only counted.
  explicit PassManager(std::vector<NamedPass> passes, std::vector<PassConstraint> constraints = {},
                       int steps = 1, bool run_checks_after_each_pass = false,
                       bool suppress_check_failures = false);

  /// Appends a pass.
  void add_pass(NamedPass pass);
  /// Adds an ordering constraint.
  void add_constraint(PassConstraint constraint);
  /// Adds a check run after each pass (when checks are on) and by check().
  void add_checks(PassCheck check);
  /// Turns the per-pass checks on or off.
  void set_run_checks_after_each_pass(bool on) { run_checks_after_each_pass_ = on; }
  /// Whether passes also run on the branch and body graphs (default: on; see the file comment).
  void set_recurse_into_subgraphs(bool on) { recurse_into_subgraphs_ = on; }
  /// Whether passes also run on the branch and body graphs.
  bool recurse_into_subgraphs() const { return recurse_into_subgraphs_; }
  /// Sets the most rounds run (at least 1).
  void set_steps(int steps);

  /// Throws fx::PassError if the current order breaks a constraint, naming both passes.
  void validate_constraints() const;
  /// Sorts the passes so every constraint holds (stable topological order);
  /// throws fx::PassError naming the passes of a cycle.
  void solve_constraints();
  /// lint() plus every added check on `gm` (and on each subgraph when
  /// recurse_into_subgraphs).
  void check(GraphModule& gm) const;

  /// Runs the passes (torch.fx PassManager.__call__). A pass that throws or
  /// fails a check throws fx::PassError ("An error occurred when running the
  /// 'p' pass after the following passes: [...]") and `gm`'s graph is left
  /// as it was before that pass.
  PassResult operator()(std::shared_ptr<GraphModule> gm);

  /// The passes, in the order they run.
  const std::vector<NamedPass>& passes() const { return passes_; }
  /// Check failures suppressed by the last run.
  int suppressed_check_failures() const { return suppressed_; }

 private:
  std::vector<NamedPass> passes_;
  std::vector<PassConstraint> constraints_;
  std::vector<PassCheck> checks_;
  int steps_ = 1;
  bool run_checks_after_each_pass_ = false;
  bool suppress_check_failures_ = false;
  bool recurse_into_subgraphs_ = true;
  bool solved_ = false;
  int suppressed_ = 0;
};

}  // namespace fx
