// CapabilityBasedPartitioner (torch.fx passes/infra/partitioner.py) without
// torch.fx's quadratic dependency map.
#include <fx/passes/partitioner.h>
#include <fx/passes/tools_common.h>

#include <algorithm>
#include <queue>
#include <set>
#include <unordered_map>

namespace fx {

namespace {

bool is_getitem(const Node* n) { return n->op() == Opcode::CallFunction && n->target() == "operator.getitem"; }

/// Storage of one partition while proposing. Merging moves the smaller
/// node list into the larger, which takes over the kept partition's id.
struct Slot {
  int64_t id = -1;
  std::set<std::pair<size_t, Node*>> nodes;  // by program position
  size_t min_pos() const { return nodes.begin()->first; }
  size_t max_pos() const { return nodes.rbegin()->first; }
};

/// A user of the node being placed: a partition (slot >= 0) or a lone node.
struct Candidate {
  int64_t slot = -1;
  Node* single = nullptr;
};

}  // namespace

CapabilityBasedPartitioner::CapabilityBasedPartitioner(std::shared_ptr<GraphModule> graph_module,
                                                       std::shared_ptr<const OperatorSupportBase> operator_support,
                                                       bool allows_single_node_partition,
                                                       std::unordered_set<std::string> non_compute_ops)
    : graph_module_(std::move(graph_module)),
      operator_support_(std::move(operator_support)),
      allows_single_node_partition_(allows_single_node_partition),
      non_compute_ops_(std::move(non_compute_ops)) {
  if (!graph_module_) throw Error("CapabilityBasedPartitioner: graph module is null");
  if (!operator_support_) throw Error("CapabilityBasedPartitioner: operator support is null");
}

std::vector<Partition> CapabilityBasedPartitioner::propose_partitions() {
  const Graph& g = graph_module_->graph();
  const size_t max_id = g.max_node_id();
  const std::vector<Node*> order = g.nodes().to_vector();
  std::vector<size_t> pos(max_id, 0);
  for (size_t i = 0; i < order.size(); ++i) pos[order[i]->id()] = i;

  const SubmoduleMap submodules = graph_module_->named_modules();
  std::vector<Node*> candidates;
  for (Node* n : order)
    if (is_callable_node(n) && operator_support_->is_node_supported(submodules, n)) candidates.push_back(n);

  std::vector<Slot> slots;
  std::vector<int64_t> slot_of(max_id, -1);
  int64_t next_id = 0;

  // Scratch for the dependency search, reset after each use (never O(N) per node).
  std::vector<uint64_t> mask(max_id, 0);
  std::vector<uint8_t> queued(max_id, 0);
  std::vector<size_t> touched;
  std::vector<int64_t> slot_cand;  // slot -> candidate index for the current node
  std::vector<uint64_t> slot_stamp;
  uint64_t stamp = 0;

  auto new_slot = [&](Node* n) {
    slots.emplace_back();
    slots.back().id = next_id++;
    slots.back().nodes.emplace(pos[n->id()], n);
    slot_of[n->id()] = static_cast<int64_t>(slots.size() - 1);
    slot_cand.push_back(-1);
    slot_stamp.push_back(0);
  };
  auto add_to = [&](int64_t s, Node* n) {
    // Nodes come last to first, so n is the slot's new first node.
    slots[s].nodes.emplace_hint(slots[s].nodes.begin(), pos[n->id()], n);
    slot_of[n->id()] = s;
  };
  // Merges slot b into the partition of slot a (which keeps its id); returns
  // the slot now holding it. Small into large: a node moves O(log N) times.
  auto merge = [&](int64_t a, int64_t b) {
    int64_t big = slots[a].nodes.size() >= slots[b].nodes.size() ? a : b;
    int64_t small = big == a ? b : a;
    for (const auto& pn : slots[small].nodes) {
      slots[big].nodes.insert(pn);
      slot_of[pn.second->id()] = big;
    }
    slots[big].id = slots[a].id;
    slots[small].nodes.clear();
    slots[small].id = -1;
    return big;
  };

  // Which candidates depend on (are reachable from) another candidate. A
  // path from candidate d to candidate c runs forward in program order, so
  // d's search starts only at its nodes before `bound[d]` (the last node of
  // any other candidate), carries d's bit only up to bound[d], and never
  // through d's own nodes (those are seeds already): the search stays
  // between the candidates instead of walking whole partitions.
  auto find_dependents = [&](const std::vector<Candidate>& cands) {
    const size_t k = cands.size();
    std::vector<bool> depends(k, false);
    std::unordered_map<const Node*, size_t> single_cand;
    std::vector<size_t> lo(k), hi(k);
    for (size_t c = 0; c < k; ++c) {
      if (cands[c].slot >= 0) {
        slot_cand[cands[c].slot] = static_cast<int64_t>(c);
        lo[c] = slots[cands[c].slot].min_pos();
        hi[c] = slots[cands[c].slot].max_pos();
      } else {
        single_cand[cands[c].single] = c;
        lo[c] = hi[c] = pos[cands[c].single->id()];
      }
    }
    // bound[c]: the largest position among the other candidates.
    size_t top1 = 0, top2 = 0, top1_c = k;
    for (size_t c = 0; c < k; ++c) {
      if (top1_c == k || hi[c] > top1) {
        top2 = top1;
        top1 = hi[c];
        top1_c = c;
      } else if (hi[c] > top2) {
        top2 = hi[c];
      }
    }
    auto owner = [&](const Node* w) -> int64_t {
      int64_t s = slot_of[w->id()];
      if (s >= 0) return slot_stamp[s] == stamp ? slot_cand[s] : -1;
      auto it = single_cand.find(w);
      return it == single_cand.end() ? -1 : static_cast<int64_t>(it->second);
    };
    using Item = std::pair<size_t, Node*>;
    for (size_t base = 0; base < k; base += 64) {
      const size_t end = std::min(k, base + 64);
      std::vector<size_t> bound(end - base);
      for (size_t c = base; c < end; ++c) bound[c - base] = c == top1_c ? top2 : top1;
      std::priority_queue<Item, std::vector<Item>, std::greater<Item>> heap;
      auto push = [&](Node* n, uint64_t bits) {
        if (!mask[n->id()] && !queued[n->id()]) touched.push_back(n->id());
        mask[n->id()] |= bits;
        if (!queued[n->id()]) {
          queued[n->id()] = 1;
          heap.emplace(pos[n->id()], n);
        }
      };
      for (size_t c = base; c < end; ++c) {
        const uint64_t bit = uint64_t(1) << (c - base);
        const size_t b = bound[c - base];
        if (lo[c] >= b) continue;  // everything of c comes after the others
        if (cands[c].slot >= 0) {
          for (const auto& [p, n] : slots[cands[c].slot].nodes) {
            if (p >= b) break;
            push(n, bit);
          }
        } else {
          push(cands[c].single, bit);
        }
      }
      while (!heap.empty()) {
        Node* v = heap.top().second;
        heap.pop();
        queued[v->id()] = 0;
        const uint64_t m = mask[v->id()];
        for (Node* w : v->users()) {
          const size_t pw = pos[w->id()];
          uint64_t carry = 0;
          for (uint64_t bits = m; bits; bits &= bits - 1) {
            const size_t c = static_cast<size_t>(__builtin_ctzll(bits));
            if (pw <= bound[c]) carry |= uint64_t(1) << c;
          }
          const int64_t o = owner(w);
          if (o >= 0) {
            const size_t oc = static_cast<size_t>(o);
            if (oc >= base && oc < end) carry &= ~(uint64_t(1) << (oc - base));
            if (carry) depends[oc] = true;
          }
          if (carry && (mask[w->id()] | carry) != mask[w->id()]) push(w, carry);
        }
      }
      for (size_t id : touched) {
        mask[id] = 0;
        queued[id] = 0;
      }
      touched.clear();
    }
    return depends;
  };

  // Whether putting `node` and the partitions `parts` into one partition
  // would make a cycle once every partition is fused: a path that leaves the
  // merged set and comes back, where a path reaching any node of another
  // partition continues from all of that partition's nodes (fused, they are
  // one node). torch.fx 1.13 does not check this (its filter only compares
  // the user partitions of `node` with each other), so it can propose two
  // partitions that need each other's outputs; fxcpp never does. Nodes after
  // the merged set's last node cannot lead back into it, which bounds the
  // search; a partition's nodes are read only up to that bound.
  std::vector<uint64_t> seen_stamp(max_id, 0);
  std::vector<uint64_t> in_merge(slots.capacity(), 0);
  uint64_t search = 0;
  auto creates_cycle = [&](Node* node, const std::vector<int64_t>& parts) {
    ++search;
    if (in_merge.size() < slots.size()) in_merge.resize(slots.size() * 2, 0);
    size_t hi = 0;
    for (int64_t s : parts) {
      in_merge[s] = search;
      hi = std::max(hi, slots[s].max_pos());
    }
    auto in_m = [&](const Node* w) {
      const int64_t s = slot_of[w->id()];
      return w == node || (s >= 0 && in_merge[s] == search);
    };
    std::vector<Node*> stack;
    std::unordered_set<int64_t> expanded;
    auto visit = [&](Node* w) {
      if (pos[w->id()] > hi || seen_stamp[w->id()] == search) return;
      seen_stamp[w->id()] = search;
      stack.push_back(w);
    };
    auto exits_of = [&](Node* v) {
      for (Node* w : v->users())
        if (!in_m(w)) visit(w);
    };
    exits_of(node);
    if (parts.size() > 1) {
      for (int64_t s : parts) {
        size_t bound = 0;  // the last node of the other parts
        for (int64_t t : parts)
          if (t != s) bound = std::max(bound, slots[t].max_pos());
        for (const auto& [p, v] : slots[s].nodes) {
          if (p >= bound) break;
          exits_of(v);
        }
      }
    }
    while (!stack.empty()) {
      Node* w = stack.back();
      stack.pop_back();
      // Users of w in the merged set close a cycle (visit() never enters it).
      for (Node* u : w->users())
        if (in_m(u)) return true;
      exits_of(w);
      const int64_t q = slot_of[w->id()];
      if (q >= 0 && expanded.insert(q).second) {
        for (const auto& [p, v] : slots[q].nodes) {
          if (p >= hi) break;
          visit(v);
        }
      }
    }
    return false;
  };

  // Visit the candidates in reverse topological order.
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    Node* node = *it;
    ++stamp;
    std::vector<Candidate> cands;
    size_t assigned = 0;
    for (Node* u : node->users()) {
      const int64_t s = slot_of[u->id()];
      if (s >= 0) {
        if (slot_stamp[s] == stamp) continue;
        slot_stamp[s] = stamp;
        cands.push_back(Candidate{s, nullptr});
        ++assigned;
      } else {
        cands.push_back(Candidate{-1, u});
      }
    }
    std::vector<int64_t> kept;
    if (assigned > 0) {
      if (cands.size() == 1) {
        kept.push_back(cands[0].slot);
      } else {
        std::vector<bool> depends = find_dependents(cands);
        for (size_t c = 0; c < cands.size(); ++c)
          if (cands[c].slot >= 0 && !depends[c]) kept.push_back(cands[c].slot);
      }
    }
    // torch.fx's rule proposes `kept`; take them in order as long as the
    // merge keeps the fused graph acyclic.
    std::vector<int64_t> safe;
    for (int64_t k : kept) {
      safe.push_back(k);
      if (creates_cycle(node, safe)) safe.pop_back();
    }
    kept.swap(safe);
    if (kept.empty()) {
      new_slot(node);
      continue;
    }
    // Join the first partition; the others (independent of each other) merge into it.
    int64_t target = kept[0];
    add_to(target, node);
    for (size_t i = 1; i < kept.size(); ++i) target = merge(target, kept[i]);
  }

