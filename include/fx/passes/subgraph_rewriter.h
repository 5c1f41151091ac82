#pragma once
/// \file
/// Subgraph rewriter: replaces every occurrence of a pattern graph by a
/// replacement graph (torch.fx `subgraph_rewriter.replace_pattern` and the
/// newer `replace_pattern_with_filters`).
///
/// What it does: SubgraphMatcher finds the non-overlapping, self-contained
/// matches of `pattern` in `gm`'s graph; each is replaced, in graph order,
/// by a copy of `replacement` whose i-th placeholder takes what the
/// pattern's i-th placeholder matched and whose returned values take over
/// the users of the pattern's returned values; the matched nodes are then
/// erased. New nodes are named after the replacement's nodes, made unique as
/// torch.fx does (`mul`, `mul_1` ...). Pattern and replacement are Graphs or
/// GraphModules (a C++ function traced with fx::symbolic_trace gives one);
/// when the replacement is a GraphModule, the submodules and attributes its
/// call_module / get_attr nodes name are copied into `gm` (cloned) unless
/// `gm` has them already, as torch.fx does.
///
/// Why: pattern rewriting is how fusions and lowering passes are written
/// (conv→bn→relu, add→relu, custom ops).
///
/// How it differs from torch.fx (where torch.fx is wrong, fxcpp is right):
///  - back-to-back matches (pytorch/pytorch#159613, #99039): a match whose
///    inputs are the results of an earlier replaced match reads the
///    replacement, also inside lists (`cat([prev, z], 1)`), and the returned
///    nodes_map / placeholder_nodes point at the live nodes, never at erased
///    ones.
///  - the replacement is inserted before the first user of the returned
///    values as torch.fx does, but when an input of the match is defined
///    after that user (multiple outputs), it goes after the last input and
///    the users in between move after it, so the graph stays topologically
///    ordered (torch.fx produces a graph that fails lint).
///  - everything is validated before the first edit: a pattern without
///    output, a replacement with a different number of inputs or outputs, a
///    replacement target that exists nowhere, a replacement returning a
///    literal: fx::Error naming the node, and `gm` is left as it was.
///  - linear in the graph (torch.fx scans the whole graph per match to find
///    the first user); the graph is lint-checked at the end. `gm` recompiles
///    lazily on its next forward()/code() (torch.fx calls recompile()).

#include <fx/graph_module.h>
#include <fx/passes/pass_manager.h>
#include <fx/passes/subgraph_matcher.h>

#include <functional>
#include <memory>
#include <vector>

namespace fx {

/// A replaced match (torch.fx Match).
struct Match {
  /// The pattern node the match was found from (torch.fx returns the
  /// pattern's first anchor); nodes_map.node(anchor) is the graph node.
  Node* anchor = nullptr;
  /// Pattern node → graph value (placeholders: the live inputs of the
  /// replacement; compute nodes: the erased matched nodes).
  NodesMap nodes_map;
};

/// A replaced match and what replaced it (torch.fx ReplacedPatterns).
struct ReplacedPatterns {
  /// The pattern node the match was found from (the first anchor).
  Node* anchor = nullptr;
  /// Pattern node → graph value, as in Match.
  NodesMap nodes_map;
  /// The nodes added to the graph for this match, in graph order.
  std::vector<Node*> replacements;
};

/// Decides whether a match is replaced: (match, original graph, pattern graph).
using MatchFilter = std::function<bool(const InternalMatch&, const Graph&, const Graph&)>;

/// Replaces every non-overlapping match of `pattern` in `gm` by `replacement`
/// (torch.fx replace_pattern); returns the matches replaced, in order.
std::vector<Match> replace_pattern(GraphModule& gm, const Graph& pattern, const Graph& replacement);
/// As above with traced (or built) GraphModules; the replacement's
/// submodules and attributes are copied into gm where needed.
std::vector<Match> replace_pattern(GraphModule& gm, const GraphModule& pattern, const GraphModule& replacement);

/// replace_pattern keeping only matches every filter accepts; with
/// ignore_literals, literals in the pattern match any literal (torch.fx
/// replace_pattern_with_filters).
std::vector<ReplacedPatterns> replace_pattern_with_filters(GraphModule& gm, const Graph& pattern,
                                                           const Graph& replacement,
                                                           const std::vector<MatchFilter>& match_filters = {},
                                                           bool ignore_literals = false);
/// As above with GraphModules (the replacement's submodules and attributes
/// are copied into gm where needed).
std::vector<ReplacedPatterns> replace_pattern_with_filters(GraphModule& gm, const GraphModule& pattern,
                                                           const GraphModule& replacement,
                                                           const std::vector<MatchFilter>& match_filters = {},
                                                           bool ignore_literals = false);

/// The rewrite as a pass for PassManager: modified is whether anything was replaced.
PassFn replace_pattern_pass(std::shared_ptr<const GraphModule> pattern, std::shared_ptr<const GraphModule> replacement);

}  // namespace fx
