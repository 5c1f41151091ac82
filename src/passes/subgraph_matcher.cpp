// SubgraphMatcher: backtracking pattern matching over use-def edges
// (torch.fx passes/utils/matcher_utils.py), linear in the graph.
#include <fx/passes/subgraph_matcher.h>

#include <algorithm>
#include <cstdint>
#include <deque>

namespace fx {

// ---- NodesMap ---------------------------------------------------------------

const Argument* NodesMap::find(const Node* pattern_node) const {
  for (const Entry& e : entries_)
    if (e.first == pattern_node) return &e.second;
  return nullptr;
}

const Argument& NodesMap::at(const Node* pattern_node) const {
  if (const Argument* a = find(pattern_node)) return *a;
  throw Error("NodesMap: pattern node " + pattern_node->name() + " is not bound");
}

Node* NodesMap::node(const Node* pattern_node) const {
  const Argument* a = find(pattern_node);
  return a && a->is_node() ? a->to_node() : nullptr;
}

void NodesMap::set(Node* pattern_node, Argument value) {
  for (Entry& e : entries_)
    if (e.first == pattern_node) {
      e.second = std::move(value);
      return;
    }
  entries_.emplace_back(pattern_node, std::move(value));
}

// ---- SubgraphMatcher ----------------------------------------------------------

SubgraphMatcher::SubgraphMatcher(const Graph& pattern, bool match_output, bool match_placeholder,
                                 bool remove_overlapping_matches, bool ignore_literals)
    : pattern_(pattern),
      match_output_(match_output),
      match_placeholder_(match_placeholder),
      remove_overlapping_matches_(remove_overlapping_matches),
      ignore_literals_(ignore_literals) {
  if (pattern.nodes().empty()) throw Error("SubgraphMatcher cannot be initialized with an empty pattern");
  Node* last = nullptr;
  for (Node* n : pattern.nodes()) last = n;
  if (last->op() != Opcode::Output)
    throw Error("SubgraphMatcher: the pattern has no output node (its last node is " + last->format_node() + ")");
  for (Node* n : pattern.nodes()) {
    if (n->op() == Opcode::Output) continue;
    if (n->users().empty())
      throw Error("SubgraphMatcher cannot be initialized with an pattern with dead code: " + n->format_node());
    if (n->op() == Opcode::Placeholder) placeholders_.push_back(n);
  }
  returning_ = last->all_input_nodes();
  if (returning_.empty()) throw Error("SubgraphMatcher: the pattern returns no node: " + last->format_node());
  is_returning_.assign(pattern.max_node_id(), 0);
  for (Node* r : returning_) is_returning_[r->id()] = 1;

  if (match_output) {
    anchors_ = {last};
  } else {
    for (Node* r : returning_)
      if (r->users().size() == 1) anchors_.push_back(r);
  }
  for (Node* a : anchors_)
    if (a->op() == Opcode::Placeholder)
      throw Error("SubgraphMatcher: the pattern returns its input %" + a->name() +
                  " unchanged; there is nothing to anchor a match on");
  if (anchors_.empty()) throw Error("SubgraphMatcher: the pattern has no anchor: " + last->format_node());

  // For anchor i > 0: the pattern nodes already bound when it is tried (the
  // backward closure of anchors 0..i-1) that reach it, nearest first.
  const size_t ids = pattern.max_node_id();
  std::vector<char> closure(ids, 0);
  auto add_closure = [&](Node* a) {
    std::vector<Node*> stack{a};
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      if (closure[n->id()]) continue;
      closure[n->id()] = 1;
      for (Node* in : n->all_input_nodes()) stack.push_back(in);
    }
  };
  anchor_sources_.resize(anchors_.size());
  for (size_t i = 0; i < anchors_.size(); ++i) {
    if (i > 0) {
      std::vector<int> dist(ids, -1);
      std::deque<Node*> queue{anchors_[i]};
      dist[anchors_[i]->id()] = 0;
      while (!queue.empty()) {
        Node* n = queue.front();
        queue.pop_front();
        if (closure[n->id()]) anchor_sources_[i].emplace_back(n, dist[n->id()]);
        for (Node* in : n->all_input_nodes())
          if (dist[in->id()] < 0) {
            dist[in->id()] = dist[n->id()] + 1;
            queue.push_back(in);
          }
      }
    }
    add_closure(anchors_[i]);
  }
}

