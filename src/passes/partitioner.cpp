// CapabilityBasedPartitioner (torch.fx passes/infra/partitioner.py) without
// torch.fx's quadratic dependency map.
#include <fx/passes/partitioner.h>

#include <algorithm>
#include <queue>
#include <unordered_map>

namespace fx {

namespace {

bool is_callable(const Node* n) {
  return n->op() == Opcode::CallFunction || n->op() == Opcode::CallMethod || n->op() == Opcode::CallModule;
}

bool is_getitem(const Node* n) { return n->op() == Opcode::CallFunction && n->target() == "operator.getitem"; }

/// Storage of one partition while proposing. Merging moves the smaller
/// node list into the larger, which takes over the kept partition's id.
struct Slot {
  int64_t id = -1;
  std::vector<Node*> nodes;
  size_t max_pos = 0;
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
    if (is_callable(n) && operator_support_->is_node_supported(submodules, n)) candidates.push_back(n);

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
    slots.push_back(Slot{next_id++, {n}, pos[n->id()]});
    slot_of[n->id()] = static_cast<int64_t>(slots.size() - 1);
    slot_cand.push_back(-1);
    slot_stamp.push_back(0);
  };
  auto add_to = [&](int64_t s, Node* n) {
    slots[s].nodes.push_back(n);
    slots[s].max_pos = std::max(slots[s].max_pos, pos[n->id()]);
    slot_of[n->id()] = s;
  };
  // Merges slot b into the partition of slot a (which keeps its id); returns the slot now holding it.
  auto merge = [&](int64_t a, int64_t b) {
    int64_t big = slots[a].nodes.size() >= slots[b].nodes.size() ? a : b;
    int64_t small = big == a ? b : a;
    for (Node* n : slots[small].nodes) {
      slots[big].nodes.push_back(n);
      slot_of[n->id()] = big;
    }
    slots[big].max_pos = std::max(slots[big].max_pos, slots[small].max_pos);
    slots[big].id = slots[a].id;
    slots[small].nodes.clear();
    slots[small].nodes.shrink_to_fit();
    slots[small].id = -1;
    return big;
  };

  // Which candidates depend on (are reachable from) another candidate: one
  // search in topological order over the nodes between the candidates.
  auto find_dependents = [&](const std::vector<Candidate>& cands) {
    const size_t k = cands.size();
    std::vector<bool> depends(k, false);
    std::unordered_map<const Node*, size_t> single_cand;
    size_t hi = 0;
    for (size_t c = 0; c < k; ++c) {
      if (cands[c].slot >= 0) {
        slot_cand[cands[c].slot] = static_cast<int64_t>(c);
        hi = std::max(hi, slots[cands[c].slot].max_pos);
      } else {
        single_cand[cands[c].single] = c;
        hi = std::max(hi, pos[cands[c].single->id()]);
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
      std::priority_queue<Item, std::vector<Item>, std::greater<Item>> heap;
      auto seed = [&](Node* n, uint64_t bit) {
        if (!mask[n->id()] && !queued[n->id()]) touched.push_back(n->id());
        mask[n->id()] |= bit;
        if (!queued[n->id()]) {
          queued[n->id()] = 1;
          heap.emplace(pos[n->id()], n);
        }
      };
      for (size_t c = base; c < k && c < base + 64; ++c) {
        const uint64_t bit = uint64_t(1) << (c - base);
        if (cands[c].slot >= 0) {
          for (Node* n : slots[cands[c].slot].nodes) seed(n, bit);
        } else {
          seed(cands[c].single, bit);
        }
      }
      while (!heap.empty()) {
        Node* v = heap.top().second;
        heap.pop();
        queued[v->id()] = 0;
        const uint64_t m = mask[v->id()];
        for (Node* w : v->users()) {
          if (pos[w->id()] > hi) continue;
          const int64_t c = owner(w);
          if (c >= 0) {
            uint64_t own = (static_cast<size_t>(c) >= base && static_cast<size_t>(c) < base + 64)
                               ? uint64_t(1) << (static_cast<size_t>(c) - base)
                               : 0;
            if (m & ~own) depends[static_cast<size_t>(c)] = true;
          }
          const uint64_t nm = mask[w->id()] | m;
          if (nm != mask[w->id()]) {
            if (!mask[w->id()] && !queued[w->id()]) touched.push_back(w->id());
            mask[w->id()] = nm;
            if (!queued[w->id()]) {
              queued[w->id()] = 1;
              heap.emplace(pos[w->id()], w);
            }
          }
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
