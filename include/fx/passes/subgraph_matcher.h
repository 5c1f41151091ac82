#pragma once
/// \file
/// SubgraphMatcher: finds every occurrence of a pattern Graph inside a larger
/// Graph (torch.fx `passes/utils/matcher_utils.py`, the matcher behind
/// `subgraph_rewriter.replace_pattern`).
///
/// What it does: the pattern's anchors (the nodes whose only user is the
/// output, or the output itself with match_output) are matched against
/// candidate graph nodes of the same opcode and target, then the pattern is
/// walked backwards from each anchor through args and kwargs, node by node,
/// with backtracking over the anchors. Pattern placeholders are wildcards
/// that bind to a graph node or, as in newer torch.fx, to any literal or
/// list (so `cat(xs, dim)` matches `cat([a, b], 1)` with xs = [a, b]).
/// A match is kept only if it is self-contained (no inner node has a user
/// outside the match, except the returned ones), fusing it would not form a
/// cycle, and (by default) it does not overlap an earlier match.
///
/// Why: it is the building block of replace_pattern and of pattern-based
/// passes (fusions, quantization), and it must be fast on large graphs.
///
/// How it differs from torch.fx (1.13):
///  - linear in the graph: candidates for the first anchor come from one pass
///    over the graph; candidates for further anchors come from the users of
///    nodes already matched (torch.fx tries every graph node for every anchor,
///    a product of candidate lists); the cycle check only walks nodes placed
///    before the last matched node (torch.fx walks recursively from the
///    match's users to the end of the graph, per match: quadratic, and deeper
///    than Python's recursion limit on long graphs).
///  - a failed partial match is undone exactly (torch.fx keeps the bindings
///    of a failed sub-walk in the shared dict).
///  - placeholders bind lists and literals (torch 1.13 flattens args, so a
///    placeholder can never stand for a list); ignore_literals (newer
///    torch.fx) is supported: pattern literals match any graph literal.
///  - kwargs compare as dicts (any order), args lists and tuples as sequences.
///  - a pattern call_function target without overload ("aten::add") matches
///    every overload of that operator ("aten::add.Tensor", as tracing records
///    it); with an overload, targets must be equal (torch.fx compares the
///    target objects, so torch.add never matches torch.ops.aten.add.Tensor).
///  - bad patterns (empty, no output, dead code, nothing to anchor on) throw
///    fx::Error naming the node instead of asserting.

#include <fx/error.h>
#include <fx/graph.h>

#include <cstddef>
#include <utility>
#include <vector>

namespace fx {

/// Maps nodes of the pattern to what they matched in the graph, in the
/// order they were bound (torch.fx's `nodes_map` dict). Compute nodes map to
/// graph nodes; a placeholder maps to a graph node or to a literal/list.
class NodesMap {
 public:
  /// One binding: pattern node, matched value.
  using Entry = std::pair<Node*, Argument>;

  /// The value bound to `pattern_node`, or nullptr.
  const Argument* find(const Node* pattern_node) const;
  /// The value bound to `pattern_node`; throws fx::Error if unbound.
  const Argument& at(const Node* pattern_node) const;
  /// The graph node bound to `pattern_node`; nullptr if unbound or bound to a literal.
  Node* node(const Node* pattern_node) const;
  /// Binds (or rebinds) `pattern_node`.
  void set(Node* pattern_node, Argument value);
  /// Number of bindings.
  size_t size() const { return entries_.size(); }
  /// Whether nothing is bound.
  bool empty() const { return entries_.empty(); }
  /// The bindings in order.
  std::vector<Entry>::const_iterator begin() const { return entries_.begin(); }
  /// End of the bindings.
  std::vector<Entry>::const_iterator end() const { return entries_.end(); }
  /// The bindings in order, as a vector.
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  std::vector<Entry> entries_;
};

/// One match of a pattern in a graph (torch.fx InternalMatch).
struct InternalMatch {
  /// The pattern's anchors (pattern nodes) the match was found from.
  std::vector<Node*> anchors;
  /// Pattern node → graph value.
  NodesMap nodes_map;
  /// What each pattern placeholder matched, in placeholder order (a graph
  /// node, or a literal / list when the pattern placeholder stood for one).
  std::vector<Argument> placeholder_nodes;
  /// The graph nodes matched by the values the pattern returns, in the
  /// order of the pattern output's inputs.
  std::vector<Node*> returning_nodes;
};

/// Finds a pattern graph inside other graphs (torch.fx SubgraphMatcher).
class SubgraphMatcher {
 public:
  /// Prepares matching of `pattern` (which must outlive the matcher and the
  /// matches). With match_output the pattern's output node must match an
  /// output node; with match_placeholder pattern placeholders only match
  /// placeholders; remove_overlapping_matches keeps the first of
  /// overlapping matches; ignore_literals lets pattern literals match any
  /// graph literal. Throws fx::Error for an empty pattern, one without an
  /// output node, one with dead code (a node nobody uses, named), or one
  /// that returns no computed value.
  explicit SubgraphMatcher(const Graph& pattern, bool match_output = false, bool match_placeholder = false,
                           bool remove_overlapping_matches = true, bool ignore_literals = false);

  /// Every match in `graph`, ordered by the position of the graph node the
  /// first anchor matched (then the next anchor's, ...), as torch.fx orders them.
  std::vector<InternalMatch> match(const Graph& graph) const;

  /// The pattern.
  const Graph& pattern() const { return pattern_; }
  /// The pattern's placeholders, in order.
  const std::vector<Node*>& pattern_placeholder_nodes() const { return placeholders_; }
  /// The pattern nodes its output returns (torch.fx pattern_returning_nodes).
  const std::vector<Node*>& pattern_returning_nodes() const { return returning_; }
  /// The pattern nodes matching starts from (torch.fx pattern_anchors).
  const std::vector<Node*>& pattern_anchors() const { return anchors_; }

 private:
  friend class MatchRun;
  const Graph& pattern_;
  bool match_output_;
  bool match_placeholder_;
  bool remove_overlapping_matches_;
  bool ignore_literals_;
  std::vector<Node*> placeholders_;
  std::vector<Node*> returning_;
  std::vector<Node*> anchors_;
  std::vector<char> is_returning_;  // by pattern node id
  /// For anchor i > 0: pattern nodes that reach it, with the shortest path
  /// length, so candidates can come from users of an already matched node.
  std::vector<std::vector<std::pair<Node*, int>>> anchor_sources_;
};

}  // namespace fx