// One call of SubgraphMatcher::match: the binding state with an undo trail.
class MatchRun {
 public:
  MatchRun(const SubgraphMatcher& m, const Graph& g) : m_(m), g_(g) {
    const size_t pids = m.pattern_.max_node_id(), gids = g.max_node_id();
    pbind_.resize(pids);
    pbound_.assign(pids, 0);
    gmark_.assign(gids, 0);
    pos_.assign(gids, 0);
    seen_.assign(gids, 0);
    cands_.resize(m.anchors_.size());
    int64_t p = 0;
    for (Node* n : g.nodes()) {
      pos_[n->id()] = p++;
      for (size_t i = 0; i < m.anchors_.size(); ++i)
        if (nodes_equal(m.anchors_[i], n)) cands_[i].push_back(n);
    }
  }

  std::vector<InternalMatch> run() {
    backtrack(0);
    if (!m_.remove_overlapping_matches_) return std::move(found_);
    std::vector<char> claimed(g_.max_node_id(), 0);
    std::vector<InternalMatch> kept;
    for (InternalMatch& match : found_) {
      bool overlap = false;
      for (const auto& [pn, v] : match.nodes_map)
        if (is_compute(pn) && v.is_node() && claimed[v.to_node()->id()]) {
          overlap = true;
          break;
        }
      if (overlap) continue;
      for (const auto& [pn, v] : match.nodes_map)
        if (is_compute(pn) && v.is_node()) claimed[v.to_node()->id()] = 1;
      kept.push_back(std::move(match));
    }
    return kept;
  }

 private:
  static bool is_compute(const Node* pn) { return pn->op() != Opcode::Placeholder && pn->op() != Opcode::Output; }

  bool nodes_equal(const Node* pn, const Node* gn) const {
    if (!m_.match_placeholder_ && pn->op() == Opcode::Placeholder) return true;
    if (pn->op() != gn->op()) return false;
    if (pn->op() == Opcode::Placeholder || pn->op() == Opcode::Output) return true;
    if (pn->target() == gn->target()) return true;
    // An operator without overload in the pattern ("aten::add") matches every
    // overload of it in the graph ("aten::add.Tensor", what tracing records).
    if (pn->op() != Opcode::CallFunction) return false;
    const std::string& p = pn->target();
    const std::string& g = gn->target();
    const size_t ns = p.find("::");
    return ns != std::string::npos && p.find('.', ns) == std::string::npos && g.size() > p.size() &&
           g.compare(0, p.size(), p) == 0 && g[p.size()] == '.';
  }

  void bind(Node* pn, Argument v, char mark) {
    if (v.is_node()) gmark_[v.to_node()->id()] = mark;
    pbind_[pn->id()] = std::move(v);
    pbound_[pn->id()] = 1;
    trail_.push_back(pn);
  }

  void undo(size_t mark) {
    while (trail_.size() > mark) {
      Node* pn = trail_.back();
      trail_.pop_back();
      Argument& v = pbind_[pn->id()];
      if (v.is_node()) gmark_[v.to_node()->id()] = 0;
      v = Argument();
      pbound_[pn->id()] = 0;
    }
  }

  bool match_nodes(Node* pn, Node* gn) {
    if (pbound_[pn->id()]) {
      const Argument& b = pbind_[pn->id()];
      return b.is_node() && b.to_node() == gn;
    }
    if (gmark_[gn->id()]) return false;
    if (!nodes_equal(pn, gn)) return false;
    const size_t mark = trail_.size();
    const bool placeholder = pn->op() == Opcode::Placeholder;
    bind(pn, Argument(gn), placeholder ? 1 : 2);
    if (placeholder) return true;
    bool ok = match_seq(pn->args(), gn->args()) && pn->kwargs().size() == gn->kwargs().size();
    for (size_t i = 0; ok && i < pn->kwargs().size(); ++i) {
      const Argument* g = find_kwarg(gn->kwargs(), pn->kwargs()[i].first);
      ok = g && match_args(pn->kwargs()[i].second, *g);
    }
    if (!ok) undo(mark);
    return ok;
  }

  bool match_seq(const std::vector<Argument>& pa, const std::vector<Argument>& ga) {
    if (pa.size() != ga.size()) return false;
    for (size_t i = 0; i < pa.size(); ++i)
      if (!match_args(pa[i], ga[i])) return false;
    return true;
  }