  // getitem nodes go to their producer's partition.
  std::vector<std::pair<Node*, int64_t>> reassignment;
  for (Node* n : order) {
    if (n->users().empty()) continue;
    bool tuple_output = true;
    for (Node* u : n->users())
      if (!is_getitem(u)) {
        tuple_output = false;
        break;
      }
    if (!tuple_output) continue;
    const int64_t s = slot_of[n->id()];
    for (Node* u : n->users())
      if (slot_of[u->id()] != s) reassignment.emplace_back(u, s);
  }
  for (const auto& [u, s] : reassignment) slot_of[u->id()] = s;

  // Gather the nodes of each partition in program order.
  std::vector<std::vector<Node*>> members(slots.size());
  for (Node* n : order)
    if (slot_of[n->id()] >= 0) members[static_cast<size_t>(slot_of[n->id()])].push_back(n);
  std::vector<Partition> result;
  for (size_t s = 0; s < slots.size(); ++s) {
    if (members[s].empty()) continue;
    if (!allows_single_node_partition_) {
      size_t compute = 0;
      for (Node* n : members[s])
        if (n->op() == Opcode::CallFunction && !non_compute_ops_.count(n->target())) ++compute;
      if (compute <= 1) continue;
    }
    result.push_back(Partition{slots[s].id, std::move(members[s])});
  }
  std::sort(result.begin(), result.end(), [](const Partition& a, const Partition& b) { return a.id < b.id; });
  return result;
}

std::shared_ptr<GraphModule> CapabilityBasedPartitioner::fuse_partitions(const std::vector<Partition>& partitions) {
  std::vector<NodeList> lists;
  lists.reserve(partitions.size());
  for (const Partition& p : partitions) lists.push_back(p.nodes);
  return fuse_by_partitions(graph_module_, lists);
}

std::shared_ptr<GraphModule> CapabilityBasedPartitioner::partition_and_fuse() {
  return fuse_partitions(propose_partitions());
}

}  // namespace fx
