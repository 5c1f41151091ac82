// fuse_by_partitions and helpers (torch.fx passes/utils/fuser_utils.py).
#include <fx/passes/fuser_utils.h>
#include <fx/passes/split_utils.h>

#include <deque>
#include <unordered_map>
#include <unordered_set>

namespace fx {

namespace {

/// Position of every node of `g` in program order, indexed by Node::id().
std::vector<size_t> positions(const Graph& g) {
  std::vector<size_t> pos(g.max_node_id(), 0);
  size_t i = 0;
  for (Node* n : g.nodes()) pos[n->id()] = i++;
  return pos;
}

std::string names_of(const NodeList& nodes, size_t limit = 8) {
  std::string s;
  for (size_t i = 0; i < nodes.size() && i < limit; ++i) s += (i ? ", " : "") + nodes[i]->name();
  if (nodes.size() > limit) s += ", ...";
  return s;
}

/// Checks that fusing every partition (each into one node) leaves the graph
/// acyclic: a topological sort of the quotient graph, in O(nodes + uses).
/// Throws fx::Error naming a cycle's edges otherwise.
void check_acyclic(const Graph& g, const std::vector<NodeList>& partitions, const char* who) {
  const size_t max_id = g.max_node_id();
  const size_t num_parts = partitions.size();
  std::vector<size_t> group(max_id, 0);
  size_t groups = num_parts;
  std::vector<uint8_t> in_part(max_id, 0);
  for (size_t p = 0; p < num_parts; ++p)
    for (Node* n : partitions[p]) {
      group[n->id()] = p;
      in_part[n->id()] = 1;
    }
  std::vector<Node*> singles;
  for (Node* n : g.nodes())
    if (!in_part[n->id()]) {
      group[n->id()] = groups++;
      singles.push_back(n);
    }
  auto members = [&](size_t gi, const std::function<void(Node*)>& f) {
    if (gi < num_parts) {
      for (Node* n : partitions[gi]) f(n);
    } else {
      f(singles[gi - num_parts]);
    }
  };
  std::vector<size_t> indeg(groups, 0);
  for (Node* n : g.nodes())
    for (Node* u : n->users())
      if (group[u->id()] != group[n->id()]) ++indeg[group[u->id()]];
  std::vector<size_t> ready;
  for (size_t gi = 0; gi < groups; ++gi)
    if (indeg[gi] == 0) ready.push_back(gi);
  size_t done = 0;
  while (!ready.empty()) {
    size_t gi = ready.back();
    ready.pop_back();
    ++done;
    members(gi, [&](Node* n) {
      for (Node* u : n->users()) {
        size_t gu = group[u->id()];
        if (gu != gi && --indeg[gu] == 0) ready.push_back(gu);
      }
    });
  }
  if (done == groups) return;
  // Every group left has a predecessor left: walk predecessors to a cycle.
  size_t start = 0;
  while (indeg[start] == 0) ++start;
  std::vector<std::pair<Node*, Node*>> edges;  // (input, user), walked backwards
  std::unordered_map<size_t, size_t> seen;
  size_t cur = start;
  while (!seen.count(cur)) {
    seen[cur] = edges.size();
    std::pair<Node*, Node*> e{nullptr, nullptr};
    members(cur, [&](Node* n) {
      if (e.first) return;
      for (Node* in : n->all_input_nodes())
        if (group[in->id()] != cur && indeg[group[in->id()]] != 0) {
          e = {in, n};
          return;
        }
    });
    edges.push_back(e);
    cur = group[e.first->id()];
  }
  std::string cycle;
  for (size_t i = edges.size(); i-- > seen[cur];) {
    const auto& e = edges[i];
    auto label = [&](Node* n) {
      size_t gi = group[n->id()];
      return "%" + n->name() + (gi < num_parts ? " (partition " + std::to_string(gi) + ")" : "");
    };
    cycle += "\n  " + label(e.first) + " -> " + label(e.second);
  }
  throw Error(std::string(who) + ": Invalid partition, found dependency cycles; fusing would make this cycle:" + cycle);
}

/// Checks that every node is a live, fusable node of `g`, in one partition only.
void check_nodes(const Graph& g, const std::vector<NodeList>& partitions, const char* who) {
  std::unordered_map<const Node*, size_t> owner;
  for (size_t p = 0; p < partitions.size(); ++p)
    for (Node* n : partitions[p]) {
      if (!n) throw Error(std::string(who) + ": partition " + std::to_string(p) + " holds a null node");
      if (&n->graph() != &g)
        throw Error(std::string(who) + ": " + n->name() + " doesn't belong to the passed in graph module");
      if (n->is_erased()) throw Error(std::string(who) + ": " + n->name() + " has been removed from owning graph");
      if (n->op() == Opcode::Placeholder || n->op() == Opcode::Output)
        throw Error(std::string(who) + ": " + n->name() + " is a " + to_string(n->op()) + " node and cannot be fused");
      auto [it, fresh] = owner.emplace(n, p);
      if (!fresh)
        throw Error(std::string(who) + ": " + n->name() + " is in partition " + std::to_string(it->second) +
                    " and in partition " + std::to_string(p));
    }
}

/// fuse_as_graphmodule without validation; `nodes` sorted topologically.
FusedGraphModule build_fused(const std::shared_ptr<GraphModule>& gm, const NodeList& nodes,
                             const std::string& module_name) {
  std::unordered_set<const Node*> in_nodes(nodes.begin(), nodes.end());
  auto subgraph = std::make_shared<Graph>();
  std::unordered_map<const Node*, Node*> node_map, node_to_placeholder;
  FusedGraphModule r;
  auto remap = [&](Node* x) -> Argument {
    if (in_nodes.count(x)) return node_map.at(x);
    auto it = node_to_placeholder.find(x);
    if (it == node_to_placeholder.end()) {
      Node* ph = subgraph->placeholder(x->name());
      const Meta& meta = static_cast<const Node*>(x)->meta();
      if (!meta.empty()) ph->meta() = meta;
      it = node_to_placeholder.emplace(x, ph).first;
      r.original_inputs.push_back(x);
    }
    return it->second;
  };
  for (Node* n : nodes) node_map[n] = subgraph->node_copy(n, remap);
  std::vector<Argument> outs;
  for (Node* n : nodes)
    for (Node* u : n->users())
      if (!in_nodes.count(u)) {
        r.original_outputs.push_back(n);
        outs.push_back(node_map.at(n));
        break;
      }
  subgraph->output(outs.size() == 1 ? outs[0] : Argument::tuple(outs));
  subgraph->lint();
  r.module = std::make_shared<GraphModule>(gm, subgraph, module_name);  // lift_subgraph_as_module
  return r;
}

/// The call_module node and getitems of insert_subgm (the module is installed already).
void call_subgm(GraphModule& gm, const std::string& name, const NodeList& orig_inputs, const NodeList& orig_outputs);

NodeList sorted_by_position(const NodeList& nodes, const std::vector<size_t>& pos) {
  NodeList s = nodes;
  std::stable_sort(s.begin(), s.end(), [&](Node* a, Node* b) { return pos[a->id()] < pos[b->id()]; });
  return s;
}

}  // namespace

NodeList topo_sort(const NodeList& nodes) {
  std::unordered_map<const Node*, size_t> indegree;
  for (Node* n : nodes) indegree.emplace(n, 0);
  std::deque<Node*> candidates;
  for (Node* n : nodes) {
    for (Node* in : n->all_input_nodes())
      if (indegree.count(in)) ++indegree[n];
    if (indegree[n] == 0) candidates.push_back(n);
  }
  NodeList sorted;
  while (!candidates.empty()) {
    Node* n = candidates.front();
    candidates.pop_front();
    sorted.push_back(n);
    for (Node* u : n->users()) {
      auto it = indegree.find(u);
      if (it != indegree.end() && --it->second == 0) candidates.push_back(u);
    }
  }
  if (sorted.size() != indegree.size())
    throw Error("topo_sort: the nodes depend on each other in a cycle (" + names_of(nodes) + ")");
  return sorted;
}

bool validate_partition(const NodeList& partition) {
  if (partition.empty()) return true;
  const Graph& g = partition.front()->graph();
  try {
    check_acyclic(g, {partition}, "validate_partition");
  } catch (const Error&) {
    return false;
  }
  return true;
}

FusedGraphModule fuse_as_graphmodule(const std::shared_ptr<GraphModule>& gm, const NodeList& nodes,
                                     const std::string& module_name) {
  if (!gm) throw Error("fuse_as_graphmodule: graph module is null");
  check_nodes(gm->graph(), {nodes}, "fuse_as_graphmodule");
  check_acyclic(gm->graph(), {nodes}, "fuse_as_graphmodule");
  return build_fused(gm, topo_sort(nodes), module_name);
}

void insert_subgm(GraphModule& gm, const std::shared_ptr<GraphModule>& sub_gm, const NodeList& orig_inputs,
                  const NodeList& orig_outputs) {
  const std::string name = sub_gm->class_name();
  if (!gm.add_submodule(name, sub_gm))
    throw Error("insert_subgm: cannot install submodule " + name + ": a non-module attribute is in the way");
  call_subgm(gm, name, orig_inputs, orig_outputs);
}

namespace {

void call_subgm(GraphModule& gm, const std::string& name, const NodeList& orig_inputs, const NodeList& orig_outputs) {
  Graph& g = gm.graph();
  auto guard = g.inserting_before(g.output_node());
  ArgList args(orig_inputs.begin(), orig_inputs.end());
  Node* module_node = g.call_module(name, std::move(args));
  if (orig_outputs.size() == 1) {
    orig_outputs[0]->replace_all_uses_with(module_node);
  } else {
    for (size_t i = 0; i < orig_outputs.size(); ++i) {
      Node* out = g.call_function("operator.getitem", {module_node, static_cast<int64_t>(i)});
      orig_outputs[i]->replace_all_uses_with(out);
    }
  }
}

}  // namespace

void erase_nodes(GraphModule& gm, const NodeList& nodes) {
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) gm.graph().erase_node(*it);
}

