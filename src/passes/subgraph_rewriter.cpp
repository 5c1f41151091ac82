// Subgraph rewriter: replace_pattern / replace_pattern_with_filters
// (torch.fx subgraph_rewriter.py), validated up front, linear in the graph.
#include <fx/passes/subgraph_rewriter.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

namespace fx {
namespace {

std::string placeholder_names(const std::vector<Node*>& nodes) {
  std::string s;
  for (Node* n : nodes) s += (s.empty() ? "" : ", ") + n->name();
  return s;
}

std::string plural(size_t n, const char* word) { return std::to_string(n) + " " + word + (n == 1 ? "" : "s"); }

// Whether `m` has what a call_module / get_attr node with `target` refers to.
bool has_target(const GraphModule& m, Opcode op, const std::string& target) {
  if (op == Opcode::GetAttr) {
    try {
      m.fetch_attr(target);
      return true;
    } catch (const Error&) {
    }
  }
  try {
    m.get_submodule(target);
    return true;
  } catch (const Error&) {
    return false;
  }
}

// Order labels of graph nodes, kept valid across insertions (new nodes get
// labels between their neighbours; everything is renumbered when a gap runs out).
class Order {
 public:
  explicit Order(Graph& g) : g_(g) { renumber(); }
  void renumber() {
    pos_.assign(g_.max_node_id(), 0);
    int64_t p = 0;
    for (Node* n : g_.nodes()) {
      pos_[n->id()] = p;
      p += kGap;
    }
  }
  int64_t of(const Node* n) const { return pos_[n->id()]; }
  // Labels `block`, nodes just inserted contiguously in the graph.
  void label(const std::vector<Node*>& block) {
    if (block.empty()) return;
    if (pos_.size() < g_.max_node_id()) pos_.resize(g_.max_node_id(), 0);
    Node* before = block.front()->prev();
    Node* after = block.back()->next();
    const int64_t lo = before ? of(before) : (after ? of(after) : 0) - kGap;
    const int64_t hi = after ? of(after) : lo + kGap;
    const int64_t step = (hi - lo) / static_cast<int64_t>(block.size() + 1);
    if (step < 1) {
      renumber();
      return;
    }
    for (size_t i = 0; i < block.size(); ++i) pos_[block[i]->id()] = lo + step * static_cast<int64_t>(i + 1);
  }