  bool match_args(const Argument& pa, const Argument& ga) {
    if (pa.is_node() && ga.is_node()) return match_nodes(pa.to_node(), ga.to_node());
    if (pa.is_sequence() && ga.is_sequence()) return match_seq(pa.items(), ga.items());
    if (pa.is_dict() && ga.is_dict()) {
      const Kwargs& pd = pa.dict_items();
      const Kwargs& gd = ga.dict_items();
      if (pd.size() != gd.size()) return false;
      for (const auto& [k, v] : pd) {
        const Argument* g = find_kwarg(gd, k);
        if (!g || !match_args(v, *g)) return false;
      }
      return true;
    }
    if (pa.is_node()) {
      // A placeholder stands for any value, lists and literals included.
      Node* pn = pa.to_node();
      if (pn->op() != Opcode::Placeholder) return false;
      if (pbound_[pn->id()]) return pbind_[pn->id()] == ga;
      bind(pn, ga, 1);
      return true;
    }
    if (ga.is_node()) return false;
    if (m_.ignore_literals_) return true;
    return pa == ga;
  }

  void backtrack(size_t i) {
    if (i == m_.anchors_.size()) {
      record();
      return;
    }
    Node* anchor = m_.anchors_[i];
    const std::vector<Node*>* candidates = &cands_[i];
    std::vector<Node*> derived;
    for (const auto& [source, dist] : m_.anchor_sources_[i]) {
      const Argument& b = pbind_[source->id()];
      if (!b.is_node()) continue;
      // The anchor's match is `dist` use edges below what `source` matched.
      std::vector<Node*> level{b.to_node()};
      for (int d = 0; d < dist; ++d) {
        ++epoch_;
        std::vector<Node*> next;
        for (Node* n : level)
          for (Node* u : n->users())
            if (seen_[u->id()] != epoch_) {
              seen_[u->id()] = epoch_;
              next.push_back(u);
            }
        level.swap(next);
      }
      for (Node* n : level)
        if (nodes_equal(anchor, n)) derived.push_back(n);
      std::sort(derived.begin(), derived.end(), [&](Node* a, Node* b) { return pos_[a->id()] < pos_[b->id()]; });
      candidates = &derived;
      break;
    }
    for (Node* gn : *candidates) {
      const size_t mark = trail_.size();
      if (match_nodes(anchor, gn)) backtrack(i + 1);
      undo(mark);
    }
  }

  // No inner node may be used outside the match (returned nodes may).
  bool contained() const {
    for (Node* pn : trail_) {
      if (pn->op() == Opcode::Placeholder || m_.is_returning_[pn->id()]) continue;
      const Argument& b = pbind_[pn->id()];
      for (Node* user : b.to_node()->users())
        if (gmark_[user->id()] != 2) return false;
    }
    return true;
  }

  // Fusing the matched nodes must not form a cycle: no path may leave the
  // match and come back. Such a path lies before the last matched node.
  bool acyclic() {
    int64_t last = -1;
    for (Node* pn : trail_)
      if (is_compute(pn)) last = std::max(last, pos_[pbind_[pn->id()].to_node()->id()]);
    ++epoch_;
    std::vector<Node*> stack;
    for (Node* pn : trail_) {
      if (!is_compute(pn)) continue;
      for (Node* u : pbind_[pn->id()].to_node()->users())
        if (gmark_[u->id()] != 2 && seen_[u->id()] != epoch_) {
          seen_[u->id()] = epoch_;
          stack.push_back(u);
        }
    }
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      if (pos_[n->id()] > last) continue;
      for (Node* u : n->users()) {
        if (gmark_[u->id()] == 2) return false;
        if (seen_[u->id()] != epoch_) {
          seen_[u->id()] = epoch_;
          stack.push_back(u);
        }
      }
    }
    return true;
  }

  void record() {
    if (!contained() || !acyclic()) return;
    InternalMatch match;
    match.anchors = m_.anchors_;
    for (Node* pn : trail_) match.nodes_map.set(pn, pbind_[pn->id()]);
    for (Node* p : m_.placeholders_) match.placeholder_nodes.push_back(pbind_[p->id()]);
    for (Node* r : m_.returning_) match.returning_nodes.push_back(pbind_[r->id()].to_node());
    found_.push_back(std::move(match));
  }

  const SubgraphMatcher& m_;
  const Graph& g_;
  std::vector<Argument> pbind_;  // by pattern node id
  std::vector<char> pbound_;     // by pattern node id
  std::vector<char> gmark_;      // by graph node id: 1 bound to a placeholder, 2 to a compute node
  std::vector<Node*> trail_;     // pattern nodes in binding order
  std::vector<int64_t> pos_;     // by graph node id: position in the graph
  std::vector<uint32_t> seen_;   // by graph node id: epoch of the last visit
  uint32_t epoch_ = 0;
  std::vector<std::vector<Node*>> cands_;  // by anchor: graph nodes of the anchor's kind
  std::vector<InternalMatch> found_;
};

std::vector<InternalMatch> SubgraphMatcher::match(const Graph& graph) const {
  MatchRun run(*this, graph);
  return run.run();
}

}  // namespace fx