void legalize_graph(GraphModule& gm) {
  const Graph& g = gm.graph();
  std::vector<size_t> indeg(g.max_node_id(), 0);
  for (Node* n : g.nodes())
    for (Node* u : n->users()) ++indeg[u->id()];
  std::deque<Node*> queue;
  for (Node* n : g.nodes())
    if (indeg[n->id()] == 0) queue.push_back(n);
  auto new_graph = std::make_shared<Graph>();
  std::vector<Node*> env(g.max_node_id(), nullptr);
  size_t copied = 0;
  Node* output = nullptr;  // emitted last, even if dead nodes become ready after it
  while (!queue.empty() || output) {
    Node* cur = nullptr;
    if (queue.empty()) {
      cur = output;
      output = nullptr;
    } else {
      cur = queue.front();
      queue.pop_front();
      if (cur->op() == Opcode::Output && !queue.empty()) {
        output = cur;
        continue;
      }
    }
    env[cur->id()] = new_graph->node_copy(cur, [&](Node* x) -> Argument { return env[x->id()]; });
    ++copied;
    for (Node* u : cur->users())
      if (--indeg[u->id()] == 0) queue.push_back(u);
  }
  if (copied < g.nodes().size()) {
    NodeList left;
    for (Node* n : g.nodes())
      if (indeg[n->id()] != 0) left.push_back(n);
    throw Error("legalize_graph: Input graph has cycles, unable to add [" + names_of(left) + "]");
  }
  gm.set_graph(new_graph);
}