 private:
  static constexpr int64_t kGap = int64_t(1) << 32;
  Graph& g_;
  std::vector<int64_t> pos_;
};

std::vector<ReplacedPatterns> rewrite(GraphModule& gm, const Graph& pattern, const Graph& replacement,
                                      const GraphModule* replacement_module, const std::vector<MatchFilter>& filters,
                                      bool ignore_literals) {
  Graph& graph = gm.graph();
  // ---- validate everything before the first edit ----
  SubgraphMatcher matcher(pattern, /*match_output=*/false, /*match_placeholder=*/false,
                          /*remove_overlapping_matches=*/true, ignore_literals);
  Node* r_output = nullptr;
  std::vector<Node*> r_placeholders;
  for (Node* n : replacement.nodes()) {
    r_output = n;
    if (n->op() == Opcode::Placeholder) r_placeholders.push_back(n);
  }
  if (!r_output || r_output->op() != Opcode::Output) throw Error("replace_pattern: the replacement has no output node");
  replacement.lint();
  const std::vector<Node*>& p_placeholders = matcher.pattern_placeholder_nodes();
  if (r_placeholders.size() != p_placeholders.size())
    throw Error("replace_pattern: the pattern has " + plural(p_placeholders.size(), "placeholder") + " (" +
                placeholder_names(p_placeholders) + ") but the replacement has " + plural(r_placeholders.size(), "placeholder") +
                " (" + placeholder_names(r_placeholders) + ")");
  const Argument r_result = r_output->args().empty() ? Argument() : r_output->args()[0];
  std::vector<Argument> r_returned = r_result.is_sequence() ? r_result.items() : std::vector<Argument>{r_result};
  const std::vector<Node*>& p_returning = matcher.pattern_returning_nodes();
  if (r_returned.size() != p_returning.size())
    throw Error("replace_pattern: the pattern returns " + plural(p_returning.size(), "value") + " (" +
                placeholder_names(p_returning) + ") but the replacement returns " + plural(r_returned.size(), "value") + ": " +
                r_output->format_node());
  std::vector<int> returned_placeholder(r_returned.size(), -1);  // index into r_placeholders
  for (size_t k = 0; k < r_returned.size(); ++k) {
    if (!r_returned[k].is_node())
      throw Error("replace_pattern: the replacement returns the literal " + r_returned[k].repr() +
                  ", which cannot take over the users of %" + p_returning[k]->name() + ": " + r_output->format_node());
    auto it = std::find(r_placeholders.begin(), r_placeholders.end(), r_returned[k].to_node());
    if (it != r_placeholders.end()) returned_placeholder[k] = static_cast<int>(it - r_placeholders.begin());
  }
  for (Node* n : replacement.nodes()) {
    if (n->op() != Opcode::CallModule && n->op() != Opcode::GetAttr) continue;
    if (has_target(gm, n->op(), n->target())) continue;
    if (replacement_module && has_target(*replacement_module, n->op(), n->target())) continue;
    throw Error(std::string("Attempted to create a \"") + to_string(n->op()) +
                "\" node during subgraph rewriting with target " + n->target() +
                ", but the referenced attribute does not exist in the replacement GraphModule (" + n->format_node() +
                ")");
  }

  std::vector<InternalMatch> matches = matcher.match(graph);
  if (!filters.empty()) {
    std::vector<InternalMatch> kept;
    for (InternalMatch& m : matches)
      if (std::all_of(filters.begin(), filters.end(), [&](const MatchFilter& f) { return f(m, graph, pattern); }))
        kept.push_back(std::move(m));
    matches.swap(kept);
  }
  for (const InternalMatch& m : matches)
    for (size_t k = 0; k < r_returned.size(); ++k)
      if (returned_placeholder[k] >= 0 && !m.placeholder_nodes[returned_placeholder[k]].is_node())
        throw Error("replace_pattern: the replacement returns its input %" + r_returned[k].to_node()->name() +
                    ", which matched the literal " + m.placeholder_nodes[returned_placeholder[k]].repr() + " at %" +
                    m.returning_nodes[k]->name() + "; a literal cannot take over its users");

  // ---- edit ----
  Order order(graph);
  std::vector<Node*> changed(graph.max_node_id(), nullptr);  // replaced returning node -> its replacement
  auto resolve = [&](Node* n) -> Argument {
    while (n->id() < changed.size() && changed[n->id()]) n = changed[n->id()];
    return n;
  };
  std::vector<uint32_t> stamp(graph.max_node_id(), 0);
  uint32_t epoch = 0;
  std::vector<Argument> r_values(replacement.max_node_id());
  std::vector<ReplacedPatterns> result;
  result.reserve(matches.size());
  const std::vector<Node*> p_nodes = pattern.nodes().to_vector();

  for (InternalMatch& match : matches) {
    // Inputs: what the pattern placeholders matched, through earlier replacements
    // (also inside lists: pytorch/pytorch#159613).
    int64_t last_input = std::numeric_limits<int64_t>::min();
    for (size_t j = 0; j < p_placeholders.size(); ++j) {
      Argument v = map_arg(match.placeholder_nodes[j], resolve);
      for_each_node(v, [&](Node* n) { last_input = std::max(last_input, order.of(n)); });
      match.placeholder_nodes[j] = v;
      match.nodes_map.set(p_placeholders[j], v);
      r_values[r_placeholders[j]->id()] = std::move(v);
    }
    // Where the copy goes: before the first user of the returned nodes (torch.fx),
    // unless an input comes later; then after the last matched node, with the
    // users before it moved after the copy.
    ++epoch;
    Node* first_user = nullptr;
    Node* last_matched = nullptr;
    for (const auto& [pn, v] : match.nodes_map)
      if (pn->op() != Opcode::Placeholder) {
        Node* gn = v.to_node();
        stamp[gn->id()] = epoch;  // in the match
        if (!last_matched || order.of(gn) > order.of(last_matched)) last_matched = gn;
      }
    for (Node* r : match.returning_nodes)
      for (Node* u : r->users())
        if (!first_user || order.of(u) < order.of(first_user)) first_user = u;
    std::vector<Node*> to_move;
    const bool in_place = first_user && last_input < order.of(first_user);
    if (!in_place) {
      std::vector<Node*> stack;
      auto push_users = [&](Node* n) {
        for (Node* u : n->users())
          if (stamp[u->id()] != epoch && order.of(u) < order.of(last_matched)) {
            stamp[u->id()] = epoch;
            stack.push_back(u);
            to_move.push_back(u);
          }
      };
      for (Node* r : match.returning_nodes) push_users(r);
      while (!stack.empty()) {
        Node* n = stack.back();
        stack.pop_back();
        push_users(n);
      }
      std::sort(to_move.begin(), to_move.end(), [&](Node* a, Node* b) { return order.of(a) < order.of(b); });
    }

    std::vector<Node*> added;
    Argument copied;
    {
      Node* after_last = last_matched->next();
      auto guard = in_place || after_last ? graph.inserting_before(in_place ? first_user : after_last)
                                          : graph.inserting_after(nullptr);
      auto lookup = [&](Node* n) -> Argument { return r_values[n->id()]; };
      for (Node* n : replacement.nodes()) {
        if (n->op() == Opcode::Placeholder) continue;
        if (n->op() == Opcode::Output) {
          copied = map_arg(r_result, lookup);
          break;
        }
        Node* c = graph.node_copy(n, lookup);
        r_values[n->id()] = c;
        added.push_back(c);
      }
    }
    if (changed.size() < graph.max_node_id()) {
      changed.resize(graph.max_node_id(), nullptr);
      stamp.resize(graph.max_node_id(), 0);
    }
    Node* tail = added.empty() ? last_matched : added.back();
    for (Node* n : to_move) {
      tail->append(n);
      tail = n;
    }
    const std::vector<Argument> copied_items = copied.is_sequence() ? copied.items() : std::vector<Argument>{copied};
    for (size_t k = 0; k < match.returning_nodes.size(); ++k) {
      Node* gn = match.returning_nodes[k];
      Node* with = copied_items[k].to_node();
      gn->replace_all_uses_with(with);
      changed[gn->id()] = with;
    }
    for (auto it = p_nodes.rbegin(); it != p_nodes.rend(); ++it)
      if ((*it)->op() != Opcode::Placeholder && (*it)->op() != Opcode::Output)
        graph.erase_node(match.nodes_map.node(*it));
    if (in_place)
      order.label(added);
    else
      order.renumber();
    result.push_back(ReplacedPatterns{match.anchors.front(), std::move(match.nodes_map), std::move(added)});
  }

  if (replacement_module) {
    gm.delete_all_unused_submodules();
    for (Node* n : replacement.nodes()) {
      if (n->op() != Opcode::CallModule && n->op() != Opcode::GetAttr) continue;
      if (has_target(gm, n->op(), n->target())) continue;
      if (n->op() == Opcode::GetAttr) {
        try {
          gm.register_attr(n->target(), replacement_module->fetch_attr(n->target()).clone());
          continue;
        } catch (const Error&) {
        }
      }
      std::shared_ptr<torch::nn::Module> sub = replacement_module->get_submodule(n->target());
      std::shared_ptr<torch::nn::Module> copy;
      try {
        copy = sub->clone();
      } catch (const std::exception&) {
        copy = sub;  // not Cloneable: shared
      }
      gm.add_submodule(n->target(), copy);
    }
  }
  graph.lint();
  return result;
}

std::vector<Match> to_matches(std::vector<ReplacedPatterns> replaced) {
  std::vector<Match> out;
  out.reserve(replaced.size());
  for (ReplacedPatterns& r : replaced) out.push_back(Match{r.anchor, std::move(r.nodes_map)});
  return out;
}

}  // namespace

std::vector<Match> replace_pattern(GraphModule& gm, const Graph& pattern, const Graph& replacement) {
  return to_matches(rewrite(gm, pattern, replacement, nullptr, {}, false));
}

std::vector<Match> replace_pattern(GraphModule& gm, const GraphModule& pattern, const GraphModule& replacement) {
  return to_matches(rewrite(gm, pattern.graph(), replacement.graph(), &replacement, {}, false));
}

std::vector<ReplacedPatterns> replace_pattern_with_filters(GraphModule& gm, const Graph& pattern,
                                                           const Graph& replacement,
                                                           const std::vector<MatchFilter>& match_filters,
                                                           bool ignore_literals) {
  return rewrite(gm, pattern, replacement, nullptr, match_filters, ignore_literals);
}

std::vector<ReplacedPatterns> replace_pattern_with_filters(GraphModule& gm, const GraphModule& pattern,
                                                           const GraphModule& replacement,
                                                           const std::vector<MatchFilter>& match_filters,
                                                           bool ignore_literals) {
  return rewrite(gm, pattern.graph(), replacement.graph(), &replacement, match_filters, ignore_literals);
}

PassFn replace_pattern_pass(std::shared_ptr<const GraphModule> pattern,
                            std::shared_ptr<const GraphModule> replacement) {
  return [pattern, replacement](std::shared_ptr<GraphModule> gm) {
    bool modified = !replace_pattern(*gm, *pattern, *replacement).empty();
    return PassResult{gm, modified};
  };
}

}  // namespace fx
