#pragma once
/// \file
/// Constant folding (torch.fx `experimental/const_fold.split_const_subgraphs`).
///
/// A node is *constant* when it is a get_attr, or a call whose inputs are all
/// constant (a call without node inputs, such as aten::ones({2}), is
/// constant too). Placeholders and output never are. Constant calls are
/// computed once, at folding time, and their values become attributes of the
/// module; the nodes that used them read those attributes instead, and the
/// constant nodes nobody needs any more are erased. Why: a deployed model
/// stops recomputing weight transformations (transposes, reshapes, scaling
/// of parameters ...) on every forward.
///
/// Never folded (the result must not change when forward runs twice):
///  - impure nodes (Node::is_impure(): call_module, in-place/mutating
///    operators such as aten::add_, functions registered as impure);
///  - random operators: any operator one of whose overloads is tagged
///    nondeterministic_seeded or takes a Generator (aten::rand, randn,
///    randint, randperm, bernoulli, normal, multinomial, rand_like ...),
///    and every dropout variant unless its `train` argument is the literal
///    false (then it is the identity);
///  - call_method targets ending in '_' (in-place methods);
///  - nodes for which the skip predicate returns true.
///
/// Differences from torch.fx, on purpose:
///  - Folding happens eagerly inside split_const_subgraphs (Python defers it
///    to the first call of the FoldedGraphModule). The returned
///    ConstFoldResult keeps the constant subgraph, so run_folding() refolds
///    after the source attributes changed (Python can fold only once).
///  - The graph is edited in place and keeps its order; Python rebuilds it
///    through split_module, hoisting get_attr nodes to the top.
///  - Attribute names: one folded value is `_FX_CONST_FOLDED_ATTRS` as in
///    Python; several are `_FX_CONST_FOLDED_ATTRS.0`, `.1` ... — exactly the
///    qualified names of the entries of Python's ParameterList — read by one
///    get_attr each instead of a get_attr of the list plus operator.getitem
///    nodes. If the base name is taken, `_1`, `_2` ... is appended (Python's
///    get_unique_attr_name_in_module rule).
///  - A folded value that is not a tensor (an int from size(), a float, a
///    list of ints) is inlined into its users as a literal argument; Python
///    turns ints into a one-element float Tensor parameter, which changes
///    what the users compute. A value that is neither (a list of tensors)
///    is not folded: its constant inputs are folded instead.
///  - call_module is never folded (fxcpp treats every module call as impure).
///  - Only constant nodes left without users are erased; other dead code
///    stays (Python's split_module drops all of it as a side effect).
///  - If computing the constants throws, fx::Error names the pass and the
///    graph is left exactly as it was.
///  - Control flow (fx/control_flow.h): one graph. A cond / loop call is a
///    call_module, so it is never folded, even on constant operands; the
///    branches and bodies are graphs of their own, folded when the pass runs
///    on them (PassManager with recurse_into_subgraphs does that).

#include <fx/passes/pass_manager.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace fx {

/// Returns true for nodes that must not be folded (torch.fx skip_folding_node_fn).
using SkipFoldingNodeFn = std::function<bool(const Node& node)>;

/// One new attribute made by constant folding.
struct FoldedAttr {
  /// Qualified attribute name on the module ("_FX_CONST_FOLDED_ATTRS" or "_FX_CONST_FOLDED_ATTRS.1").
  std::string name;
  /// Name of the (now erased or unused) node whose value it holds.
  std::string source_node;
};

/// What split_const_subgraphs did.
struct ConstFoldResult {
  /// The module (edited in place) and whether anything was folded.
  PassResult pass_result;
  /// Names of the constant call nodes whose values were computed at folding
  /// time, in graph order (get_attr nodes are not listed).
  std::vector<std::string> folded_nodes;
  /// The new tensor attributes, in the order const_subgraph_module returns them.
  std::vector<FoldedAttr> folded_attrs;
  /// Names of the folded nodes whose (non-tensor) values were inlined as literals.
  std::vector<std::string> inlined_nodes;
  /// The constant subgraph (torch.fx FoldedGraphModule.const_subgraph_module):
  /// no inputs, returns a tuple with one tensor per entry of folded_attrs,
  /// reading the module's current attributes. nullptr when nothing was folded
  /// into an attribute.
  std::shared_ptr<GraphModule> const_subgraph_module;
};

/// Folds every constant subgraph of `gm` into attributes (see the file
/// comment). Throws fx::Error naming the pass if gm is null or a constant
/// cannot be computed; the graph is then unchanged.
ConstFoldResult split_const_subgraphs(std::shared_ptr<GraphModule> gm,
                                      const SkipFoldingNodeFn& skip_folding_node_fn = nullptr);

/// Recomputes the folded attributes from the module's current attributes
/// (torch.fx FoldedGraphModule.run_folding, which Python can run only once).
/// Returns false when there is nothing to fold.
bool run_folding(const ConstFoldResult& result);

/// Whether constant folding may ever fold `node`'s operation (not impure, not
/// random, not in-place); does not look at the inputs.
bool is_foldable_operation(const Node& node);

}  // namespace fx