std::shared_ptr<GraphModule> fuse_by_partitions(const std::shared_ptr<GraphModule>& gm,
                                                const std::vector<NodeList>& partitions) {
  if (!gm) throw Error("fuse_by_partitions: graph module is null");
  Graph& g = gm->graph();
  // Validate everything before the first edit.
  check_nodes(g, partitions, "fuse_by_partitions");
  for (size_t i = 0; i < partitions.size(); ++i) {
    const std::string name = "fused_" + std::to_string(i);
    if (has_attr_recursive(*gm, name))
      throw Error("fuse_by_partitions: the module already has an attribute " + name +
                  " (fuse the partitions of one pass in one call)");
  }
  check_acyclic(g, partitions, "fuse_by_partitions");
  if (!g.output_node()) throw Error("fuse_by_partitions: the graph has no output node");

  const std::vector<size_t> pos = positions(g);
  for (size_t i = 0; i < partitions.size(); ++i) {
    if (partitions[i].empty()) continue;
    NodeList sorted = sorted_by_position(partitions[i], pos);  // program order is topological
    FusedGraphModule f = build_fused(gm, sorted, "fused_" + std::to_string(i));
    // The name is known to be free (checked above): register it directly,
    // as add_submodule's lookup by name costs O(children) in libtorch.
    gm->register_module(f.module->class_name(), f.module);
    call_subgm(*gm, f.module->class_name(), f.original_inputs, f.original_outputs);
    erase_nodes(*gm, sorted);
  }
  legalize_graph(*gm);
  return gm;
}

}  // namespace fx
